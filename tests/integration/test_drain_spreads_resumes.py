"""A drained node's sessions come back spread out, and a node takes resumes at a bounded rate:
two real gateway processes on one real Redis, the local model upstream, clients over real
sockets that do what every project client does (wait ``retry_after_ms``; try a refused
resume again)."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis
from cluster_kit import Cluster, cluster, connect, resume
from harness import Client
from process_kit import GatewayProcess
from redis_kit import RedisServer

SESSIONS = 12
SPACING_MS = 60


@pytest.fixture
async def on_local(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(redis_server, tmp_path, provider="local") as group:
        yield group


async def sessions_on(group: Cluster, node: GatewayProcess) -> list[tuple[Client, dict[str, Any]]]:
    opened = []
    for n in range(SESSIONS):
        client = await connect(group, node)
        started = await client.start("text")
        assert (await client.say(f"I am session {n}"))[-1]["text"] == f"You said: I am session {n}"
        opened.append((client, started))
    return opened


async def owners(group: Cluster, session_ids: list[str]) -> list[str]:
    client = redis.Redis(port=group.redis.port, decode_responses=True)
    try:
        return [
            str(await client.hget(f"{group.prefix}:s:{session_id}", "owner"))
            for session_id in session_ids
        ]
    finally:
        await client.aclose()


async def test_a_drain_gives_each_moved_session_its_own_retry_after_spread_over_a_window(
    on_local: Cluster,
) -> None:
    a = await on_local.node(
        "a", drain_spread_per_session_ms=str(SPACING_MS), drain_spread_max_ms="4000"
    )
    b = await on_local.node("b")
    opened = await sessions_on(on_local, a)

    async def follow(client: Client, started: dict[str, Any]) -> tuple[int, bool]:
        moving = await client.last("session.moving", within=15)
        told_at = time.monotonic()
        assert await client.wait_closed(within=10) == 1012
        wait_s = moving["retry_after_ms"] / 1000
        await asyncio.sleep(max(0.0, told_at + wait_s - time.monotonic()))
        # The drained node stays until the last resume is due: it answers the new owner's
        # "moved" at once instead of leaving it to wait for nobody.
        a_still_up = a.process.returncode is None
        again = await connect(on_local, b)
        answer = await resume(again, started, token=moving["resume_token"])
        assert answer["type"] == "session.started", answer
        assert answer["resumed"] is True
        reply = await again.say("still here?")
        assert reply[-1]["text"] == "You said: still here?"
        await again.ws.close()
        return moving["retry_after_ms"], a_still_up

    a.signal(signal.SIGTERM)
    followed = await asyncio.gather(*(follow(client, started) for client, started in opened))
    waits = sorted(wait for wait, _ in followed)
    assert len(set(waits)) == SESSIONS, waits  # each its own
    assert waits[0] == 0
    # Idle sessions all move as the drain begins: each one spacing after the previous (to the
    # ms), the whole window 11 spacings.
    gaps = [later - earlier for earlier, later in itertools.pairwise(waits)]
    assert all(SPACING_MS / 2 <= gap <= SPACING_MS + 1 for gap in gaps), waits
    assert all(up for _, up in followed)
    assert await a.wait() == 0
    ids = [started["session_id"] for _, started in opened]
    assert all(owner.startswith("b.") for owner in await owners(on_local, ids))


async def test_resumes_over_a_node_s_rate_wait_or_are_told_to_retry_and_none_is_lost(
    on_local: Cluster,
) -> None:
    # Everyone at once from a (no spread), into b at 5 resumes a second, bursts of 2, a turn
    # at most 1 s away: some wait in line, some are refused and come back.
    a = await on_local.node("a", drain_spread_per_session_ms="0")
    b = await on_local.node("b", resumes_per_s="5", resume_burst="2", resume_queue_s="1")
    opened = await sessions_on(on_local, a)
    refusals: list[dict[str, Any]] = []

    async def follow(client: Client, started: dict[str, Any]) -> float:
        moving = await client.last("session.moving", within=15)
        assert moving["retry_after_ms"] == 0
        await client.wait_closed(within=10)
        while True:
            again = await connect(on_local, b)
            answer = await resume(again, started, token=moving["resume_token"])
            if answer["type"] == "session.started":
                break
            assert answer["code"] == "rate_limited", answer
            assert answer["retryable"] is True
            refusals.append(answer)
            await again.ws.close()
            await asyncio.sleep(0.2)
        resumed_at = time.monotonic()
        reply = await again.say(f"back {started['session_id']}")
        assert reply[-1]["text"] == f"You said: back {started['session_id']}"
        await again.ws.close()
        return resumed_at

    a.signal(signal.SIGTERM)
    resumed_at = sorted(await asyncio.gather(*(follow(c, s) for c, s in opened)))
    assert len(resumed_at) == SESSIONS  # every one resumed: delayed, never lost
    assert refusals, "the rate was never exceeded by more than the queue"
    assert all("try again in" in r["message"] for r in refusals)
    # 2 at once, then 5 a second: the last of 12 about 2 s after the first.
    assert resumed_at[-1] - resumed_at[0] >= (SESSIONS - 2) / 5 * 0.8
    ids = [started["session_id"] for _, started in opened]
    assert all(owner.startswith("b.") for owner in await owners(on_local, ids))
    assert await a.wait() == 0
