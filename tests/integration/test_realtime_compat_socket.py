"""The socket of ``/v1/realtime`` itself: a browser's subprotocol auth and answer, a refused
token, and a ping flood bounded as on ``/v1/session``."""

from __future__ import annotations

import json

import aiohttp
import pytest
from harness import GatewayFactory, token


async def test_a_browser_authenticates_in_the_subprotocol_and_gets_realtime_back(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    offered = ("realtime", f"openai-insecure-api-key.{token('alice')}")
    async with gateway.http.ws_connect(
        f"{gateway.url}/v1/realtime?model=local", protocols=offered
    ) as ws:
        assert ws.protocol == "realtime"
        first = json.loads((await ws.receive(timeout=5)).data)
        assert first["type"] == "session.created"
        await ws.send_str(json.dumps({"type": "no.such.event", "event_id": "e1"}))
        error = json.loads((await ws.receive(timeout=5)).data)
        assert (error["type"], error["error"]["event_id"]) == ("error", "e1")


async def test_a_client_that_offers_no_subprotocol_gets_none(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    headers = {"Authorization": f"Bearer {token('alice')}"}
    async with gateway.http.ws_connect(
        f"{gateway.url}/v1/realtime?model=local", headers=headers
    ) as ws:
        assert ws.protocol is None
        assert json.loads((await ws.receive(timeout=5)).data)["type"] == "session.created"


async def test_a_bad_token_in_the_subprotocol_is_refused_before_the_upgrade(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    offered = ("realtime", "openai-insecure-api-key.not-a-jwt")
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.http.ws_connect(f"{gateway.url}/v1/realtime?model=local", protocols=offered)
    assert refused.value.status == 401


async def test_pings_beyond_the_event_budget_close_the_socket(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(client_events_per_s=5, client_events_burst=5)
    headers = {"Authorization": f"Bearer {token('alice')}"}
    async with gateway.http.ws_connect(
        f"{gateway.url}/v1/realtime?model=local", headers=headers, autoping=False
    ) as ws:
        await ws.receive(timeout=5)  # session.created
        for _ in range(200):
            await ws.ping(b"x")
        closing = None
        while closing is None:
            message = await ws.receive(timeout=5)
            if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                closing = ws.close_code
    assert closing == 1008
