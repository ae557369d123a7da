"""Full-text search over the knowledge-base articles with SQLite FTS5 and bm25 ranking.

Theory of operation: an article is a markdown file ``<id>.md`` whose first line is ``# Title``.
``KnowledgeBase`` reads every article and builds an in-memory FTS5 table the first time it is
asked anything; a lock makes that happen once even when several tool calls arrive together in
different threads, and serialises the later queries on the one connection.

User text never reaches FTS5's query parser as is: ``query_terms`` keeps only words, and
``match_expression`` quotes each one, so operators (``AND``, ``NEAR``), quotes and brackets in
the user's text are searched as plain words or dropped, and can never be a syntax error.
A search first asks for articles that contain every term, then fills the remaining places with
articles that contain any of them.
"""

from __future__ import annotations

import atexit
import re
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

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

ARTICLES_DIR = Path(__file__).resolve().parent / "articles"
ARTICLE_ID_PATTERN = re.compile(r"^[a-z0-9_-]{1,64}$")

# Longer queries add noise, not recall, and each term costs a posting-list scan.
MAX_TERMS = 16
# bm25 column weights (id, title, body): a word in the title says more than one in the body.
_BM25_WEIGHTS = (0.0, 4.0, 1.0)
_SNIPPET_TOKENS = 16

_WORD = re.compile(r"\w+", re.UNICODE)
# Words too common to tell articles apart; "s" and "t" are what is left of "what's", "don't".
# fmt: off
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "do", "does", "for",
    "from", "how", "i", "if", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our",
    "please", "should", "so", "tell", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "to", "us", "was", "we", "what", "when", "where", "which", "who",
    "why", "will", "with", "would", "you", "your", "s", "t",
})
# fmt: on


@dataclass(frozen=True, slots=True)
class Article:
    id: str
    title: str
    body: str


@dataclass(frozen=True, slots=True)
class SearchHit:
    id: str
    title: str
    snippet: str
    # Higher is better (bm25 negated and rounded).
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "snippet": self.snippet, "score": self.score}


def parse_article(article_id: str, text: str) -> Article:
    """Split a markdown article into title and body; ``ValueError`` if it is malformed."""
    if not ARTICLE_ID_PATTERN.fullmatch(article_id):
        raise ValueError(f"article id {article_id!r} does not match {ARTICLE_ID_PATTERN.pattern}")
    first, _, rest = text.lstrip("\ufeff").partition("\n")
    if not first.startswith("# ") or not first[2:].strip():
        raise ValueError(f"article {article_id!r} must start with a '# Title' line")
    body = rest.strip()
    if not body:
        raise ValueError(f"article {article_id!r} has no body")
    return Article(id=article_id, title=first[2:].strip(), body=body)


def load_articles(directory: Path) -> dict[str, Article]:
    """Every ``*.md`` article in ``directory``, keyed by id (the file stem), in id order."""
    articles: dict[str, Article] = {}
    for path in sorted(directory.glob("*.md")):
        articles[path.stem] = parse_article(path.stem, path.read_text(encoding="utf-8"))
    return articles


def query_terms(text: str) -> list[str]:
    """The words worth searching for: lower-cased, without stop words, first ``MAX_TERMS``.

    A query made only of stop words keeps them (searching "the" beats refusing it); text
    without any word gives an empty list.
    """
    words = [word.lower() for word in _WORD.findall(text)]
    kept = [word for word in words if word not in _STOPWORDS] or words
    unique = list(dict.fromkeys(kept))
    return unique[:MAX_TERMS]


def match_expression(terms: list[str], operator: Literal["AND", "OR"]) -> str:
    """An FTS5 MATCH expression where every term is a quoted string, never an operator."""
    if not terms:
        raise ValueError("no terms to match")
    # \w+ words contain no double quote, but escape anyway so the invariant is local.
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
    return f" {operator} ".join(quoted)


class KnowledgeBase:
    """Articles of one directory with a lazily built, thread-safe, in-memory FTS5 index."""

    def __init__(self, directory: Path = ARTICLES_DIR) -> None:
        self._directory = directory
        self._lock = threading.Lock()
        self._articles: dict[str, Article] | None = None
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def articles(self) -> Mapping[str, Article]:
        with self._lock:
            return self._ensure_articles()

    def get(self, article_id: str) -> Article | None:
        return self.articles().get(article_id)

    def search(self, query: str, limit: int) -> list[SearchHit]:
        """Best ``limit`` articles for ``query``; empty when nothing matches."""
        terms = query_terms(query)
        if not terms or limit < 1:
            return []
        with self._lock:
            conn = self._ensure_index()
            hits = self._query(conn, match_expression(terms, "AND"), limit, ())
            if len(hits) < limit and len(terms) > 1:
                seen = tuple(hit.id for hit in hits)
                hits += self._query(conn, match_expression(terms, "OR"), limit - len(hits), seen)
            return hits

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # The helpers below run with self._lock held.

    def _ensure_articles(self) -> dict[str, Article]:
        if self._articles is None:
            self._articles = load_articles(self._directory)
        return self._articles

    def _ensure_index(self) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("knowledge base is closed")
        if self._conn is None:
            articles = self._ensure_articles()
            # Queries run in whichever worker thread the tool got; the lock serialises them.
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            try:
                conn.execute(
                    "CREATE VIRTUAL TABLE articles USING fts5("
                    "id UNINDEXED, title, body, tokenize='porter unicode61')"
                )
                conn.executemany(
                    "INSERT INTO articles (id, title, body) VALUES (?, ?, ?)",
                    [(a.id, a.title, a.body) for a in articles.values()],
                )
                conn.commit()
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _query(
        self, conn: sqlite3.Connection, expression: str, limit: int, exclude: tuple[str, ...]
    ) -> list[SearchHit]:
        placeholders = ",".join("?" * len(exclude))
        exclusion = f"AND id NOT IN ({placeholders})" if exclude else ""
        rows = conn.execute(
            f"""
            SELECT id, title,
                   snippet(articles, 2, '', '', ' … ', {_SNIPPET_TOKENS}),
                   bm25(articles, {", ".join(str(w) for w in _BM25_WEIGHTS)}) AS rank
            FROM articles
            WHERE articles MATCH ? {exclusion}
            ORDER BY rank, id
            LIMIT ?
            """,
            (expression, *exclude, limit),
        ).fetchall()
        return [
            SearchHit(id=row[0], title=row[1], snippet=row[2].strip(), score=round(-row[3], 4))
            for row in rows
        ]


_default: KnowledgeBase | None = None
_default_lock = threading.Lock()


def default_knowledge_base() -> KnowledgeBase:
    """The process-wide knowledge base over ``ARTICLES_DIR``, closed when the process exits."""
    global _default
    with _default_lock:
        if _default is None:
            _default = KnowledgeBase(ARTICLES_DIR)
            atexit.register(_default.close)
        return _default
