"""Integration fixtures: gateways on free loopback ports (see ``harness``), the OpenAI fake
with its default options (``fake``; a test file may define its own), a cluster of gateway
processes on it (``on_openai``, see ``cluster_kit``), and the journaling tools with the file
they count their executions in (``journal_registry``, ``journal``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cluster_kit import Cluster, cluster
from harness import SECRET, Gateway, GatewayFactory
from redis_kit import RedisServer
from registry_kit import write_artifact

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.app import build_server
from gateway.config import Settings
from gateway.observability import Tracing
from gateway.providers import make_transport
from gateway.registry import Registry, load_registry
from gateway.session.manager import TransportFactory
from gateway.store import MemoryStore
from gateway.toolrun import MemoryAuditSink


@pytest.fixture
async def gateway_factory(full_registry: Registry, tmp_path: Path) -> AsyncIterator[GatewayFactory]:
    """Start gateways: ``await gateway_factory(registry=..., transports=..., **settings)``."""
    runners: list[web.AppRunner] = []
    sessions: list[aiohttp.ClientSession] = []

    async def start(
        *,
        registry: Registry | None = None,
        transports: TransportFactory = make_transport,
        store: MemoryStore | None = None,
        tracing: Tracing | None = None,
        **overrides: Any,
    ) -> Gateway:
        options: dict[str, Any] = {
            "auth": "jwt",
            "auth_secret": SECRET,
            "data_dir": tmp_path / f"data{len(runners)}",
            "local_pace": 0.0,
            **overrides,
        }
        settings = Settings(**options)
        audit = MemoryAuditSink()
        server = build_server(
            settings,
            registry=registry or full_registry,
            transports=transports,
            audit=audit,
            store=store,
            tracing=tracing,
        )
        manager, metrics = server.manager, server.metrics
        runner = server.runner()
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        http = aiohttp.ClientSession()
        sessions.append(http)
        return Gateway(f"http://127.0.0.1:{port}", server, manager, audit, settings, metrics, http)

    yield start
    for http in sessions:
        await http.close()
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def gateway(gateway_factory: GatewayFactory) -> Gateway:
    return await gateway_factory()


@pytest.fixture
async def fake() -> AsyncIterator[FakeRealtimeServer]:
    server = FakeRealtimeServer(FakeOptions())
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def on_openai(
    redis_server: RedisServer, tmp_path: Path, fake: FakeRealtimeServer
) -> AsyncIterator[Cluster]:
    async with cluster(
        redis_server, tmp_path, provider="openai", openai_ws_url=fake.ws_url
    ) as group:
        yield group


@pytest.fixture(scope="session")
def journal_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """The cluster fixtures' tools: ``journal`` and ``journal_confirm`` append one line per
    execution to ``$JOURNAL_PATH``."""
    out = tmp_path_factory.mktemp("registry") / "journal.json"
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "cluster_tools"
    return load_registry(write_artifact([fixtures], out))


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the journaling tools append to, for this test."""
    path = tmp_path / "journal.jsonl"
    monkeypatch.setenv("JOURNAL_PATH", str(path))
    return path
