"""Limits that hold across nodes: sessions per user, connections per client address (one real
Redis, two gateway processes), and what Redis is asked while a voice turn with a tool call
runs (nothing per audio frame)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cluster_kit import Cluster, cluster, connect, drop, resume
from harness import SECRET, pcm_silence, pcm_tone, token
from redis_kit import RedisServer

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer


@pytest.fixture
async def secured(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(
        redis_server, tmp_path, provider="local", auth="jwt", auth_secret=SECRET
    ) as group:
        yield group


async def test_sessions_per_user_are_capped_across_nodes(secured: Cluster) -> None:
    a = await secured.node("a", max_sessions_per_user="2")
    b = await secured.node("b", max_sessions_per_user="2")
    bob = {"Authorization": f"Bearer {token('bob')}"}
    first = await connect(secured, a, **bob)
    await first.start("text")
    second = await connect(secured, b, **bob)
    await second.start("text")
    third = await connect(secured, a, **bob)
    await third.send("session.start", mode="text", event_id="third")
    refused = await third.next()
    assert (refused["code"], refused["retryable"], refused["event_id"]) == (
        "rate_limited",
        True,
        "third",
    )
    assert "at most 2 open sessions per user" in refused["message"]
    alice = await connect(secured, b, Authorization=f"Bearer {token('alice')}")
    await alice.start("text")  # another user is not affected
    await second.send("session.end")
    await second.last("session.ended")
    await third.start("text")  # a slot was freed on the other node
    for client in (first, second, third, alice):
        await client.ws.close()


async def test_a_resumed_session_still_counts_after_its_first_node_dies(secured: Cluster) -> None:
    a = await secured.node("a", max_sessions_per_user="1")
    b = await secured.node("b", max_sessions_per_user="1")
    bob = {"Authorization": f"Bearer {token('bob')}"}
    first = await connect(secured, a, **bob)
    started = await first.start("text")
    await drop(first)
    again = await connect(secured, b, **bob)
    assert (await resume(again, started, token=None))["resumed"] is True
    a.signal(signal.SIGKILL)
    await a.wait()
    other = await connect(secured, b, **bob)
    await other.send("session.start", mode="text", event_id="second")
    refused = await other.next()
    assert (refused["code"], refused["event_id"]) == ("rate_limited", "second")
    for client in (again, other):
        await client.ws.close()


async def test_connections_per_address_are_counted_across_nodes(secured: Cluster) -> None:
    a = await secured.node("a", connections_per_minute="6")
    b = await secured.node("b", connections_per_minute="6")
    statuses = []
    for n in range(7):
        node = a if n % 2 == 0 else b
        async with secured.http.get(f"{node.url}/") as response:
            statuses.append(response.status)
    assert statuses == [200] * 6 + [429]
    async with secured.http.get(f"{b.url}/") as response:
        assert response.status == 429  # the other node knows too


async def test_a_voice_turn_with_a_tool_call_asks_redis_nothing_per_audio_frame(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """10 s of speech (500 frames) and a tool call: Redis' own command counts (INFO
    commandstats) grow by a bounded number, far from one per frame."""
    fake = FakeRealtimeServer(FakeOptions())
    await fake.start()
    try:
        async with cluster(
            redis_server, tmp_path, provider="openai", openai_ws_url=fake.ws_url
        ) as group:
            a = await group.node("a", lease_ttl_s="30")  # heartbeats: one per 10 s
            client = await connect(group, a)
            await client.start("voice", audio={"input_rate": 24000, "output_rate": 24000})
            await client.send("text.send", text='/tool journal {"label":"during the turn"}')
            await client.until_reply()
            before = redis_server.command_calls()
            frames = 0
            loop = asyncio.get_running_loop()
            began = loop.time()
            for ms_of_speech in range(10):  # ten one-second utterances, paced in real time
                speech = pcm_tone(700, 24000) + pcm_silence(300, 24000)
                for start in range(0, len(speech), 960):
                    await client.send_raw(speech[start : start + 960])
                    frames += 1
                    await asyncio.sleep(max(0.0, began + frames * 0.02 - loop.time()))
                if ms_of_speech == 4:
                    await client.send("text.send", text='/tool journal {"label":"mid-turn"}')
            await client.last("tool.finished")
            after = redis_server.command_calls()
            await client.ws.close()
    finally:
        await fake.stop()
    grown = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    total = sum(v for v in grown.values() if v > 0)
    assert frames == 500
    print(f"Redis commands during 10 s of speech with a tool call: {total}: {grown}")
    # Budgets: one script per response and per 5 s of the session's time (Redis counts the
    # INCRBYFLOAT, PEXPIRE and SADD inside it apart), and the node's revocation watch, a read
    # twice a second whatever the sessions do: none of it per frame.
    budgets = sum(grown.get(name, 0) for name in ("incrbyfloat", "pexpire", "sadd"))
    polled = grown.get("zrangebyscore", 0)
    assert polled <= 2 * 12, grown
    assert budgets < frames / 5, grown
    # Per turn: a snapshot at its start and end, a tool call's start/finish/deliver; no more.
    assert total - budgets - polled < 60, grown
    assert [line["label"] for line in group.journal_lines()] == ["during the turn", "mid-turn"]
