"""Soak tool: takes ms milliseconds (a slow tool);
one journal line per phase (``soak.journal``)."""

import asyncio
from typing import Any

from soak import journal
from tools._core import ToolContext, ToolResponse


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    journal.record(ctx, "start", label=args["label"])
    try:
        await asyncio.sleep(args.get("ms", 0) / 1000)
    except asyncio.CancelledError:
        journal.record(ctx, "cancelled", label=args["label"])
        raise
    journal.record(ctx, "end", label=args["label"])
    return ToolResponse.success({"label": args["label"], "run": journal.run_key(ctx)})
