"""Found by the soak: a voice session whose ``session.start`` was under way on node a (its
upstream still connecting) when a's drain began was not among the sessions the drain moved;
it started a moment later and, at the end of the drain, ended with ``shutdown`` instead of
moving to node b. A session that arrives on a draining node moves as well, once it is there.

Two real gateway processes on one real Redis; the OpenAI fake answers each connection's
``session.created`` only after a while, so a start is under way for that long."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator

import pytest
from cluster_kit import Cluster, connect, resume
from harness import types

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

CONNECT_S = 1.5  # how long the upstream takes to say session.created


@pytest.fixture
async def fake() -> AsyncIterator[FakeRealtimeServer]:
    server = FakeRealtimeServer(FakeOptions(created_delay_s=CONNECT_S))
    await server.start()
    yield server
    await server.stop()


async def test_a_session_that_starts_while_its_node_drains_moves_instead_of_ending(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    a = await on_openai.node("a", drain_grace_s="6")
    b = await on_openai.node("b")
    client = await connect(on_openai, a)
    await client.send("session.start", mode="text")
    await fake.wait_connections(1)  # a opened its upstream: the start is under way
    a.signal(signal.SIGTERM)

    started = await client.last("session.started", within=10)
    seen = len(client.events)
    assert await client.wait_closed(within=10) == 1012  # not 1000: it did not end here
    after = client.events[seen:]
    assert types(after) == ["session.moving"], after  # at once: it had no turn to finish
    moving = after[0]
    assert moving["session_id"] == started["session_id"]

    again = await connect(on_openai, b)
    answer = await resume(again, started, token=moving["resume_token"])
    assert answer["type"] == "session.started", answer
    assert answer["resumed"] is True
    assert (await again.say("still here?"))[-1]["text"] == "You said: still here?"
    await again.ws.close()
    assert await a.wait() == 0
    ended = [r for r in a.log_records() if r.get("event") == "session_ended"]
    assert ended == []  # nothing ended on a: it moved
