"""What gateway nodes share (``base``): sessions and their owners, confirmations, the tool-call
ledger, limits, single-use keys and a bus. ``MemoryStore`` is the embedded default (one
process); ``gateway.store.redis.RedisStore`` is shared by every node of a cluster
(``GATEWAY_REDIS_URL``), imported only when configured."""

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
    SessionStore,
    StoreUnavailable,
    hash_token,
)
from gateway.store.memory import MemoryStore

__all__ = [
    "TOMBSTONE_S",
    "Claim",
    "ClaimOutcome",
    "Fenced",
    "LedgerEntry",
    "LedgerState",
    "MemoryStore",
    "RecordMissing",
    "SessionRecord",
    "SessionSnapshot",
    "SessionStore",
    "StoreUnavailable",
    "hash_token",
]
