"""The in-memory store: one gateway process, time from an injected clock.

The same rules as ``RedisStore`` (``tests/unit/store`` runs one suite on both); only nothing is
shared, so a session never moves to another node.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gateway.clock import Clock
from gateway.security.addresses import ConnectionRateLimiter
from gateway.store.base import (
    TOMBSTONE_S,
    Claim,
    ClaimOutcome,
    Fenced,
    LedgerEntry,
    LedgerState,
    RecordMissing,
    SessionRecord,
    SessionSnapshot,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    shared = False

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._records: dict[str, tuple[SessionRecord, float]] = {}  # id → (record, expires)
        self._nodes: dict[str, tuple[float, float]] = {}  # node → (expires, last seen, unix)
        self._confirmations: dict[tuple[str, str], float] = {}
        self._ledger: dict[str, dict[str, LedgerEntry]] = {}
        self._once: dict[str, float] = {}
        self._rates: dict[int, ConnectionRateLimiter] = {}
        self._users: dict[str, dict[str, str]] = {}  # user → session → node
        self._queues: dict[str, asyncio.Queue[dict[str, Any] | None]] = {}
        # No expiry is due before this: until then a purge has nothing to do (it scans every
        # record, and each store call purges first). Never later than the true earliest.
        self._next_expiry = float("inf")

    def __len__(self) -> int:
        """Sessions on record (live or parked, not expired; tombstones not counted)."""
        self._purge()
        return sum(1 for record, _ in self._records.values() if record.state != "ended")

    def parked(self) -> int:
        """Sessions parked now: a client could resume them."""
        self._purge()
        return sum(1 for record, _ in self._records.values() if record.state == "parked")

    def _now(self) -> float:
        return self._clock.monotonic()

    def _unix(self) -> float:
        return self._clock.now().timestamp()

    def _until(self, ttl_s: float) -> float:
        """An expiry ``ttl_s`` from now, noted for ``_purge``."""
        until = self._now() + ttl_s
        self._next_expiry = min(self._next_expiry, until)
        return until

    def _purge(self) -> None:
        now = self._now()
        if now < self._next_expiry:
            return
        for key in [k for k, (_, until) in self._records.items() if until <= now]:
            del self._records[key]
            self._ledger.pop(key, None)
        for once in [k for k, until in self._once.items() if until <= now]:
            del self._once[once]
        for conf in [k for k, until in self._confirmations.items() if until <= now]:
            del self._confirmations[conf]
        self._next_expiry = min(
            (
                *(until for _, until in self._records.values()),
                *self._once.values(),
                *self._confirmations.values(),
            ),
            default=float("inf"),
        )

    # -- nodes -----------------------------------------------------------------------------------

    async def heartbeat(self, node: str, ttl_s: float) -> None:
        self._nodes[node] = (self._now() + ttl_s, self._unix())

    async def node_alive(self, node: str) -> bool:
        entry = self._nodes.get(node)
        return entry is not None and entry[0] > self._now()

    async def up_for_s(self) -> float:
        return float("inf")  # it forgets nothing while its process lives

    # -- sessions --------------------------------------------------------------------------------

    def _get(self, session_id: str) -> SessionRecord | None:
        self._purge()
        entry = self._records.get(session_id)
        return None if entry is None else entry[0]

    def _owned(self, session_id: str, epoch: int) -> SessionRecord:
        record = self._get(session_id)
        if record is None:
            raise RecordMissing(f"no record of session {session_id}")
        if record.epoch != epoch or record.state == "ended":
            raise Fenced(f"session {session_id} is not owned at epoch {epoch}")
        return record

    async def register(
        self, record: SessionRecord, ttl_s: float, *, only_if_absent: bool = False
    ) -> bool:
        if only_if_absent and self._get(record.session_id) is not None:
            return False
        self._records[record.session_id] = (record, self._until(ttl_s))
        return True

    async def save(
        self,
        session_id: str,
        epoch: int,
        snapshot: SessionSnapshot,
        *,
        token_hash: str | None = None,
        parked: bool = False,
        ttl_s: float,
    ) -> None:
        record = self._owned(session_id, epoch)
        updated = replace(
            record,
            snapshot=snapshot,
            token_hash=record.token_hash if token_hash is None else token_hash,
            state="parked" if parked else "live",
            saved_at=self._unix(),
        )
        self._records[session_id] = (updated, self._until(ttl_s))

    async def claim(
        self,
        session_id: str,
        token_hash: str,
        user_id: str,
        tenant: str | None,
        *,
        node: str,
        window_s: float,
        force: bool = False,
    ) -> Claim:
        record = self._get(session_id)
        if (
            record is None
            or record.state == "ended"
            or not hmac.compare_digest(record.token_hash, token_hash)
            or record.user_id != user_id
            or record.tenant != tenant
        ):
            return Claim(ClaimOutcome.NOT_FOUND)
        recovered = False
        if record.state == "live" and record.owner != node:
            if await self.node_alive(record.owner):
                if not force:
                    return Claim(ClaimOutcome.BUSY, previous_owner=record.owner)
            else:
                _, last_seen = self._nodes.get(record.owner, (0.0, record.saved_at))
                if self._unix() - max(last_seen, record.saved_at) > window_s:
                    return Claim(ClaimOutcome.NOT_FOUND)
                recovered = True
        claimed = replace(record, owner=node, epoch=record.epoch + 1, state="live")
        self._records[session_id] = (claimed, self._records[session_id][1])
        return Claim(
            ClaimOutcome.CLAIMED, claimed, previous_owner=record.owner, recovered=recovered
        )

    async def end(self, session_id: str, epoch: int) -> None:
        record = self._get(session_id)
        if record is None or record.epoch != epoch:
            return
        tombstone = replace(record, state="ended", token_hash="", owner="")
        self._records[session_id] = (tombstone, self._until(TOMBSTONE_S))
        self._ledger.pop(session_id, None)
        for key in [k for k in self._confirmations if k[0] == session_id]:
            del self._confirmations[key]

    async def owner(self, session_id: str) -> tuple[str, int] | None:
        record = self._get(session_id)
        if record is None:
            return None
        return ("", 0) if record.state == "ended" else (record.owner, record.epoch)

    # -- confirmations ---------------------------------------------------------------------------

    async def open_confirmation(
        self, session_id: str, epoch: int, confirmation_id: str, ttl_s: float
    ) -> None:
        self._owned(session_id, epoch)
        self._confirmations[(session_id, confirmation_id)] = self._until(ttl_s)

    async def take_confirmation(self, session_id: str, epoch: int, confirmation_id: str) -> bool:
        self._owned(session_id, epoch)
        return self._confirmations.pop((session_id, confirmation_id), None) is not None

    # -- the tool-call ledger --------------------------------------------------------------------

    async def ledger_start(
        self, session_id: str, epoch: int, node: str, calls: Sequence[tuple[str, str]]
    ) -> dict[str, LedgerEntry | None]:
        self._owned(session_id, epoch)
        ledger = self._ledger.setdefault(session_id, {})
        started: dict[str, LedgerEntry | None] = {}
        for call_id, tool_id in calls:
            known = ledger.get(call_id)
            if known is None:
                ledger[call_id] = LedgerEntry(
                    call_id, tool_id, LedgerState.STARTED, node, epoch, self._unix()
                )
            started[call_id] = known
        return started

    async def ledger_finish(
        self, session_id: str, call_id: str, envelope: Mapping[str, Any]
    ) -> str | None:
        ledger = self._ledger.setdefault(session_id, {})
        entry = ledger.get(call_id)
        if entry is None:  # an entry the store lost (as Redis may): the result is kept too
            entry = LedgerEntry(call_id, "", LedgerState.STARTED, "", 0, self._unix())
        if entry.state is LedgerState.STARTED:
            ledger[call_id] = replace(entry, state=LedgerState.FINISHED, envelope=dict(envelope))
        record = self._get(session_id)
        return None if record is None else record.owner

    async def ledger_deliver(
        self, session_id: str, epoch: int, call_ids: Sequence[str]
    ) -> set[str]:
        self._owned(session_id, epoch)
        ledger = self._ledger.setdefault(session_id, {})
        delivered: set[str] = set()
        for call_id in call_ids:  # the owner holds each result: deliverable unless delivered
            entry = ledger.get(call_id)
            if entry is None:
                entry = LedgerEntry(call_id, "", LedgerState.FINISHED, "", epoch, self._unix())
            if entry.state is not LedgerState.DELIVERED:
                ledger[call_id] = replace(entry, state=LedgerState.DELIVERED)
                delivered.add(call_id)
        return delivered

    async def ledger_open(self, session_id: str) -> list[LedgerEntry]:
        return [
            entry
            for entry in self._ledger.get(session_id, {}).values()
            if entry.state is not LedgerState.DELIVERED
        ]

    # -- limits and single-use keys ------------------------------------------------------------

    async def admit_address(self, address: str, per_minute: int, now: float) -> bool:
        limiter = self._rates.setdefault(per_minute, ConnectionRateLimiter(per_minute))
        return limiter.admit(address, now)

    async def acquire_user_slot(self, user_id: str, session_id: str, node: str, limit: int) -> bool:
        slots = self._users.setdefault(user_id, {})
        if session_id not in slots and len(slots) >= limit:
            return False
        slots[session_id] = node
        return True

    async def keep_user_slot(self, user_id: str, session_id: str, node: str) -> None:
        self._users.setdefault(user_id, {})[session_id] = node

    async def release_user_slot(self, user_id: str, session_id: str) -> None:
        slots = self._users.get(user_id)
        if slots is not None:
            slots.pop(session_id, None)
            if not slots:
                del self._users[user_id]

    async def claim_once(self, key: str, ttl_s: float) -> bool:
        self._purge()
        if key in self._once:
            return False
        self._once[key] = self._until(ttl_s)
        return True

    # -- the bus ---------------------------------------------------------------------------------

    async def publish(self, node: str, message: Mapping[str, Any]) -> None:
        queue = self._queues.get(node)
        if queue is not None:
            queue.put_nowait(dict(message))

    async def messages(self, node: str) -> AsyncIterator[dict[str, Any]]:
        queue = self._queues.setdefault(node, asyncio.Queue())
        while (message := await queue.get()) is not None:
            yield message

    async def close(self) -> None:
        for queue in self._queues.values():
            queue.put_nowait(None)
