"""A TTL result cache for idempotent tools, keyed by user, tool and canonical arguments."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from gateway.clock import Clock
from tools._core import ToolResponse

__all__ = ["ResultCache"]


@dataclass(frozen=True, slots=True)
class _Entry:
    expires_at: float
    response: ToolResponse


class ResultCache:
    """Bounded LRU with expiry on the injected clock. Only successes are cached.

    The key includes the user: an idempotent tool may still read that user's own data, and one
    user's result must never answer another's call.
    """

    def __init__(self, clock: Clock, max_entries: int = 2048) -> None:
        self._clock = clock
        self._max = max_entries
        self._entries: OrderedDict[tuple[str, str, bytes], _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, user_id: str, tool_id: str, canonical_args: bytes) -> ToolResponse | None:
        key = (user_id, tool_id, canonical_args)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= self._clock.monotonic():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry.response

    def put(
        self,
        user_id: str,
        tool_id: str,
        canonical_args: bytes,
        response: ToolResponse,
        ttl_s: float,
    ) -> None:
        if not response.ok or ttl_s <= 0:
            return
        key = (user_id, tool_id, canonical_args)
        self._entries[key] = _Entry(self._clock.monotonic() + ttl_s, response)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
