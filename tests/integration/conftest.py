"""Integration fixtures: gateways on free loopback ports (see ``harness``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from harness import SECRET, Gateway, GatewayFactory

from gateway.app import make_transport
from gateway.clock import SystemClock
from gateway.config import Settings
from gateway.observability import Metrics
from gateway.registry import Registry
from gateway.server import GatewayServer
from gateway.sessions import SessionManager, TransportFactory
from gateway.store import MemoryStore
from gateway.toolrun import MemoryAuditSink, ResultCache


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
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        clock = SystemClock()
        metrics = Metrics()
        audit = MemoryAuditSink()
        manager = SessionManager(
            settings=settings,
            registry=registry or full_registry,
            transports=transports,
            metrics=metrics,
            audit=audit,
            clock=clock,
            cache=ResultCache(clock),
            store=store if store is not None else MemoryStore(clock),
        )
        server = GatewayServer(
            settings=settings, registry=registry or full_registry, metrics=metrics, manager=manager
        )
        runner = web.AppRunner(server.app())
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
