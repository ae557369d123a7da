"""Run one short SQLite transaction against a file in the tool data directory, off the loop.

Each call opens its own connection and closes it (tools run in threads and SQLite connections
must not be shared between them), takes the write lock up front with ``BEGIN IMMEDIATE`` so that
a check-then-insert (the calendar's overlap test) cannot race another writer, and turns "database
is locked" into a retryable ``TRANSIENT`` error. A transaction that fails is rolled back, so a
failure here never leaves a partial write.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tools._core import ToolError, ToolErrorType

__all__ = ["run_in_transaction"]

T = TypeVar("T")

# Below the voice hard timeout (3 s), so a busy database fails as TRANSIENT, not as TIMEOUT.
BUSY_TIMEOUT_S = 1.5


async def run_in_transaction(path: Path, schema: str, work: Callable[[sqlite3.Connection], T]) -> T:
    """Create the database and ``schema`` (idempotent DDL) if missing, then run ``work``."""
    try:
        return await asyncio.to_thread(_run_sync, path, schema, work)
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise ToolError(
                ToolErrorType.TRANSIENT,
                "the data store is busy; try again in a moment",
                retryable=True,
            ) from None
        raise


def _run_sync(path: Path, schema: str, work: Callable[[sqlite3.Connection], T]) -> T:
    path.parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: transactions are opened and closed explicitly below.
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.executescript(schema)
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = work(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result
    finally:
        conn.close()


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text
