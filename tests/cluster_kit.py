"""Several real gateway nodes on one real Redis, for the tests of a cluster.

``Cluster`` starts ``python -m gateway serve`` processes that share a redis-server (each test on
its own key prefix), the project's tools plus the journaling fixtures (``journal``,
``journal_confirm``: one line per execution in ``journal``, shared by every node), and an
upstream the test chooses (the OpenAI fake it runs, or the local model). Clients speak the
client protocol over real sockets (``harness.Client``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from harness import Client, ConnectionClosed
from process_kit import REPO, GatewayProcess, build_registry_file, gateway_process
from redis_kit import RedisServer, unique_prefix

__all__ = ["Cluster", "cluster", "connect", "drop", "resume", "resumed_on"]

CLUSTER_TOOLS = REPO / "tests" / "fixtures" / "cluster_tools"
LEASE_TTL_S = 1.5


@dataclass
class Cluster:
    redis: RedisServer
    tmp: Path
    stack: AsyncExitStack
    http: aiohttp.ClientSession
    settings: dict[str, str]
    prefix: str = field(default_factory=unique_prefix)
    nodes: dict[str, GatewayProcess] = field(default_factory=dict)
    # What each node's interpreter runs, and more of its environment (a test's launcher).
    command: tuple[str, ...] = ("-m", "gateway", "serve")
    env: dict[str, str] = field(default_factory=dict)

    @property
    def journal(self) -> Path:
        return self.tmp / "journal.jsonl"

    def journal_lines(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines() if line]

    async def call_started(self, session_id: str, call_id: str, within: float = 5.0) -> None:
        """Wait until the ledger says the call runs (its handler was entered, or is about to)."""
        import redis.asyncio as redis

        client = redis.Redis(port=self.redis.port)
        try:
            deadline = asyncio.get_running_loop().time() + within
            key = f"{self.prefix}:l:{session_id}"
            while await client.hget(key, f"{call_id}:state") is None:
                assert asyncio.get_running_loop().time() < deadline, "the call never started"
                await asyncio.sleep(0.01)
        finally:
            await client.aclose()

    async def node(self, name: str, **settings: str) -> GatewayProcess:
        registry = self.tmp / "registry.json"
        if not registry.exists():
            await asyncio.to_thread(build_registry_file, registry, REPO / "tools", CLUSTER_TOOLS)
        options = {
            "redis_url": self.redis.url,
            "redis_prefix": self.prefix,
            "node_id": name,
            "lease_ttl_s": str(LEASE_TTL_S),
            "auth": "none",
            "anonymous_roles": "caregiver",
            **self.settings,
            **settings,
        }
        extra = {"JOURNAL_PATH": str(self.journal), "OPENAI_API_KEY": "sk-test", **self.env}
        node = await self.stack.enter_async_context(
            gateway_process(
                self.tmp, registry, name=name, extra_env=extra, command=self.command, **options
            )
        )
        self.nodes[name] = node
        return node


@asynccontextmanager
async def cluster(redis: RedisServer, tmp: Path, **settings: str) -> AsyncIterator[Cluster]:
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Cluster(redis, tmp, stack, http, dict(settings))


async def connect(group: Cluster, node: GatewayProcess, **headers: str) -> Client:
    ws = await group.http.ws_connect(node.ws_url, headers=headers, max_msg_size=0)
    return Client(ws)


async def resumed_on(
    group: Cluster, node: GatewayProcess, started: dict[str, Any], *, mode: str = "text"
) -> tuple[Client, dict[str, Any]]:
    """A new socket to ``node`` that resumes the session of ``started``: the client and its
    ``session.started`` (anything else fails the test)."""
    client = await connect(group, node)
    answer = await resume(client, started, mode=mode)
    assert answer["type"] == "session.started", answer
    return client, answer


async def drop(client: Client) -> None:
    """Lose the socket: shut the TCP connection down without a WebSocket close frame."""
    sock = client.ws.get_extra_info("socket")
    if sock is not None:  # None: the connection is gone already (its node died)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(ConnectionClosed, TimeoutError):
        while True:
            await client.next(within=2)
    await client.ws.close()


async def resume(
    client: Client, started: dict[str, Any], *, mode: str = "text", token: str | None = None
) -> dict[str, Any]:
    """A resume ``session.start``; the first answer (``session.started`` or an ``error``)."""
    await client.send(
        "session.start",
        mode=mode,
        resume={
            "session_id": started["session_id"],
            "resume_token": token or started["resume_token"],
        },
    )
    answer = await client.next(within=10)
    if answer["type"] == "session.started":
        client.started = answer
    return answer
