"""What a renewed Gemini connection is told about what happened on the one before it. Pure.

Calls answered on a connection that then dropped are unknown to the next one: their results go
as text. A question the model had not answered yet is asked again; but one that already led to
tool calls is not: asked again, a model calls its tools again (told not to, or not), and they
would run twice. It is given back as context, followed by the results it led to (those that
come later follow as text when they come), and the model answers it from them.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from transports.base import ToolResult
from transports.gemini_live import wire

__all__ = [
    "ANSWERED_PREFIX",
    "ORPHANS_PREFIX",
    "orphaned_results_text",
    "question_again",
    "result_text",
]

ORPHANS_PREFIX = (
    "Results of tool calls that were still running when the connection to you was renewed "
    "(they are done; do not call them again): "
)
ANSWERED_PREFIX = (
    "Results of the tool calls made for the question above before the connection to you was "
    "renewed (they are done; do not call them again): "
)
RESULT_CHARS = 4000


def orphaned_results_text(tool_response_frames: Sequence[str]) -> str | None:
    """The results held in unsent ``toolResponse`` frames, as one user text (None: none)."""
    results = [
        f"{r.get('name')} call {r.get('id')}: "
        + orjson.dumps(r.get("response")).decode()[:RESULT_CHARS]
        for frame in tool_response_frames
        for r in orjson.loads(frame)["toolResponse"]["functionResponses"]
    ]
    return ORPHANS_PREFIX + "; ".join(results) if results else None


def question_again(question: str, answered_results: Sequence[str], called_tools: bool) -> list[str]:
    """The frames that give the unanswered question back to a new connection."""
    if not (answered_results or called_tools):
        return [wire.text_turn(question)]
    frames = [wire.text_turn(question, turn_complete=False)]  # context: no answer to it yet
    if answered_results:
        frames.append(wire.text_turn(ANSWERED_PREFIX + "; ".join(answered_results)))
    return frames


def result_text(result: ToolResult, limit: int = 2000) -> str:
    """A tool result as the model reads it in a turn of text (cut past ``limit``)."""
    text = orjson.dumps(result.envelope, default=dict).decode()
    return text if len(text) <= limit else text[:limit] + " …[cut]"
