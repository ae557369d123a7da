"""A client that floods control frames and never reads cannot grow the gateway's memory: pings
spend from the client's event budget (before and after ``session.start``), a flood over it is
closed with 1008, and pongs count against the same outbound bound as data.

Measured on a real ``gateway serve`` process: its RSS from /proc before and after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from harness import Client, Gateway, GatewayFactory
from process_kit import GatewayProcess, build_registry_file, gateway_process
from raw_socket_kit import RawClient, raw_client

from rfc6455.frames import OP_CLOSE, OP_PING, OP_TEXT, close_code

PINGS = 100_000
# What the flood may add to the process, at most: well under what unbounded pongs would cost.
RSS_GROWTH_LIMIT = 6 * 1024 * 1024


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[GatewayProcess]:
    registry = build_registry_file(tmp_path / "registry.json")
    async with gateway_process(tmp_path, registry, auth="none") as gateway:
        yield gateway


async def flood(client: RawClient, payload: bytes, count: int = PINGS) -> int:
    """Pings without reading a byte; returns how many were written before the server cut the
    connection (it may accept them all into its socket buffers first)."""
    sent = 0
    with contextlib.suppress(ConnectionError):
        for sent in range(1, count + 1):
            client.send(OP_PING, payload)
            if sent % 500 == 0:
                await client.writer.drain()
    return sent


async def closed_by_server(client: RawClient) -> int | None:
    """Read what the server sent until it ends the connection: its close code, if any."""
    code = None
    with contextlib.suppress(ConnectionError):
        while (frame := await client.next(within=10.0)) is not None:
            if frame[0] == OP_CLOSE:
                code = close_code(frame[1])[0]
    return code


async def test_a_ping_flood_over_the_event_rate_is_closed(node: GatewayProcess) -> None:
    before = node.rss_bytes()
    async with raw_client(node.url, receive_buffer=4096) as client:
        await flood(client, b"p" * 125)
        # It sent 1008 and closed; a client that never reads may lose that frame to the reset.
        assert await closed_by_server(client) in (1008, None)
    grown = node.rss_bytes() - before
    print(f"ping flood over the event rate: RSS grew {grown / 1e6:.2f} MB")
    assert grown < RSS_GROWTH_LIMIT
    assert any(r["event"] == "client_control_flood" for r in node.log_records())
    # Nobody else was hurt: a new session works.
    await still_serves(node)


async def test_pongs_to_a_client_that_never_reads_are_bounded(tmp_path: Path) -> None:
    """Every ping answered (a huge event budget), nothing read: the pongs pile up to the
    outbound bound, and the connection is dropped there."""
    registry = build_registry_file(tmp_path / "registry.json")
    async with gateway_process(
        tmp_path,
        registry,
        auth="none",
        client_events_per_s="1000000000",
        client_events_burst="1000000000",
        outbound_control_bytes=str(256 * 1024),
    ) as gateway:
        before = gateway.rss_bytes()
        async with raw_client(gateway.url, receive_buffer=4096) as client:
            sent = await flood(client, b"p" * 125)
            await asyncio.sleep(0.5)  # the server works through what it has read
            grown = gateway.rss_bytes() - before
            print(f"{sent} pings before the drop, never read: RSS grew {grown / 1e6:.2f} MB")
            # 100,000 pongs of 127 bytes would be 12.7 MB: the bound cut that short.
            assert grown < RSS_GROWTH_LIMIT, (sent, grown)
            assert await closed_by_server(client) is None  # dropped, not closed: it never read
            assert sent < PINGS  # the server cut it off before the flood ended
        records = gateway.log_records()
        assert any(r["event"] == "client_not_reading_control" for r in records)
        await still_serves(gateway)


async def still_serves(node: GatewayProcess) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.ws_connect(node.ws_url) as ws:
        client = Client(ws)
        await client.start("text")
        assert (await client.say("hello"))[-1]["text"] == "You said: hello"


async def test_events_before_session_start_are_rate_limited(
    gateway_factory: GatewayFactory,
) -> None:
    """JSON pings and resume attempts before ``session.start`` spend from the same budget."""
    gateway: Gateway = await gateway_factory(client_events_per_s=1, client_events_burst=5)
    async with raw_client(gateway.url) as client:
        for n in range(8):
            client.send(OP_TEXT, json.dumps({"type": "ping", "id": n}).encode())
        resume = {"session_id": "sess_x", "resume_token": "guess"}
        for _ in range(4):
            client.send(
                OP_TEXT,
                json.dumps({"type": "session.start", "mode": "text"} | {"resume": resume}).encode(),
            )
        answers = []
        for _ in range(12):
            frame = await client.until(OP_TEXT)
            answers.append(json.loads(frame[1]))
    pongs = [a for a in answers if a["type"] == "pong"]
    limited = [a for a in answers if a.get("code") == "rate_limited"]
    assert len(pongs) == 5  # the burst
    assert len(limited) == 7  # three pings and every resume attempt
    assert not [a for a in answers if a.get("code") == "resume_failed"]
    assert all(a["retryable"] for a in limited)


async def test_pings_after_session_start_spend_the_same_budget(
    gateway_factory: GatewayFactory,
) -> None:
    gateway: Gateway = await gateway_factory(client_events_per_s=1, client_events_burst=30)
    async with raw_client(gateway.url) as client:
        client.send(OP_TEXT, json.dumps({"type": "session.start", "mode": "text"}).encode())
        await client.until(OP_TEXT)
        for _ in range(60):  # 29 left in the budget, then 20 strikes
            client.send(OP_PING, b"")
        assert await closed_by_server(client) == 1008
