"""Soak tool: raises an exception of its own;
one journal line per phase (``soak.journal``)."""

from typing import Any

from soak import journal
from tools._core import ToolContext, ToolResponse


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    journal.record(ctx, "start", label=args["label"])
    journal.record(ctx, "raised", label=args["label"])
    raise RuntimeError("soak_raise raises on purpose")
