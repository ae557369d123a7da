from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from tools._core import ToolCatalog, ToolContext, ToolErrorType, ToolResponse

MakeCtx = Callable[..., ToolContext]
RunTool = Callable[..., Awaitable[ToolResponse]]

TOOL = "get_tool_doc"


class FolderCatalog:
    """A catalog over tool folders on disk, like the registry artifact's documentation."""

    def __init__(self, tools_dir: Path) -> None:
        self._docs = {
            path.parent.name: path.read_text()
            for path in sorted(tools_dir.glob("*/doc.md"))
            if not path.parent.name.startswith("_")
        }

    def tool_ids(self) -> list[str]:
        return list(self._docs)

    def documentation(self, tool_id: str) -> str | None:
        return self._docs.get(tool_id)


class NumberedCatalog:
    def __init__(self, count: int) -> None:
        self._ids = [f"tool_{i:03d}" for i in range(count)]

    def tool_ids(self) -> list[str]:
        return self._ids

    def documentation(self, tool_id: str) -> str | None:
        return None


def catalog_ctx(make_ctx: MakeCtx, catalog: ToolCatalog) -> ToolContext:
    return make_ctx(tool_id=TOOL, catalog=catalog)


async def test_returns_the_documentation(
    run_tool: RunTool, make_ctx: MakeCtx, tools_dir: Path
) -> None:
    ctx = catalog_ctx(make_ctx, FolderCatalog(tools_dir))
    response = await run_tool(TOOL, {"tool_id": "kb_search"}, ctx)
    assert response.ok
    assert response.data["tool_id"] == "kb_search"
    assert response.data["documentation"] == (tools_dir / "kb_search" / "doc.md").read_text()


async def test_unknown_tool_lists_the_available_ones(
    run_tool: RunTool, make_ctx: MakeCtx, tools_dir: Path
) -> None:
    ctx = catalog_ctx(make_ctx, FolderCatalog(tools_dir))
    response = await run_tool(TOOL, {"tool_id": "send_fax"}, ctx)
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.NOT_FOUND
    assert "'send_fax'" in response.error.message
    assert "get_current_time, ignore_user, kb_get, kb_search" in response.error.message


async def test_long_tool_lists_are_cut(run_tool: RunTool, make_ctx: MakeCtx) -> None:
    response = await run_tool(TOOL, {"tool_id": "nope"}, catalog_ctx(make_ctx, NumberedCatalog(80)))
    assert response.error is not None
    assert "tool_049, …" in response.error.message
    assert "tool_050" not in response.error.message


async def test_empty_catalog(run_tool: RunTool, make_ctx: MakeCtx) -> None:
    response = await run_tool(TOOL, {"tool_id": "nope"}, catalog_ctx(make_ctx, NumberedCatalog(0)))
    assert response.error is not None
    assert response.error.message.endswith("available tools: none")


async def test_missing_catalog_is_an_internal_failure(run_tool: RunTool, make_ctx: MakeCtx) -> None:
    response = await run_tool(TOOL, {"tool_id": "kb_get"}, make_ctx(catalog=None))
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.INTERNAL
    assert response.error.message == "tool catalog unavailable"
