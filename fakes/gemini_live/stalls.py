"""The stall faults (``fakes.faults``) of the fake Gemini Live server, as pure code.

``TurnStalls`` sits between the session and the shell: the shell passes every list of actions
through ``filter`` before carrying it out, and asks ``hung(generation)`` before it pulls a
generation's next step (a stalled generation's delivery waits, as ``/hang`` does, until it is
halted: a barge-in, the socket going). The session itself is untouched: it goes on believing the
turn runs, so a barge-in still interrupts it (and what that sends is held back too).

Live messages carry no response ids, so the unit is the model's turn: from its first message
(or its first generation's ``Begin``) to its ``turnComplete``. Its messages are ``modelTurn``,
``outputTranscription``, ``generationComplete``, ``interrupted``, ``turnComplete`` (with its
``usageMetadata``), ``toolCall``, ``toolCallCancellation``, the messages the API reference does
not list (``/unknown``) and the ``sessionResumptionUpdate``s inside it, the
``{"newHandle": "", "resumable": false}`` that opens it included. What passes always:
``setupComplete``, ``goAway``, ``inputTranscription`` (the user's side), and a
``sessionResumptionUpdate`` between turns.

- ``stall_first_output``: read as a turn opens; then nothing of that turn is sent, and its
  generations' steps are never pulled;
- ``stall_mid_response_after = N``: the chunks are the ``serverContent.modelTurn`` messages
  (20 ms of audio, or a word of text; the echo mode's frames too); after the ``N``-th one
  nothing more of that turn is sent. ``N = 0``: nothing at all (as ``stall_first_output``).

A turn held back ends at its (unsent) ``turnComplete``: after an interruption the next turn is
judged afresh. The echo mode's frames are one turn that never ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fakes.faults import UpstreamFaults
from fakes.gemini_live.wire import Action, Begin, Send, SendRaw

__all__ = ["TurnStalls"]

_ALWAYS = frozenset({"setupComplete", "goAway"})
_RESUMPTION = "sessionResumptionUpdate"
_OPENING_RESUMPTION = {"newHandle": "", "resumable": False}


def _is_turn_output(action: Action) -> bool:
    """A message of the model's turn (the resumption updates aside)."""
    if isinstance(action, SendRaw):
        return True  # the echo mode's modelTurn
    if not isinstance(action, Send):
        return False
    message = action.message
    if any(key in _ALWAYS or key == _RESUMPTION for key in message):
        return False
    content: Any = message.get("serverContent")
    return not (isinstance(content, dict) and set(content) == {"inputTranscription"})


def _is_chunk(action: Action) -> bool:
    if isinstance(action, SendRaw):
        return True
    content: Any = action.message.get("serverContent") if isinstance(action, Send) else None
    return isinstance(content, dict) and "modelTurn" in content


def _is_turn_end(action: Action) -> bool:
    content: Any = action.message.get("serverContent") if isinstance(action, Send) else None
    return isinstance(content, dict) and content.get("turnComplete") is True


def _opens_turn(action: Action) -> bool:
    return isinstance(action, Begin) or _is_turn_output(action)


class TurnStalls:
    """One connection's turns under the server's faults."""

    def __init__(self, faults: UpstreamFaults) -> None:
        self.faults = faults
        self._in_turn = False
        self._stalled = False  # the turn in progress is held back
        self._chunks = 0  # the turn's chunks sent
        self._generations: set[int] = set()  # begun in the turn in progress

    def hung(self, generation: int) -> bool:
        return self._stalled and generation in self._generations

    def filter(self, actions: Sequence[Action]) -> list[Action]:
        """The actions to carry out: ``actions`` without what a held-back turn sends."""
        kept: list[Action] = []
        for index, action in enumerate(actions):
            if not self._in_turn and (
                _opens_turn(action) or self._opening_resumption(actions, index)
            ):
                self._open_turn()
            if isinstance(action, Begin) and self._in_turn:
                self._generations.add(action.generation)
            if self._keep(action):
                kept.append(action)
            if self._in_turn and _is_turn_end(action):
                self._in_turn = self._stalled = False
                self._generations.clear()
        return kept

    def _opening_resumption(self, actions: Sequence[Action], index: int) -> bool:
        """The ``{"newHandle": "", "resumable": false}`` that opens a turn: right before its
        ``Begin`` or ``toolCall``."""
        action = actions[index]
        if not (
            isinstance(action, Send) and action.message.get(_RESUMPTION) == _OPENING_RESUMPTION
        ):
            return False
        following = actions[index + 1] if index + 1 < len(actions) else None
        return following is not None and _opens_turn(following)

    def _open_turn(self) -> None:
        self._in_turn = True
        self._chunks = 0
        self._stalled = self.faults.take_stall_first() or self.faults.take_stall_mid(0)

    def _keep(self, action: Action) -> bool:
        if not self._in_turn:
            return True
        if self._stalled:
            resumption = isinstance(action, Send) and _RESUMPTION in action.message
            return not (resumption or _is_turn_output(action))
        if _is_chunk(action):
            self._chunks += 1
            self._stalled = self.faults.take_stall_mid(self._chunks)
        return True
