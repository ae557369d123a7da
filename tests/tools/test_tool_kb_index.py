"""The knowledge-base index behind kb_search and kb_get (tools._kb)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tools._kb import (
    ARTICLE_ID_PATTERN,
    ARTICLES_DIR,
    KnowledgeBase,
    load_articles,
    match_expression,
    parse_article,
    query_terms,
)

# Text users (or models) may send that is FTS5 syntax, or breaks naive quoting.
HOSTILE_QUERIES = [
    'what\'s "the" time?',
    "AND OR (",
    "NOT",
    "NEAR(hours visit, 3)",
    'opening"hours',
    "hours*",
    "title:billing",
    "-cancel +fee",
    "^start",
    "{title body}: invoice",
    "'; DROP TABLE articles; --",
    '"""',
    "a AND (b OR",
    "médecin à domicile",
    "日本語のテキスト",
    "🙂 booking 🙂",
]


def write_articles(directory: Path, articles: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for article_id, text in articles.items():
        (directory / f"{article_id}.md").write_text(text, encoding="utf-8")
    return directory


@pytest.fixture
def small_kb(tmp_path: Path) -> KnowledgeBase:
    directory = write_articles(
        tmp_path / "articles",
        {
            "parking": "# Parking at the clinic\n\nFree parking behind the clinic building.",
            "hours": "# Opening hours\n\nThe clinic opens at 8:00 on weekdays.",
            "fees": "# Fees\n\nParking fines are not refunded by the clinic.",
        },
    )
    return KnowledgeBase(directory)


def test_shipped_articles_are_well_formed() -> None:
    articles = load_articles(ARTICLES_DIR)
    assert 8 <= len(articles) <= 12
    titles = [article.title for article in articles.values()]
    assert len(set(titles)) == len(titles)
    for article_id, article in articles.items():
        assert ARTICLE_ID_PATTERN.fullmatch(article_id)
        assert article.id == article_id
        assert 40 <= len(article.body.split()) <= 300, article_id
        assert not article.body.startswith("#")


def test_parse_article_splits_title_and_body() -> None:
    article = parse_article("intro", "# Welcome home\n\nFirst line.\nSecond line.\n")
    assert article.title == "Welcome home"
    assert article.body == "First line.\nSecond line."


@pytest.mark.parametrize(
    ("article_id", "text"),
    [
        ("no-title", "Just text\n\nmore"),
        ("empty-title", "# \n\nbody"),
        ("no-body", "# Title only\n\n"),
        ("Bad Id", "# Title\n\nbody"),
    ],
)
def test_parse_article_rejects_malformed_articles(article_id: str, text: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        parse_article(article_id, text)


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("How do I book a nurse visit?", ["book", "nurse", "visit"]),
        ('what\'s "the" time?', ["time"]),
        ("AND OR (", ["and", "or"]),
        ("Parking parking PARKING", ["parking"]),
        ("?!  ()", []),
        ("", []),
    ],
)
def test_query_terms(text: str, terms: list[str]) -> None:
    assert query_terms(text) == terms


def test_query_terms_are_capped() -> None:
    assert len(query_terms(" ".join(f"word{i}" for i in range(100)))) == 16


def test_match_expression_quotes_every_term() -> None:
    assert match_expression(["near", "or"], "OR") == '"near" OR "or"'
    assert match_expression(["a"], "AND") == '"a"'
    with pytest.raises(ValueError, match="no terms"):
        match_expression([], "AND")


def test_search_ranks_articles_with_every_term_first(small_kb: KnowledgeBase) -> None:
    with small_kb:
        hits = small_kb.search("clinic parking", limit=3)
    # AND pass: "parking" and "fees" contain both words; the OR pass adds "hours".
    assert [hit.id for hit in hits][:2] == ["parking", "fees"]
    assert [hit.id for hit in hits][2] == "hours"
    assert hits[0].score >= hits[1].score
    assert hits[0].title == "Parking at the clinic"
    assert "parking" in hits[0].snippet.lower()


def test_search_respects_limit_and_returns_nothing_for_unknown_words(
    small_kb: KnowledgeBase,
) -> None:
    with small_kb:
        assert len(small_kb.search("clinic", limit=2)) == 2
        assert small_kb.search("zeppelin", limit=5) == []
        assert small_kb.search("?!", limit=5) == []


def test_search_stems_words(small_kb: KnowledgeBase) -> None:
    with small_kb:
        assert [hit.id for hit in small_kb.search("opening", limit=1)] == ["hours"]
        assert [hit.id for hit in small_kb.search("opens", limit=1)] == ["hours"]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_queries_never_raise(small_kb: KnowledgeBase, query: str) -> None:
    with small_kb:
        hits = small_kb.search(query, limit=3)
    assert len(hits) <= 3


def test_index_is_built_once_under_concurrent_first_use(
    small_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[int] = []
    real_load = load_articles
    barrier = threading.Barrier(8)

    def counting_load(directory: Path) -> dict[str, object]:
        loads.append(1)
        return dict(real_load(directory))

    monkeypatch.setattr("tools._kb.index.load_articles", counting_load)

    def search(_: int) -> list[str]:
        barrier.wait()
        return [hit.id for hit in small_kb.search("clinic", limit=3)]

    with small_kb, ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(search, range(8)))
    assert len(loads) == 1
    assert all(result == results[0] for result in results)
    assert len(results[0]) == 3


def test_closed_knowledge_base_refuses_queries(small_kb: KnowledgeBase) -> None:
    small_kb.search("clinic", limit=1)
    small_kb.close()
    small_kb.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        small_kb.search("clinic", limit=1)
