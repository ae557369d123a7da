"""ignore_user: suppress audio replies and transcripts for a while, through intents."""

from __future__ import annotations

from typing import Any

from tools._core import SuppressAudio, SuppressTranscript, ToolContext, ToolResponse

DEFAULT_DURATION_MS = 10_000


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    duration_ms: int = args.get("duration_ms", DEFAULT_DURATION_MS)
    return ToolResponse.success(
        {"suppressed_ms": duration_ms},
        intents=[
            SuppressAudio(duration_ms=duration_ms),
            SuppressTranscript(duration_ms=duration_ms),
        ],
    )
