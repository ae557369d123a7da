"""The breaker of a target is shared by every node (a real ``redis-server``, two gateway
processes): sessions starting on node A meet a provider that refuses them until A's failures open
its breaker; node B then sends its sessions to the next target without trying the refusing one,
until the cool-down lets a limited number of sessions try it again (half-open)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cluster_kit import Cluster, cluster, connect
from process_kit import REPO
from redis_kit import RedisServer

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer


@pytest.fixture
async def openai() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer(FakeOptions()) as fake:
        yield fake


@pytest.fixture
async def group(
    redis_server: RedisServer, tmp_path: Path, openai: FakeRealtimeServer
) -> AsyncIterator[Cluster]:
    models = tmp_path / "models.json"
    targets = [{"provider": "openai", "model": "gpt-realtime"}, {"provider": "local"}]
    models.write_text(json.dumps({"models": {"assistant": {"targets": targets}}}))
    async with cluster(
        redis_server,
        tmp_path,
        models=str(models),
        openai_ws_url=openai.ws_url,
        openai_api_key="sk-test",
        breaker_failures="3",
        breaker_window_s="60",
        breaker_cooldown_s="30",
        breaker_probes="1",
    ) as nodes:
        # Their wall clock (the breaker's) is the system's plus the seconds in this file.
        nodes.command = (str(REPO / "tests" / "clocked_gateway.py"),)
        nodes.env = {"TEST_CLOCK_FILE": str(tmp_path / "clock")}
        yield nodes


async def _start(group: Cluster, node: object) -> str:
    client = await connect(group, node)  # type: ignore[arg-type]
    started = await client.start("text", model="assistant")
    await client.ws.close()
    return str(started["provider"])


async def test_a_breaker_opened_by_node_a_is_honoured_by_node_b(
    group: Cluster, openai: FakeRealtimeServer
) -> None:
    a, b = await group.node("a"), await group.node("b")
    openai.faults.refuse = True
    for _ in range(3):  # each start tries OpenAI, is refused, and is served by the next target
        assert await _start(group, a) == "local"
    assert openai.faults.applied["refuse"] == 3
    for _ in range(3):  # node b never tries it: the breaker A opened is open for B too
        assert await _start(group, b) == "local"
    assert openai.faults.applied["refuse"] == 3
    # After the cool-down one session (the probe) tries it again; it works, the breaker closes.
    openai.faults.refuse = False
    (group.tmp / "clock").write_text("31")  # both nodes: past the 30-s cool-down
    served_by = []
    for _ in range(40):  # bounded: a node reads the clock file again within 50 ms
        served_by.append(await _start(group, b))
        if served_by[-1] == "openai":
            break
    assert served_by[-1] == "openai"
    assert await _start(group, a) == "openai"  # closed for A too
