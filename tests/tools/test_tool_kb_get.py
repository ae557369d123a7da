from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tools._core import ToolErrorType, ToolResponse
from tools._kb import ARTICLES_DIR

RunTool = Callable[..., Awaitable[ToolResponse]]


async def test_returns_the_whole_article(run_tool: RunTool) -> None:
    response = await run_tool("kb_get", {"id": "opening-hours"})
    assert response.ok
    assert response.data["id"] == "opening-hours"
    assert response.data["title"] == "Opening hours and how to reach us"
    source = (ARTICLES_DIR / "opening-hours.md").read_text(encoding="utf-8")
    assert response.data["body"] == source.split("\n", 1)[1].strip()


async def test_every_search_result_can_be_fetched(run_tool: RunTool) -> None:
    search = await run_tool("kb_search", {"query": "medication", "limit": 10})
    assert search.data["results"]
    for result in search.data["results"]:
        article = await run_tool("kb_get", {"id": result["id"]})
        assert article.ok
        assert article.data["title"] == result["title"]


@pytest.mark.parametrize("article_id", ["parking", "opening_hours", "0"])
async def test_unknown_id_is_not_found(run_tool: RunTool, article_id: str) -> None:
    response = await run_tool("kb_get", {"id": article_id})
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.NOT_FOUND
    assert response.error.retryable is False
    assert response.error.partial_side_effects is False
    assert article_id in response.error.message
    assert "kb_search" in response.error.message
