"""Warm connections: per target, a small bounded pool of upstream connections opened before any
session asks for one (``Prewarm`` transports: OpenAI Realtime), so that a new session skips the
TLS and WebSocket handshakes and the provider's set-up and only configures its connection.

One keeper task per target holds the pool at its size: it replaces a connection the provider
closed, closes one idle longer than ``idle_s`` (and opens a fresh one), and refills after each
``take``. A connection that cannot be opened counts against the target's breaker, and the keeper
backs off (doubling up to ``MAX_BACKOFF_S``) instead of hammering a provider that is down.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from gateway.clock import Clock
from gateway.routing.aliases import Target
from gateway.routing.health import TargetHealth
from transports.base import TransportError, WarmUpstream

__all__ = ["MAX_BACKOFF_S", "WarmPool"]

_log = structlog.get_logger("routing.pool")

MAX_BACKOFF_S = 30.0
FIRST_BACKOFF_S = 0.5

OpenWarm = Callable[[Target], Awaitable[WarmUpstream]]
# Which connections serve a target: its provider and the model it will really use (a target
# naming none uses its provider's configured model, the same as one naming that model).
KeyOf = Callable[[Target], str]
# Told of each session that looked for a connection: the target's key, and whether it got one.
OnTake = Callable[[str, bool], None]


@dataclass(slots=True)
class _Warm:
    connection: WarmUpstream
    opened_at: float


class WarmPool:
    def __init__(
        self,
        sizes: Sequence[tuple[Target, int]],
        *,
        idle_s: float,
        open_warm: OpenWarm,
        clock: Clock,
        health: TargetHealth | None = None,
        key_of: KeyOf = lambda target: target.key,
        on_take: OnTake = lambda key, taken: None,
    ) -> None:
        """``sizes``: each target pooled and how many connections it keeps (0: none)."""
        self._key_of = key_of
        self._on_take = on_take
        self._sizes = {key_of(target): size for target, size in sizes if size > 0}
        self._targets = {key_of(target): target for target, size in sizes if size > 0}
        self._idle_s = idle_s
        self._open = open_warm
        self._clock = clock
        self._health = health
        self._ready: dict[str, deque[_Warm]] = {key: deque() for key in self._sizes}
        self._wake: dict[str, asyncio.Event] = {key: asyncio.Event() for key in self._sizes}
        self._keepers: list[asyncio.Task[None]] = []
        self._changed = asyncio.Event()  # set at each change of what is ready, or a failed open
        self._closed = False
        self.taken = 0  # connections handed to sessions
        self.missed = 0  # sessions that found none ready

    def __contains__(self, target: Target) -> bool:
        return self._key_of(target) in self._sizes

    def ready(self, target: Target) -> int:
        return len(self._ready.get(self._key_of(target), ()))

    async def until(self, settled: Callable[[], bool]) -> None:
        """Until ``settled()`` holds, checked again at each change of the pool (opened,
        dropped, taken, failed to open)."""
        while not settled():
            self._changed.clear()
            await self._changed.wait()

    def start(self) -> None:
        for key in self._sizes:
            self._keepers.append(asyncio.create_task(self._keep(key), name=f"pool:{key}"))

    def take(self, target: Target) -> WarmUpstream | None:
        """A connection for a session starting on ``target`` now, or None."""
        key = self._key_of(target)
        ready = self._ready.get(key)
        if ready is None:
            return None  # not a pooled target
        now = self._clock.monotonic()
        while ready:
            warm = ready.popleft()
            if warm.connection.alive and now - warm.opened_at < self._idle_s:
                self._wake[key].set()
                self._changed.set()
                self.taken += 1
                self._on_take(key, True)
                return warm.connection
            self._spend(warm.connection)
        self._wake[key].set()
        self.missed += 1
        self._on_take(key, False)
        return None

    async def close(self) -> None:
        self._closed = True
        for keeper in self._keepers:
            keeper.cancel()
        for keeper in self._keepers:
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        for ready in self._ready.values():
            while ready:
                await ready.popleft().connection.close()

    # -- the keeper of one target --------------------------------------------------------------

    async def _keep(self, key: str) -> None:
        target, size = self._targets[key], self._sizes[key]
        ready, wake = self._ready[key], self._wake[key]
        backoff = FIRST_BACKOFF_S
        while not self._closed:
            self._drop_stale(ready)
            if len(ready) < size:
                if await self._open_one(target, ready):
                    backoff = FIRST_BACKOFF_S
                    continue
                await self._sleep(wake, backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            wake.clear()
            await self._until_change(ready, wake)

    async def _open_one(self, target: Target, ready: deque[_Warm]) -> bool:
        try:
            connection = await self._open(target)
        except (TransportError, TimeoutError, OSError) as exc:
            _log.info("pool_open_failed", target=target.key, reason=str(exc)[:200])
            if self._health is not None:
                await self._health.failure(target.key, "pool")
            self._changed.set()
            return False
        if self._closed:
            await connection.close()
            return False
        ready.append(_Warm(connection, self._clock.monotonic()))
        self._changed.set()
        return True

    def _drop_stale(self, ready: deque[_Warm]) -> None:
        now = self._clock.monotonic()
        for warm in list(ready):
            if not warm.connection.alive or now - warm.opened_at >= self._idle_s:
                ready.remove(warm)
                self._spend(warm.connection)
                self._changed.set()

    def _spend(self, connection: WarmUpstream) -> None:
        if connection.alive:
            task = asyncio.get_running_loop().create_task(connection.close())
            task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def _until_change(self, ready: deque[_Warm], wake: asyncio.Event) -> None:
        """Until a connection closes, the oldest one is due to be replaced, or one is taken."""
        oldest = min((w.opened_at for w in ready), default=self._clock.monotonic())
        due = max(0.0, oldest + self._idle_s - self._clock.monotonic())
        waiters: list[asyncio.Future[object]] = [asyncio.ensure_future(wake.wait())]
        waiters += [asyncio.ensure_future(w.connection.wait_closed()) for w in ready]
        try:
            await asyncio.wait(waiters, timeout=due, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _sleep(self, wake: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), seconds)
        wake.clear()
