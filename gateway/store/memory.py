"""The in-memory store: one gateway process, time from an injected clock."""

from __future__ import annotations

import hmac

from gateway.clock import Clock
from gateway.store.base import ResumeRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._records: dict[str, tuple[ResumeRecord, float]] = {}
        self._once: dict[str, float] = {}

    def __len__(self) -> int:
        self._purge()
        return len(self._records)

    async def park(self, record: ResumeRecord, ttl_s: float) -> None:
        self._purge()
        self._records[record.session_id] = (record, self._clock.monotonic() + ttl_s)

    async def claim(
        self, session_id: str, token_hash: str, user_id: str, tenant: str | None = None
    ) -> ResumeRecord | None:
        self._purge()
        entry = self._records.get(session_id)
        if entry is None:
            return None
        record = entry[0]
        if (
            not hmac.compare_digest(record.token_hash, token_hash)
            or record.user_id != user_id
            or record.tenant != tenant
        ):
            return None
        del self._records[session_id]
        return record

    async def drop(self, session_id: str, token_hash: str) -> None:
        entry = self._records.get(session_id)
        if entry is not None and hmac.compare_digest(entry[0].token_hash, token_hash):
            del self._records[session_id]

    async def claim_once(self, key: str, ttl_s: float) -> bool:
        self._purge()
        if key in self._once:
            return False
        self._once[key] = self._clock.monotonic() + ttl_s
        return True

    def _purge(self) -> None:
        now = self._clock.monotonic()
        for session_id in [k for k, (_, until) in self._records.items() if until <= now]:
            del self._records[session_id]
        for key in [k for k, until in self._once.items() if until <= now]:
            del self._once[key]
