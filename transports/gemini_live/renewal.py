"""What a renewed Gemini connection is told about what happened on the one before it. Pure.

Calls answered on a connection that then dropped are unknown to the next one: their results go
as text. A question the model had not answered yet is asked again, with a note that its tool
calls already ran, so that they do not run twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from transports.base import ToolResult

__all__ = ["ORPHANS_PREFIX", "orphaned_results_text", "question_again", "result_text"]

ORPHANS_PREFIX = (
    "Results of tool calls that were still running when the connection to you was renewed "
    "(they are done; do not call them again): "
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


def question_again(question: str, answered_results: Sequence[str], called_tools: bool) -> str:
    """The unanswered question, asked again on the new connection."""
    if answered_results:
        # The question already led to tool calls; they must not run twice.
        return question + (
            "\n(Before the connection was renewed, tools already returned — do not call "
            "them again: " + "; ".join(answered_results) + ")"
        )
    if called_tools:
        return question + (
            "\n(Its tool calls were already made before the connection was renewed; "
            "their results follow — do not call them again.)"
        )
    return question


def result_text(result: ToolResult, limit: int = 2000) -> str:
    """A tool result as the model reads it in a turn of text (cut past ``limit``)."""
    text = orjson.dumps(result.envelope, default=dict).decode()
    return text if len(text) <= limit else text[:limit] + " …[cut]"
