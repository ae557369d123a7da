"""Found by the soak: Redis restarted empty while a client's socket had just dropped (its
session parked on node b). b's heartbeat came back after a gap longer than a lease, so b first
checked the owner of each of its ~80 sessions, then recorded each again, one store round trip
after another: 3.6 s on a loaded machine before the parked session's record was back, 4.7 s
after Redis was. Meanwhile the client resumed on node a, whose claim found no record with Redis
up for more than a lease (the window in which ``CLAIM``'s "not found" is only "not recorded
yet"), and was told ``resume_failed``, final, for a session alive on b.

A node now checks and records its sessions several at a time (``gateway.session.fan_out``),
parked ones first. Here every store operation takes a loaded machine's round trip, and the
node holds sixty parked sessions: what it runs when its store comes back after such a gap
(``NodeRuntime``: ``verify_ownership``, then ``reassert_all``) records them all again well
within a lease."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from harness import GatewayFactory

from gateway.clock import Clock, SystemClock
from gateway.store import MemoryStore

SESSIONS = 60
ROUND_TRIP_S = 0.025  # each store operation on a loaded machine (the soak: ~40 ms)
LEASE_TTL_S = 1.5


class SlowStore:
    """The in-memory store behind a slow link (``round_trip_s`` per operation), which can
    restart empty as a Redis without persistence does."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.inner = MemoryStore(clock)
        self.round_trip_s = 0.0

    @property
    def shared(self) -> bool:
        return self.inner.shared

    def restart_empty(self) -> None:
        self.inner = MemoryStore(self._clock)

    def messages(self, node: str) -> Any:
        return self.inner.messages(node)

    def __getattr__(self, name: str) -> Any:
        operation = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(operation):
            return operation

        async def over_the_link(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(self.round_trip_s)
            return await operation(*args, **kwargs)

        return over_the_link


async def eventually(predicate: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def timed(work: Callable[[], Awaitable[None]]) -> float:
    began = time.monotonic()
    await work()
    return time.monotonic() - began


async def test_a_node_records_its_parked_sessions_again_within_a_lease_of_the_store_s_return(
    gateway_factory: GatewayFactory,
) -> None:
    store = SlowStore(SystemClock())
    gateway = await gateway_factory(store=store, provider="local", lease_ttl_s=LEASE_TTL_S)
    session_ids = []
    for _ in range(SESSIONS):
        async with gateway.session("text") as client:  # closed at once: the session parks
            session_ids.append(client.started["session_id"])
    await eventually(lambda: store.inner.parked() == SESSIONS)

    store.round_trip_s = ROUND_TRIP_S
    store.restart_empty()
    manager = gateway.manager

    async def store_back_after_a_gap() -> None:
        await manager.verify_ownership()
        await manager.reassert_all()

    took = await timed(store_back_after_a_gap)
    assert store.inner.parked() == SESSIONS  # every record is back, parked
    for session_id in session_ids:
        assert await store.inner.owner(session_id) == (manager.node_id, 1)
    # One after another: 60 owners checked, 60 records written again (each a write, then a
    # register: the record is missing), 4.5 s. Within a lease, a resume elsewhere is retried.
    assert took < LEASE_TTL_S, f"{took:.2f} s"
