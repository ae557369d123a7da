from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tools._core import ToolErrorType, ToolResponse

RunTool = Callable[..., Awaitable[ToolResponse]]


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("How late can I cancel a visit?", "cancel-reschedule"),
        ("opening hours on saturday", "opening-hours"),
        ("who can read my data", "privacy-data"),
        ("my invoice looks wrong", "billing-payments"),
        ("chest pain emergency number", "emergency-numbers"),
        ("caregiver severity care log", "care-logs"),
    ],
)
async def test_finds_the_relevant_article_first(run_tool: RunTool, query: str, best: str) -> None:
    response = await run_tool("kb_search", {"query": query})
    assert response.ok
    results = response.data["results"]
    assert 1 <= len(results) <= 3  # default limit
    assert results[0]["id"] == best
    assert set(results[0]) == {"id", "title", "snippet", "score"}
    assert results[0]["snippet"]
    scores = [result["score"] for result in results]
    assert scores == sorted(scores, reverse=True)


async def test_limit_is_applied(run_tool: RunTool) -> None:
    one = await run_tool("kb_search", {"query": "visit", "limit": 1})
    many = await run_tool("kb_search", {"query": "visit", "limit": 10})
    assert len(one.data["results"]) == 1
    assert len(many.data["results"]) > 3
    ids = [result["id"] for result in many.data["results"]]
    assert len(set(ids)) == len(ids)


async def test_no_match_is_an_empty_success(run_tool: RunTool) -> None:
    response = await run_tool("kb_search", {"query": "submarine xylophone"})
    assert response.ok
    assert response.data == {"results": []}


@pytest.mark.parametrize(
    "query",
    ['what\'s "the" time?', "AND OR (", "NEAR(fee, 2)", "billing*", '"unbalanced', "a:b OR"],
)
async def test_fts_syntax_in_the_query_is_plain_text(run_tool: RunTool, query: str) -> None:
    response = await run_tool("kb_search", {"query": query, "limit": 5})
    assert response.ok
    assert len(response.data["results"]) <= 5


async def test_operator_words_are_searched_as_words(run_tool: RunTool) -> None:
    response = await run_tool("kb_search", {"query": "NEAR(fee, cancel)"})
    assert response.ok
    assert response.data["results"][0]["id"] == "cancel-reschedule"


@pytest.mark.parametrize("query", ["?!", "   ", "()*:^"])
async def test_query_without_words_is_a_validation_failure(run_tool: RunTool, query: str) -> None:
    response = await run_tool("kb_search", {"query": query})
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.VALIDATION
    assert response.error.retryable is False
