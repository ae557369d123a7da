"""Soak tool: never finishes: its deadline (1.5 s) ends it;
one journal line per phase (``soak.journal``)."""

import asyncio
from typing import Any

from soak import journal
from tools._core import ToolContext, ToolResponse

HANG_S = 3600.0


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    journal.record(ctx, "start", label=args["label"])
    try:
        await asyncio.sleep(HANG_S)
    except asyncio.CancelledError:
        journal.record(ctx, "cancelled", label=args["label"])
        raise
    journal.record(ctx, "end", label=args["label"])
    return ToolResponse.success({"label": args["label"], "run": journal.run_key(ctx)})
