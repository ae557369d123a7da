"""Keys, budget counters and placed calls on one node, without Redis: a SQLite file under
``GATEWAY_DATA_DIR`` (stdlib ``sqlite3``, WAL).

Each operation is one short transaction on the event loop's thread (a key lookup at a
connection, a charge at a response's end or a clock tick: tens of microseconds, never per audio
frame). Keys and counters survive a restart; concurrency slots are in memory, as the sessions
they count (a restart ends them). ``":memory:"`` keeps everything in memory (tests).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import orjson

from gateway.budgets.limits import parse_limits
from gateway.calls.records import CallRecord
from gateway.governance.ports import CALLS_KEPT_S
from gateway.keys.records import ApiKey, Team, UserLimits

__all__ = ["FILE_NAME", "SqliteGovernance"]

FILE_NAME = "governance.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
    key_id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL UNIQUE, record BLOB NOT NULL,
    revoked_at REAL);
CREATE INDEX IF NOT EXISTS keys_by_revocation ON keys (revoked_at);
CREATE TABLE IF NOT EXISTS teams (team_id TEXT PRIMARY KEY, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS user_limits (user_id TEXT PRIMARY KEY, limits BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, total REAL NOT NULL);
CREATE TABLE IF NOT EXISTS charged (day TEXT NOT NULL, scope TEXT NOT NULL,
    PRIMARY KEY (day, scope));
CREATE TABLE IF NOT EXISTS calls (call_id TEXT PRIMARY KEY, carrier TEXT NOT NULL,
    carrier_call_id TEXT, created_at REAL NOT NULL, record BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS calls_by_carrier ON calls (carrier, carrier_call_id);
"""


class SqliteGovernance:
    def __init__(self, path: Path | str) -> None:
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        # session → (node, scopes): one node's live sessions.
        self._slots: dict[str, dict[str, str]] = {}

    @classmethod
    def in_folder(cls, folder: Path) -> SqliteGovernance:
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder / FILE_NAME)

    # -- keys, teams, users ----------------------------------------------------------------------

    def _one(self, sql: str, *args: object) -> bytes | None:
        row = self._db.execute(sql, args).fetchone()
        return None if row is None else bytes(row[0])

    async def key_by_hash(self, secret_hash: str) -> ApiKey | None:
        raw = self._one("SELECT record FROM keys WHERE secret_hash = ?", secret_hash)
        return None if raw is None else ApiKey.from_record(orjson.loads(raw))

    async def key(self, key_id: str) -> ApiKey | None:
        raw = self._one("SELECT record FROM keys WHERE key_id = ?", key_id)
        return None if raw is None else ApiKey.from_record(orjson.loads(raw))

    async def put_key(self, key: ApiKey) -> None:
        self._db.execute(
            "INSERT INTO keys (key_id, secret_hash, record, revoked_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key_id) DO UPDATE SET record = excluded.record, "
            "revoked_at = excluded.revoked_at",
            (key.key_id, key.secret_hash, orjson.dumps(key.to_record()), key.revoked_at),
        )

    async def revoked_since(self, since: float) -> dict[str, float]:
        rows = self._db.execute(
            "SELECT key_id, revoked_at FROM keys WHERE revoked_at >= ?", (since,)
        )
        return {row[0]: float(row[1]) for row in rows}

    async def keys(self) -> list[ApiKey]:
        rows = self._db.execute("SELECT record FROM keys ORDER BY key_id").fetchall()
        return [ApiKey.from_record(orjson.loads(bytes(row[0]))) for row in rows]

    async def team(self, team_id: str) -> Team | None:
        raw = self._one("SELECT record FROM teams WHERE team_id = ?", team_id)
        return None if raw is None else Team.from_record(orjson.loads(raw))

    async def put_team(self, team: Team) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO teams (team_id, record) VALUES (?, ?)",
            (team.team_id, orjson.dumps(team.to_record())),
        )

    async def teams(self) -> list[Team]:
        rows = self._db.execute("SELECT record FROM teams ORDER BY team_id").fetchall()
        return [Team.from_record(orjson.loads(bytes(row[0]))) for row in rows]

    async def user_limits(self, user_id: str) -> UserLimits | None:
        raw = self._one("SELECT limits FROM user_limits WHERE user_id = ?", user_id)
        return None if raw is None else UserLimits(user_id, parse_limits(orjson.loads(raw)))

    async def put_user_limits(self, user: UserLimits) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO user_limits (user_id, limits) VALUES (?, ?)",
            (user.user_id, orjson.dumps(user.limits.as_json())),
        )

    async def users_with_limits(self) -> list[UserLimits]:
        rows = self._db.execute("SELECT user_id, limits FROM user_limits ORDER BY user_id")
        return [UserLimits(row[0], parse_limits(orjson.loads(bytes(row[1])))) for row in rows]

    # -- placed calls ----------------------------------------------------------------------------

    async def put_call(self, record: CallRecord) -> None:
        """Written merged with what is kept (``CallRecord.merged``), in one transaction."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            raw = self._one("SELECT record FROM calls WHERE call_id = ?", record.call_id)
            if raw is not None:
                record = CallRecord.from_record(orjson.loads(raw)).merged(record)
            db.execute(
                "INSERT OR REPLACE INTO calls "
                "(call_id, carrier, carrier_call_id, created_at, record) VALUES (?, ?, ?, ?, ?)",
                (
                    record.call_id,
                    record.carrier,
                    record.carrier_call_id,
                    record.created_at,
                    orjson.dumps(record.to_record()),
                ),
            )
            # Records past their keeping time go as new ones come (no sweeper to run).
            db.execute(
                "DELETE FROM calls WHERE created_at < ?", (record.created_at - CALLS_KEPT_S,)
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    async def call(self, call_id: str) -> CallRecord | None:
        raw = self._one("SELECT record FROM calls WHERE call_id = ?", call_id)
        return None if raw is None else CallRecord.from_record(orjson.loads(raw))

    async def call_by_carrier(self, carrier: str, carrier_call_id: str) -> CallRecord | None:
        raw = self._one(
            "SELECT record FROM calls WHERE carrier = ? AND carrier_call_id = ?",
            carrier,
            carrier_call_id,
        )
        return None if raw is None else CallRecord.from_record(orjson.loads(raw))

    # -- counters --------------------------------------------------------------------------------

    async def charge(
        self,
        entries: Sequence[tuple[str, float]],
        read: Sequence[str],
        *,
        day: str,
        scopes: Sequence[str],
    ) -> dict[str, float]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT INTO counters (name, total) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET total = total + excluded.total",
                entries,
            )
            db.executemany(
                "INSERT OR IGNORE INTO charged (day, scope) VALUES (?, ?)",
                [(day, scope) for scope in scopes],
            )
            totals = self._totals(read)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return totals

    def _totals(self, counters: Sequence[str]) -> dict[str, float]:
        totals = dict.fromkeys(counters, 0.0)
        wanted = list(totals)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for name, total in self._db.execute(
                f"SELECT name, total FROM counters WHERE name IN ({marks})", chunk
            ):
                totals[name] = float(total)
        return totals

    async def read(self, counters: Sequence[str]) -> dict[str, float]:
        return self._totals(counters)

    async def charged_on(self, day: str) -> set[str]:
        rows = self._db.execute("SELECT scope FROM charged WHERE day = ?", (day,))
        return {row[0] for row in rows}

    # -- concurrency slots (this node's sessions) -----------------------------------------------

    async def acquire_slots(
        self, session_id: str, node: str, slots: Sequence[tuple[str, int]]
    ) -> str | None:
        for scope, limit in slots:
            held = self._slots.get(scope, {})
            if sum(1 for s in held if s != session_id) >= limit:
                return scope
        for scope, _ in slots:
            self._slots.setdefault(scope, {})[session_id] = node
        return None

    async def keep_slots(self, session_id: str, node: str, scopes: Sequence[str]) -> None:
        for scope in scopes:
            self._slots.setdefault(scope, {})[session_id] = node

    async def release_slots(self, session_id: str, scopes: Sequence[str]) -> None:
        for scope in scopes:
            held = self._slots.get(scope)
            if held is not None:
                held.pop(session_id, None)
                if not held:
                    del self._slots[scope]

    async def close(self) -> None:
        self._db.close()
