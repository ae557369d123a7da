"""Warm connections (``GATEWAY_POOL_SIZE``, a target's ``pool``): the gateway opens OpenAI
Realtime connections before any session asks, hands one to a new session (which only sends its
``session.update``), refills, replaces a connection the provider closes or one idle too long,
and counts the pool's failed opens against the target's breaker. Real sockets, the fake."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, first

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.routing import BreakerPhase, Target


@pytest.fixture
async def openai() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer(FakeOptions(created_delay_s=0.2)) as fake:
        yield fake


async def _gateway(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, **settings: Any
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "openai",
        "openai_ws_url": fake.ws_url,
        "openai_api_key": "sk-test",
        "pool_size": 2,
        **settings,
    }
    return await gateway_factory(**options)


async def _until(gateway: Gateway, condition: Callable[[], bool], within: float = 5.0) -> None:
    pool = gateway.manager.pool
    assert pool is not None
    async with asyncio.timeout(within):
        await pool.until(condition)


def _configured(fake: FakeRealtimeServer) -> list[int]:
    return [c.number for c in fake.connections if c.received("session.update")]


async def test_a_session_starts_on_a_connection_opened_before_it_and_the_pool_refills(
    gateway_factory: GatewayFactory, openai: FakeRealtimeServer
) -> None:
    gateway = await _gateway(gateway_factory, openai)
    pool = gateway.manager.pool
    assert pool is not None
    await _until(gateway, lambda: len(openai.connections) == 2)
    assert _configured(openai) == []  # open, created, not configured: no session yet
    async with gateway.session("text") as client:
        assert _configured(openai) == [1]  # the oldest warm connection, configured now
        reply = await client.say("hello")
        assert first(reply, "response.done")["text"] == "You said: hello"
        await _until(gateway, lambda: len(openai.connections) == 3)  # refilled to two ready
    # A session naming the configured model by name is served from the same pool.
    async with gateway.session("text", model="gpt-realtime") as client:
        assert _configured(openai) == [1, 2]
        assert (await client.say("again"))[-1]["text"] == "You said: again"
    assert pool.taken == 2
    assert pool.missed == 0
    taken = gateway.metric("gateway_pool_takes_total", target="openai/gpt-realtime", taken="true")
    assert taken == 2


async def test_a_warm_connection_the_provider_closes_is_replaced(
    gateway_factory: GatewayFactory, openai: FakeRealtimeServer
) -> None:
    gateway = await _gateway(gateway_factory, openai, pool_size=1)
    pool, target = gateway.manager.pool, Target("openai")
    assert pool is not None
    await _until(gateway, lambda: pool.ready(target) == 1)
    await openai.connections[0].drop(1011, "server restart")
    await _until(gateway, lambda: len(openai.connections) == 2 and pool.ready(target) == 1)
    async with gateway.session("text") as client:
        assert _configured(openai) == [2]  # never the closed one
        assert (await client.say("hi"))[-1]["text"] == "You said: hi"


async def test_a_warm_connection_idle_too_long_is_replaced_by_a_fresh_one(
    gateway_factory: GatewayFactory, openai: FakeRealtimeServer
) -> None:
    gateway = await _gateway(gateway_factory, openai, pool_size=1, pool_idle_s=0.3)
    await _until(gateway, lambda: len(openai.connections) >= 3)
    await _until(gateway, lambda: sum(1 for c in openai.connections if not c.closed.is_set()) == 1)


async def test_failed_opens_count_against_the_breaker_and_a_target_may_keep_none(
    gateway_factory: GatewayFactory, openai: FakeRealtimeServer, tmp_path: Path
) -> None:
    models = tmp_path / "models.json"
    targets = [{"provider": "openai", "model": "gpt-realtime"}, {"provider": "local"}]
    spare = [{"provider": "openai", "model": "gpt-realtime-mini", "pool": 0}]
    catalog = {"models": {"assistant": {"targets": targets}, "spare": {"targets": spare}}}
    models.write_text(json.dumps(catalog))
    openai.faults.refuse = True
    gateway = await _gateway(gateway_factory, openai, models=models, pool_size=1)
    health = gateway.manager.parts.health
    assert health is not None

    pool = gateway.manager.pool
    assert pool is not None
    # One keeper opens after the other: a third refusal means the first two were recorded.
    await _until(gateway, lambda: openai.faults.applied["refuse"] >= 3, within=10)
    view = (await health.states())["openai/gpt-realtime"]
    assert view.recent_failures >= 2 or view.phase is BreakerPhase.OPEN  # three: it opened
    assert "openai/gpt-realtime-mini" not in await health.states()  # pool 0: never opened
    models_asked = {c.model for c in openai.connections}
    assert "gpt-realtime-mini" not in models_asked
