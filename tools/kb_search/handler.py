"""kb_search: full-text search over the bundled knowledge base (see tools._kb)."""

from __future__ import annotations

import asyncio
from typing import Any

from tools._core import ToolContext, ToolErrorType, ToolResponse
from tools._kb import default_knowledge_base, query_terms

DEFAULT_LIMIT = 3


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    query: str = args["query"]
    limit: int = args.get("limit", DEFAULT_LIMIT)
    if not query_terms(query):
        return ToolResponse.failure(
            ToolErrorType.VALIDATION,
            "the query has no words to search for; rephrase it with keywords",
        )
    # The first call reads the articles from disk and builds the index: keep it off the loop.
    hits = await asyncio.to_thread(default_knowledge_base().search, query, limit)
    return ToolResponse.success({"results": [hit.to_dict() for hit in hits]})
