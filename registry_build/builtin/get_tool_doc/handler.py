"""get_tool_doc: the full documentation of a tool in the session's pinned registry."""

from __future__ import annotations

from typing import Any

from tools._core import ToolContext, ToolErrorType, ToolResponse

# Enough to cover any realistic registry while keeping the error message bounded.
MAX_LISTED_TOOLS = 50


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    tool_id: str = args["tool_id"]
    if ctx.catalog is None:
        return ToolResponse.failure(ToolErrorType.INTERNAL, "tool catalog unavailable")
    documentation = ctx.catalog.documentation(tool_id)
    if documentation is None:
        known = sorted(ctx.catalog.tool_ids())
        listed = ", ".join(known[:MAX_LISTED_TOOLS])
        if len(known) > MAX_LISTED_TOOLS:
            listed += ", …"
        return ToolResponse.failure(
            ToolErrorType.NOT_FOUND,
            f"no tool named {tool_id!r}; available tools: {listed or 'none'}",
        )
    return ToolResponse.success({"tool_id": tool_id, "documentation": documentation})
