"""kb_get: one knowledge-base article in full (see tools._kb)."""

from __future__ import annotations

import asyncio
from typing import Any

from tools._core import ToolContext, ToolErrorType, ToolResponse
from tools._kb import default_knowledge_base


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    article_id: str = args["id"]
    # The first call reads the articles from disk: keep it off the event loop.
    article = await asyncio.to_thread(default_knowledge_base().get, article_id)
    if article is None:
        return ToolResponse.failure(
            ToolErrorType.NOT_FOUND,
            f"no knowledge-base article with id {article_id!r}; use kb_search to find article ids",
        )
    return ToolResponse.success({"id": article.id, "title": article.title, "body": article.body})
