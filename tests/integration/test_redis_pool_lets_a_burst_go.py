"""A node's connections to a real redis-server: a burst of store calls (a Redis restart makes
one: every session is recorded again at once) opens at most ``GATEWAY_REDIS_MAX_CONNECTIONS``,
every call of it succeeds (waiting for a free connection), and once those connections have been
idle ``GATEWAY_REDIS_IDLE_S`` the next heartbeat closes them but the two used last: the node's
open files return to their level. The sockets are counted in ``/proc``, as the soak counts a
node's; the connections Redis accepted, in its ``INFO``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import redis as redis_sync
from redis_kit import running_redis, unique_prefix

from gateway.clock import ManualClock
from gateway.store.redis import RedisStore
from gateway.store.redis_pool import KEEP_WARM
from soak.procfs import tcp_sockets_of

MAX_CONNECTIONS = 4
IDLE_S = 30.0
BURST = 50


def sockets_to(port: int) -> int:
    """This process's open TCP sockets to ``port``."""
    return sum(1 for s in tcp_sockets_of(os.getpid()) if s.remote_port == port)


def connections_accepted(port: int) -> int:
    """How many connections Redis accepted so far (this question's own included)."""
    observer = redis_sync.Redis(port=port)
    try:
        return int(observer.info("stats")["total_connections_received"])
    finally:
        observer.close()


async def test_a_burst_opens_at_most_the_bound_and_what_it_opened_is_closed_once_idle(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    with running_redis(tmp_path) as server:
        store = RedisStore.from_url(
            server.url,
            prefix=unique_prefix(),
            timeout_s=2.0,
            clock=clock,
            max_connections=MAX_CONNECTIONS,
            idle_s=IDLE_S,
        )
        try:
            await store.heartbeat("node-a", 10.0)
            assert sockets_to(server.port) == 1
            accepted = connections_accepted(server.port)

            owners = await asyncio.gather(*(store.owner(f"sess_{n}") for n in range(BURST)))

            assert owners == [None] * BURST  # every call of the burst got its answer
            assert sockets_to(server.port) == MAX_CONNECTIONS
            # The observer's own connection aside, the burst opened MAX_CONNECTIONS - 1 more.
            opened = connections_accepted(server.port) - accepted - 1
            assert opened == MAX_CONNECTIONS - 1

            clock.advance(IDLE_S - 1)
            await store.heartbeat("node-a", 10.0)  # not idle long enough yet
            assert sockets_to(server.port) == MAX_CONNECTIONS

            clock.advance(2)
            await store.heartbeat("node-a", 10.0)
            assert sockets_to(server.port) == KEEP_WARM

            # The pool opens again what the next burst needs, within the bound.
            await asyncio.gather(*(store.owner(f"sess_{n}") for n in range(BURST)))
            assert sockets_to(server.port) == MAX_CONNECTIONS
        finally:
            await store.close()
        assert sockets_to(server.port) == 0
