"""The client's session's turn detection and tool choice as the gateway session takes them
(``transports.base.TurnDetection`` and ``ToolChoice``, as our protocol's ``session.start`` and
``session.update`` carry them). Pure.

``audio.input.turn_detection: null`` is push-to-talk (manual turns); a detector (``server_vad``
or ``semantic_vad``) is server turns with the client's settings, which an OpenAI upstream gets
as they are. The defaults of ``session.created`` (OpenAI's server VAD, ``tool_choice: "auto"``)
are the gateway's own (None: ``session.start`` leaves them out).
"""

from __future__ import annotations

from transports.base import ForcedTool
from transports.base import ToolChoice as UpstreamChoice
from transports.base import TurnDetection as UpstreamTurns

from .session_config import ForcedFunction, SessionView, TurnDetection

__all__ = ["turn_changes", "upstream_tool_choice", "upstream_turns"]


def upstream_turns(view: SessionView) -> UpstreamTurns | None:
    """The session's turn detection (None: the gateway's default)."""
    turns = view.turn_detection
    if turns is None:
        return UpstreamTurns(manual=True)
    return None if turns == TurnDetection() else UpstreamTurns(settings=turns.to_wire())


def upstream_tool_choice(view: SessionView) -> UpstreamChoice | None:
    """The session's tool choice (None: ``auto``, the gateway's default)."""
    choice = view.tool_choice
    if isinstance(choice, ForcedFunction):
        return ForcedTool(choice.name)
    return None if choice == "auto" else choice


def turn_changes(
    before: SessionView, after: SessionView
) -> tuple[UpstreamTurns | None, UpstreamChoice | None]:
    """What an update changed of the two, as our ``session.update`` names them (None:
    unchanged; a default is named, not None)."""
    turns = choice = None
    if after.turn_detection != before.turn_detection:
        turns = upstream_turns(after) or UpstreamTurns()
    if after.tool_choice != before.tool_choice:
        choice = upstream_tool_choice(after) or "auto"
    return turns, choice
