"""Every node ends the sessions of a revoked key within a second: it asks the key store twice a
second which keys were revoked lately (one cheap read: a sorted set on Redis, an indexed
column in SQLite) and ends its sessions of each (``key_revoked``). Polling rather than a
message on the bus: a node whose subscription was down a moment misses nothing, and the CLI
revoking a key on a gateway without Redis reaches it the same way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

from gateway.clock import Clock
from gateway.governance.ports import KeyStore
from gateway.store import StoreUnavailable

__all__ = ["POLL_S", "RevocationWatch"]

_log = structlog.get_logger("keys")

POLL_S = 0.5
# Revocations are looked for this far back (clock skew between the revoking process and this
# node); each is acted on once.
LOOKBACK_S = 300.0


class RevocationWatch:
    def __init__(
        self,
        keys: KeyStore,
        clock: Clock,
        end_sessions: Callable[[str], Awaitable[int]],
        *,
        poll_s: float = POLL_S,
    ) -> None:
        self._keys = keys
        self._clock = clock
        self._end_sessions = end_sessions
        self._poll_s = poll_s
        self._seen: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def check(self) -> None:
        """One look: the sessions of each key revoked since the last are ended."""
        now = self._clock.now().timestamp()
        revoked = await self._keys.revoked_since(now - LOOKBACK_S)
        for key_id, when in revoked.items():
            if key_id in self._seen:
                continue
            self._seen[key_id] = when
            ended = await self._end_sessions(key_id)
            if ended:
                _log.info("key_revoked_sessions_ended", key_id=key_id, sessions=ended)
        for key_id, when in list(self._seen.items()):
            if when < now - 2 * LOOKBACK_S:
                del self._seen[key_id]

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except StoreUnavailable:
                pass  # the next look tries again; the key is refused anyway once it answers
            except Exception:
                _log.exception("revocation_watch_failed")
            await asyncio.sleep(self._poll_s)
