"""Limits a hostile peer meets before and around a session: a header that never ends, the
per-address rate on every request (and through a trusted proxy), and ``/metrics`` behind a token
or on a listen address of its own."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import aiohttp
import pytest
from harness import GatewayFactory
from process_kit import build_registry_file, free_port, gateway_process


async def test_a_connection_that_never_finishes_its_header_is_closed(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(http_header_timeout_s=0.5)
    host, port = gateway.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    began = time.monotonic()
    writer.write(b"GET /v1/session HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: web")
    try:
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # the server closed it
    finally:
        writer.close()
    assert time.monotonic() - began < 3


async def test_the_rate_counts_every_request_per_address(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(connections_per_minute=3)
    statuses = []
    for _ in range(4):
        async with gateway.http.get(f"{gateway.url}/") as response:
            statuses.append(response.status)
    assert statuses == [200, 200, 200, 429]
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        async with gateway.connect():
            pass
    assert refused.value.status == 429
    async with gateway.http.get(f"{gateway.url}/healthz") as response:
        assert response.status == 200  # probes are never counted


async def test_a_trusted_proxy_is_looked_through(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(connections_per_minute=2, trusted_proxies=["127.0.0.1"])

    async def get(client: str) -> int:
        headers = {"X-Forwarded-For": f"9.9.9.9, {client}"}
        async with gateway.http.get(f"{gateway.url}/", headers=headers) as response:
            return response.status

    assert [await get("198.51.100.1") for _ in range(3)] == [200, 200, 429]
    assert [await get("198.51.100.2") for _ in range(2)] == [200, 200]


async def test_an_untrusted_peers_forwarded_header_is_ignored(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(connections_per_minute=2)
    statuses = []
    for n in range(3):
        headers = {"X-Forwarded-For": f"198.51.100.{n}"}
        async with gateway.http.get(f"{gateway.url}/", headers=headers) as response:
            statuses.append(response.status)
    assert statuses == [200, 200, 429]


async def test_metrics_behind_a_bearer_token(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(metrics_token="scrape-secret-0123")
    async with gateway.http.get(f"{gateway.url}/metrics") as response:
        assert response.status == 401
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert "scrape-secret" not in await response.text()
    wrong = {"Authorization": "Bearer scrape-secret-0124"}
    async with gateway.http.get(f"{gateway.url}/metrics", headers=wrong) as response:
        assert response.status == 401
    right = {"Authorization": "Bearer scrape-secret-0123"}
    async with gateway.http.get(f"{gateway.url}/metrics", headers=right) as response:
        assert response.status == 200
        assert "gateway_active_sessions" in await response.text()


async def test_metrics_on_a_listen_address_of_their_own(tmp_path: Path) -> None:
    registry = build_registry_file(tmp_path / "registry.json")
    metrics_port = free_port()
    async with (
        gateway_process(tmp_path, registry, auth="none", metrics_port=str(metrics_port)) as node,
        aiohttp.ClientSession() as http,
    ):
        async with http.get(f"{node.url}/metrics") as response:
            assert response.status == 404
        async with http.get(f"http://127.0.0.1:{metrics_port}/metrics") as response:
            assert response.status == 200
            assert re.search(r"^gateway_active_sessions 0\.0$", await response.text(), re.M)
        async with http.get(f"http://127.0.0.1:{metrics_port}/v1/session") as response:
            assert response.status == 404
    assert any(r["event"] == "metrics_listening" for r in node.log_records())
    assert json.dumps(node.log_records())  # every line was JSON
