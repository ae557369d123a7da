"""Soak tool: runs in the background for ms milliseconds;
one journal line per phase (``soak.journal``)."""

from typing import Any

from soak import journal
from tools._core import ToolContext, ToolResponse


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    return await journal.sleep_journaled(args, ctx)
