"""A draining node moves its WebRTC sessions as it moves socket sessions: the client hears
``session.moving`` on its data channel, the peer connection closes, and a new offer to another
node resumes the session there. The node refuses new offers meanwhile (503).

Two real gateway processes (uvloop, as ``gateway serve`` runs) on one real Redis."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cluster_kit import Cluster, cluster
from webrtc_kit import Peer, connect

from soak.redis_server import RedisServer

OFFER = "/v1/webrtc/offer"


@pytest.fixture
async def on_local(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(redis_server, tmp_path, provider="local") as group:
        yield group


async def test_a_drain_moves_a_webrtc_session_to_the_other_node(on_local: Cluster) -> None:
    a = await on_local.node("a", drain_grace_s="5")
    b = await on_local.node("b")
    first, second = Peer(audio=False), Peer(audio=False)
    try:
        await connect(on_local.http, a.url + OFFER, "anonymous", first)
        first.send({"type": "session.start", "mode": "text"})
        started = await first.until_event("session.started")
        closed = asyncio.Event()
        first.pc.on("connectionstatechange", lambda: closed.set())
        a.signal(signal.SIGTERM)
        moving = await first.until_event("session.moving")
        assert moving["session_id"] == started["session_id"]
        async with on_local.http.post(
            a.url + OFFER, json={"sdp": "v=0\r\n", "type": "offer"}
        ) as refused:
            assert refused.status == 503
        while first.pc.connectionState != "closed":
            closed.clear()
            await asyncio.wait_for(closed.wait(), 10)

        await connect(on_local.http, b.url + OFFER, "anonymous", second)
        resume = {"session_id": started["session_id"], "resume_token": moving["resume_token"]}
        second.send({"type": "session.start", "mode": "text", "resume": resume})
        resumed = await second.until_event("session.started")
        assert resumed["resumed"] is True
        second.send({"type": "text.send", "text": "still here?"})
        assert (await second.until_event("response.done"))["text"] == "You said: still here?"
    finally:
        await first.close()
        await second.close()
    assert await a.wait() == 0
