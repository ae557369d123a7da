"""What the gateway keeps to govern sessions: keys, teams and users' limits (``KeyStore``) and
the budget counters and concurrency slots (``BudgetCounters``), and the calls it placed
(``CallBook``).

Two backends keep both: ``SqliteGovernance`` on one node without Redis (keys and counters in
``GATEWAY_DATA_DIR/governance.sqlite3``, surviving a restart; concurrency slots in memory, as the
sessions they count are), and ``RedisGovernance`` for several nodes (every check-and-charge one
Lua script, atomic across nodes). ``tests/unit/governance`` runs one suite on both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gateway.calls.records import CallRecord
from gateway.keys.records import ApiKey, Team, UserLimits

__all__ = ["BudgetCounters", "CallBook", "Governance", "KeyStore"]

# Counters are kept this long after their window (the usage report reads them).
COUNTERS_KEPT_S = 400 * 86400
# A placed call's record is kept this long (GET /v1/calls/{id}; the audit log keeps the rest).
CALLS_KEPT_S = 90 * 86400


class KeyStore(Protocol):
    async def key_by_hash(self, secret_hash: str) -> ApiKey | None: ...

    async def key(self, key_id: str) -> ApiKey | None: ...

    async def put_key(self, key: ApiKey) -> None:
        """Create or replace (by ``key_id``; its hash never changes)."""
        ...

    async def keys(self) -> list[ApiKey]: ...

    async def revoked_since(self, since: float) -> dict[str, float]:
        """Keys revoked at ``since`` (unix time) or later: id → when (each node ends their
        sessions: ``RevocationWatch``)."""
        ...

    async def team(self, team_id: str) -> Team | None: ...

    async def put_team(self, team: Team) -> None: ...

    async def teams(self) -> list[Team]: ...

    async def user_limits(self, user_id: str) -> UserLimits | None: ...

    async def put_user_limits(self, user: UserLimits) -> None: ...

    async def users_with_limits(self) -> list[UserLimits]: ...


class BudgetCounters(Protocol):
    async def charge(
        self,
        entries: Sequence[tuple[str, float]],
        read: Sequence[str],
        *,
        day: str,
        scopes: Sequence[str],
    ) -> dict[str, float]:
        """Add each ``(counter, amount)``, note ``scopes`` as charged on ``day`` (the usage
        report's index), and return the totals of ``read`` after the charge: one atomic step."""
        ...

    async def read(self, counters: Sequence[str]) -> dict[str, float]:
        """Totals (0 for a counter never charged)."""
        ...

    async def charged_on(self, day: str) -> set[str]:
        """The scopes charged on ``day`` (``key:…``, ``user:…``, ``team:…``, ``model:…``)."""
        ...

    async def acquire_slots(
        self, session_id: str, node: str, slots: Sequence[tuple[str, int]]
    ) -> str | None:
        """A concurrency slot in each ``(scope, limit)``, all or none: None when taken, else
        the first scope that is full. Slots of dead nodes' sessions do not count."""
        ...

    async def keep_slots(self, session_id: str, node: str, scopes: Sequence[str]) -> None:
        """The session runs on ``node`` now (resumed there): counted, whatever the limit."""
        ...

    async def release_slots(self, session_id: str, scopes: Sequence[str]) -> None: ...


class CallBook(Protocol):
    """The calls the gateway placed (``POST /v1/calls``), by our id and by the carrier's."""

    async def put_call(self, record: CallRecord) -> None: ...

    async def call(self, call_id: str) -> CallRecord | None: ...

    async def call_by_carrier(self, carrier: str, carrier_call_id: str) -> CallRecord | None: ...


class Governance(KeyStore, BudgetCounters, CallBook, Protocol):
    async def close(self) -> None: ...
