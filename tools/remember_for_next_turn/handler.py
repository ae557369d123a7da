"""remember_for_next_turn: queue a note for the model's next turn, through an intent."""

from __future__ import annotations

from typing import Any

from tools._core import SetPendingMessage, ToolContext, ToolErrorType, ToolResponse


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    message = args["message"].strip()
    if not message:
        # The intent itself rejects a blank message; say so in the model's terms instead.
        return ToolResponse.failure(ToolErrorType.VALIDATION, "message must not be blank")
    return ToolResponse.success({"queued": True}, intents=[SetPendingMessage(message=message)])
