"""The stall faults (``fakes.faults``) of the fake OpenAI Realtime server, as pure code.

``ResponseStalls`` sits between the session and the shell: the shell passes every list of
actions through ``filter`` before carrying it out, and asks ``stalled(response_id)`` before it
pulls a response's next step (a stalled response's delivery waits, as ``/hang`` does, until it
is halted: a cancel, a barge-in, the socket going). The session itself is untouched: it goes on
believing the response runs, so a ``response.create`` meanwhile gets
``conversation_already_has_active_response``, as it would from a server whose model stalled.

What belongs to a response: ``response.created`` / ``response.done`` (by ``response.id``),
every event with its ``response_id``, the ``conversation.item.added`` / ``.done`` of its output
items (known from its ``response.output_item.added``) and the ``rate_limits.updated`` right
after its ``response.done``. Everything else passes: ``session.*``, ``error``, the
``input_audio_buffer.*`` events (``speech_started``, ``speech_stopped``, ``committed``), the
user's items and their input transcription.

- ``stall_first_output``: read as ``response.created`` comes; then nothing of that response is
  sent (no ``response.created``, no deltas, no ``response.done``, not even the ``response.done``
  ``cancelled`` of a cancel or a barge-in), and its steps are never pulled;
- ``stall_mid_response_after = N``: the chunks are ``response.output_audio.delta``,
  ``response.output_text.delta`` and ``response.function_call_arguments.delta`` (a transcript
  delta rides along with its audio and is not counted); after the ``N``-th one nothing more of
  that response is sent. ``N = 0``: ``response.created`` only.

The echo and dispatch modes' responses are filtered the same way (they have no steps to hold).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fakes.faults import UpstreamFaults
from fakes.openai_realtime.wire import Action, Event, Send

__all__ = ["CHUNK_EVENTS", "ResponseStalls"]

CHUNK_EVENTS = frozenset(
    {
        "response.output_audio.delta",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
    }
)
_ITEM_EVENTS = frozenset({"conversation.item.added", "conversation.item.done"})
_ENDS = frozenset({"response.created", "response.done"})


class ResponseStalls:
    """One connection's responses under the server's faults."""

    def __init__(self, faults: UpstreamFaults) -> None:
        self.faults = faults
        self._chunks: dict[str, int] = {}  # response id → chunks sent, while it runs
        self._stalled: set[str] = set()
        self._items: dict[str, str] = {}  # output item id → its response's id, while it runs
        self._drop_rate_limits = False  # a stalled response's response.done was just dropped

    def stalled(self, response_id: str) -> bool:
        return response_id in self._stalled

    def filter(self, actions: Sequence[Action]) -> list[Action]:
        """The actions to carry out: ``actions`` without the events of stalled responses."""
        kept: list[Action] = []
        for action in actions:
            if not isinstance(action, Send) or self._keep(action.event):
                kept.append(action)
        return kept

    def _keep(self, event: Event) -> bool:
        kind = event.get("type")
        if kind == "rate_limits.updated" and self._drop_rate_limits:
            self._drop_rate_limits = False
            return False
        self._drop_rate_limits = False
        response_id = self._response_of(event)
        if response_id is None:
            return True
        if kind == "response.created":
            return self._started(response_id)
        if kind == "response.output_item.added":
            self._items[event["item"]["id"]] = response_id
        if kind == "response.done":
            self._ended(response_id)
        if response_id in self._stalled:
            self._drop_rate_limits = kind == "response.done"
            if kind == "response.done":
                self._stalled.discard(response_id)
            return False
        if kind in CHUNK_EVENTS and response_id in self._chunks:
            self._chunks[response_id] += 1
            if self.faults.take_stall_mid(self._chunks[response_id]):
                self._stalled.add(response_id)
        return True

    def _started(self, response_id: str) -> bool:
        if self.faults.take_stall_first():
            self._stalled.add(response_id)
            return False
        self._chunks[response_id] = 0
        if self.faults.take_stall_mid(0):
            self._stalled.add(response_id)
        return True

    def _ended(self, response_id: str) -> None:
        self._chunks.pop(response_id, None)
        for item_id in [i for i, owner in self._items.items() if owner == response_id]:
            del self._items[item_id]

    def _response_of(self, event: Event) -> str | None:
        kind = event.get("type")
        if kind in _ENDS:
            response: Any = event.get("response")
            return response.get("id") if isinstance(response, dict) else None
        response_id = event.get("response_id")
        if isinstance(response_id, str):
            return response_id
        if kind in _ITEM_EVENTS:
            item: Any = event.get("item")
            item_id = item.get("id") if isinstance(item, dict) else None
            return self._items.get(item_id) if isinstance(item_id, str) else None
        return None
