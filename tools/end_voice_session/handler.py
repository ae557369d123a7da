"""end_voice_session: ask the orchestrator to end the voice session after this turn."""

from __future__ import annotations

from typing import Any

from tools._core import EndVoiceSession, ToolContext, ToolResponse


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    # The reason is for the audit record (the runner logs the arguments' hash and the call).
    return ToolResponse.success({"ending": True}, intents=[EndVoiceSession()])
