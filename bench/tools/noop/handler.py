"""noop: the benchmark's tool; it does nothing, so only the dispatch around it is measured."""

from __future__ import annotations

from typing import Any

from tools._core import ToolContext, ToolResponse


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    return ToolResponse.success({})
