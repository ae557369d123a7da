"""A node's connections to Redis: at most ``GATEWAY_REDIS_MAX_CONNECTIONS``, and what a burst
opened is let go once it has been idle ``GATEWAY_REDIS_IDLE_S``.

redis-py's own pool keeps every connection it ever opened: one burst (a Redis restart, after
which every session is recorded again at once) leaves a node holding tens of idle sockets for
the rest of its life. This pool opens at most ``max_connections``; a command that finds them all
busy waits for one (up to ``timeout``, then it fails like an unreachable store). ``close_idle``
closes the connections nobody used for ``idle_s``, keeping the ``KEEP_WARM`` most recently used
open; the pool opens new ones when a later burst needs them.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any

from redis.asyncio import BlockingConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

__all__ = ["IDLE_S", "KEEP_WARM", "MAX_CONNECTIONS", "IdleClosingPool"]

MAX_CONNECTIONS = 32  # GATEWAY_REDIS_MAX_CONNECTIONS's default
IDLE_S = 30.0  # GATEWAY_REDIS_IDLE_S's default
KEEP_WARM = 2  # idle connections kept open however long they wait: the next command's


class IdleClosingPool(BlockingConnectionPool):
    def __init__(
        self,
        *,
        idle_s: float = IDLE_S,
        monotonic: Callable[[], float],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.idle_s = idle_s
        self._monotonic = monotonic
        self._released_at: weakref.WeakKeyDictionary[AbstractConnection, float] = (
            weakref.WeakKeyDictionary()
        )

    async def release(self, connection: AbstractConnection) -> None:
        self._released_at[connection] = self._monotonic()
        await super().release(connection)

    async def close_idle(self) -> int:
        """Close and forget the idle connections unused for ``idle_s`` or longer, but the
        ``KEEP_WARM`` most recently used of those still open; how many it closed."""
        now = self._monotonic()
        idle = self._available_connections  # the most recently released last (taken first)
        warm = [c for c in idle if c.is_connected][-KEEP_WARM:]
        stale = [
            c
            for c in idle
            if not any(c is w for w in warm) and now - self._released_at.get(c, now) >= self.idle_s
        ]
        for connection in stale:  # out of the pool's reach before the first await
            idle.remove(connection)
        for connection in stale:
            with contextlib.suppress(TimeoutError, RedisError, OSError):  # gone either way
                await connection.disconnect()
        return len(stale)
