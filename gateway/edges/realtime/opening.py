"""What the gateway session of ``/v1/realtime`` opens with, and how a later ``session.update``
reaches a session already open.

The bridge opens the session (and so its upstream) as soon as the client connects, with the
session as ``session.created`` shows it, while the client's first ``session.update`` is still
on its way: the upstream's connect then overlaps the client's own set-up instead of delaying
its first audio. What an update changes reaches the open session in one of two ways
(``reconfiguration``):

- in place, as our protocol's ``session.update``: the output modality, the instructions, the
  turn detection and the tool choice, which every upstream takes mid-session (OpenAI in-band;
  Gemini with a new setup of its own);
- by a new session (``REOPEN``), for anything an upstream is told once, when it opens: the
  voice, the client's tools, instructions cleared back to the gateway's default. The bridge
  does that only while the client has not used the first session; once it has, such a change
  is refused, as before.

Pure: no I/O, no event loop.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from gateway.edges.realtime.client_tools import ToolCheck, client_tools_of
from gateway.edges.realtime.session_config import SessionView
from gateway.edges.realtime.turn_options import upstream_tool_choice, upstream_turns
from gateway.protocol import AudioFormat, Mode, SessionStart, SessionUpdate
from gateway.providers import PROVIDERS
from transports.base import TurnDetection

__all__ = ["AUDIO_RATE", "REOPEN", "Reopen", "reconfiguration", "session_start"]

AUDIO_RATE: Final = 24000  # PCM16 at 24 kHz both ways: the GA format this endpoint speaks


@dataclass(frozen=True, slots=True)
class Reopen:
    """The open session cannot become the wanted one: end it unused, open another."""


REOPEN: Final = Reopen()


def session_start(
    view: SessionView, provider: str | None, check_tools: ToolCheck, *, alias: bool = False
) -> SessionStart:
    """The gateway session the client's session is, as ``view`` shows it (``CompatError`` for
    client tools that break the rules, which a ``session.update`` has checked already).
    ``alias``: the model is one of the operator's aliases, passed on as it is."""
    voice = view.voice if isinstance(view.voice, str) else None
    record = PROVIDERS.get(provider)
    return SessionStart(
        mode=Mode.TEXT if view.modality == "text" else Mode.VOICE,
        provider=provider,
        # The model by its name where the name is the upstream's own (OpenAI's); the others
        # pick theirs by mode (Gemini's voice and text models differ), from the settings.
        model=(
            view.model if alias or (record is not None and record.model_names.passed_on) else None
        ),
        voice=voice,
        instructions=view.instructions or None,
        audio=AudioFormat(input_rate=AUDIO_RATE, output_rate=AUDIO_RATE),
        metadata={"client": "openai-realtime"},
        client_tools=client_tools_of(view.tools, check_tools),
        turn_detection=upstream_turns(view),
        tool_choice=upstream_tool_choice(view),
    )


def reconfiguration(opened: SessionStart, wanted: SessionStart) -> SessionUpdate | Reopen | None:
    """How a session opened as ``opened`` becomes ``wanted``: nothing to do (None), our
    ``session.update`` of what changed in place, or ``REOPEN``."""
    if opened == wanted:
        return None
    in_place = dataclasses.replace(
        opened,
        mode=wanted.mode,
        instructions=wanted.instructions,
        turn_detection=wanted.turn_detection,
        tool_choice=wanted.tool_choice,
    )
    # Instructions cleared go back to the gateway's default, which only a start applies.
    cleared = wanted.instructions is None and opened.instructions is not None
    if in_place != wanted or cleared:
        return REOPEN
    turns, choice = wanted.turn_detection, wanted.tool_choice
    return SessionUpdate(
        mode=None if wanted.mode == opened.mode else wanted.mode,
        instructions=None if wanted.instructions == opened.instructions else wanted.instructions,
        # None on a start is the default, which an update names
        turn_detection=None if turns == opened.turn_detection else turns or TurnDetection(),
        tool_choice=None if choice == opened.tool_choice else choice or "auto",
    )
