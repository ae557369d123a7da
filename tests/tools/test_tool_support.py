"""Helpers shared by the tool handlers (tools._support)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import tools._support.sqlite_store as sqlite_store
from tools._core import ToolError, ToolErrorType
from tools._support import format_utc_offset, parse_datetime_arg, resolve_zone, run_in_transaction

SCHEMA = "CREATE TABLE IF NOT EXISTS items (name TEXT NOT NULL);"


def count_items(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        count: int = conn.execute("SELECT count(*) FROM items").fetchone()[0]
        return count


def test_resolve_zone() -> None:
    assert resolve_zone("Europe/Paris") == ZoneInfo("Europe/Paris")
    with pytest.raises(ToolError) as caught:
        resolve_zone("Nowhere/Land")
    assert caught.value.type is ToolErrorType.VALIDATION


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("2025-03-14T10:00:00+01:00", None, datetime(2025, 3, 14, 9, tzinfo=UTC)),
        ("2025-03-14T10:00:00Z", None, datetime(2025, 3, 14, 10, tzinfo=UTC)),
        (" 2025-03-14T10:00 ", ZoneInfo("Europe/Paris"), datetime(2025, 3, 14, 9, tzinfo=UTC)),
        ("2025-03-14", UTC, datetime(2025, 3, 14, tzinfo=UTC)),
    ],
)
def test_parse_datetime_arg(text: str, zone: ZoneInfo | None, expected: datetime) -> None:
    parsed = parse_datetime_arg("start", text, zone)
    assert parsed.tzinfo is not None
    assert parsed == expected


def test_parse_datetime_arg_without_offset_or_zone_fails() -> None:
    with pytest.raises(ToolError, match="UTC offset") as caught:
        parse_datetime_arg("taken_at", "2025-03-14T10:00:00", None)
    assert caught.value.type is ToolErrorType.VALIDATION


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (timedelta(0), "+00:00"),
        (timedelta(hours=5, minutes=30), "+05:30"),
        (timedelta(hours=-3, minutes=-30), "-03:30"),
        (timedelta(hours=-10), "-10:00"),
    ],
)
def test_format_utc_offset(offset: timedelta, text: str) -> None:
    assert format_utc_offset(datetime(2025, 1, 1, tzinfo=timezone(offset))) == text


async def test_run_in_transaction_creates_the_file_and_commits(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "store.sqlite"

    def insert(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO items VALUES ('a')")
        return "done"

    assert await run_in_transaction(path, SCHEMA, insert) == "done"
    assert count_items(path) == 1


async def test_run_in_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"

    def insert_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO items VALUES ('a')")
        raise LookupError("boom")

    with pytest.raises(LookupError, match="boom"):
        await run_in_transaction(path, SCHEMA, insert_then_fail)
    assert count_items(path) == 0


async def test_busy_database_is_a_retryable_transient_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_S", 0.05)
    path = tmp_path / "store.sqlite"
    with closing(sqlite3.connect(path, isolation_level=None)) as holder:
        holder.executescript(SCHEMA)
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(ToolError) as caught:
            await run_in_transaction(path, SCHEMA, lambda conn: None)
        holder.execute("ROLLBACK")
    assert caught.value.type is ToolErrorType.TRANSIENT
    assert caught.value.retryable is True
    assert caught.value.partial_side_effects is False
