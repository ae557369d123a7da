"""Soak tool: needs the user's confirmation, then records;
one journal line per phase (``soak.journal``)."""

from typing import Any

from soak import journal
from tools._core import ToolContext, ToolResponse


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    journal.record(ctx, "start", label=args["label"])
    journal.record(ctx, "end", label=args["label"])
    return ToolResponse.success({"label": args["label"], "run": journal.run_key(ctx)})
