"""The bundled knowledge base: markdown articles in ``articles/`` with a full-text index.

Used by the ``kb_search`` and ``kb_get`` tools. The index lives in memory and is built on first
use, once per process (see ``index.py``).
"""

from tools._kb.index import (
    ARTICLE_ID_PATTERN,
    ARTICLES_DIR,
    Article,
    KnowledgeBase,
    SearchHit,
    default_knowledge_base,
    load_articles,
    match_expression,
    parse_article,
    query_terms,
)

__all__ = [
    "ARTICLES_DIR",
    "ARTICLE_ID_PATTERN",
    "Article",
    "KnowledgeBase",
    "SearchHit",
    "default_knowledge_base",
    "load_articles",
    "match_expression",
    "parse_article",
    "query_terms",
]
