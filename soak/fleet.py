"""The soak's fleet on this machine: one ``redis-server``, the upstream fakes (``soak.upstreams``,
one process per fake) and two ``gateway serve`` nodes on that Redis, with the project's tools
and the soak's journaling tools. Everything logs into the run's folder, one file per process
(and per incarnation of a node: a rolling restart starts a new process with a new log).

Node a takes phone calls to OpenAI Realtime, node b to Gemini Live; both greet a call with a
tool that needs confirmation. Both nodes read the soak's model aliases (``soak.routing``): the
sessions that talk to OpenAI, node a's calls among them, fail over to another provider. Leases,
the drain's grace and the confirmations' lifetime are short so that the faults play out within a
short run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from soak.nodes import AUTH_SECRET, Node
from soak.phone import TWILIO_AUTH_TOKEN
from soak.processes import REPO, Child
from soak.redis_server import RedisServer, free_port, redis_path
from soak.routing import (
    FIRST_OUTPUT_TEXT_S,
    FIRST_OUTPUT_VOICE_S,
    OUTPUT_GAP_S,
    PHONE_ALIASES,
    alias_text,
)

__all__ = ["CONFIRMATION_TTL_S", "DRAIN_GRACE_S", "Fleet", "GatewayNode", "Incarnation"]

LEASE_TTL_S = 3.0
DRAIN_GRACE_S = 3.0
# A phone caller answers the greeting's confirmation after hearing it out (5 s typically, 8 s
# on a loaded machine): the TTL must leave room for that; confirm_expired waits it out.
CONFIRMATION_TTL_S = 15.0
READY_WITHIN_S = 30.0
GREETING = '/tool soak_confirm {"label": "phone"}'
TWILIO_PROVIDER = {"a": "openai", "b": "gemini"}


@dataclass
class Incarnation:
    """One process of a node: its pid, when it lived (soak clock) and its log."""

    pid: int
    log: Path
    started_at: float
    stopped_at: float | None = None
    exit_code: int | None = None
    stop_s: float | None = None  # from SIGTERM to its exit


@dataclass
class GatewayNode:
    node: Node
    env: dict[str, str]
    folder: Path
    incarnations: list[Incarnation] = field(default_factory=list)
    child: Child | None = None

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child is not None and self.child.alive() else None

    async def start(self, now: float) -> None:
        number = len(self.incarnations) + 1
        log = self.folder / f"node-{self.node.name}.{number}.log"
        self.child = Child(f"node {self.node.name}", log)
        await self.child.start([sys.executable, "-m", "gateway", "serve"], self.env)
        self.incarnations.append(Incarnation(self.child.pid, log, now))
        await self._ready()
        self.node.state = "up"

    async def _ready(self) -> None:
        assert self.child is not None
        deadline = asyncio.get_running_loop().time() + READY_WITHIN_S
        async with aiohttp.ClientSession() as http:
            while True:
                if not self.child.alive():
                    raise RuntimeError(f"node {self.node.name} exited:\n{self.child.log_tail()}")
                try:
                    async with http.get(f"{self.node.url}/readyz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if asyncio.get_running_loop().time() > deadline:
                    raise RuntimeError(f"node {self.node.name} was not ready in time")
                await asyncio.sleep(0.1)

    async def stop(self, now: float) -> Incarnation:
        """SIGTERM (a drain), and wait for the exit (the drain's grace + 10 s at most)."""
        assert self.child is not None
        self.node.state = "draining"
        began = asyncio.get_running_loop().time()
        code = await self.child.stop(within=DRAIN_GRACE_S + 15)
        self.node.state = "down"
        incarnation = self.incarnations[-1]
        incarnation.stopped_at = now + asyncio.get_running_loop().time() - began
        incarnation.exit_code = code
        incarnation.stop_s = asyncio.get_running_loop().time() - began
        return incarnation


UPSTREAM_KINDS = ("openai", "gemini", "chat")


def merge_tallies(tallies: list[dict[str, Any]]) -> dict[str, Any]:
    """The fakes' tallies as one (``Tally.summary``'s shape): counts added, duplicates joined.
    A tool run is given to one upstream only (its session's), so adding loses nothing."""
    merged: dict[str, Any] = {
        "given": {},
        "answered": {},
        "duplicates": [],
        "connections": {},
        "completed_replies": {},
    }
    for tally in tallies:
        merged["duplicates"] += tally.get("duplicates", [])
        for name in ("given", "answered", "connections", "completed_replies"):
            for key, count in tally.get(name, {}).items():
                merged[name][key] = merged[name].get(key, 0) + count
    return merged


class Fleet:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.journal = folder / "journal.jsonl"
        self.models = folder / "models.json"  # the alias file (GATEWAY_MODELS)
        self.redis: RedisServer | None = None
        # One process per upstream fake (``soak.upstreams --only``), as providers are separate.
        self.upstreams = {
            kind: Child(f"upstreams-{kind}", folder / f"upstreams-{kind}.log")
            for kind in UPSTREAM_KINDS
        }
        self.urls: dict[str, str] = {}
        self._controls: dict[str, str] = {}
        self.nodes: dict[str, GatewayNode] = {}

    async def start(self, now: float) -> None:
        binary = redis_path()
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        (self.folder / "redis").mkdir(parents=True, exist_ok=True)
        self.redis = RedisServer(binary, self.folder / "redis")
        await asyncio.to_thread(self.redis.start)
        certs = self.folder / "certs"
        certs.mkdir(exist_ok=True)
        for kind, child in self.upstreams.items():
            argv = [sys.executable, "-m", "soak.upstreams", "--cert-dir", str(certs)]
            await child.start([*argv, "--only", kind], os.environ, stdout_pipe=True)
        for kind, child in self.upstreams.items():
            urls = json.loads(await child.first_line(30.0))
            self._controls[kind] = urls.pop("control")
            self.urls.update(urls)
        registry = await self._registry()
        self.models.write_text(alias_text())
        for name in ("a", "b"):
            port = free_port()
            node = GatewayNode(Node(name, port), self._env(name, port, registry), self.folder)
            (self.folder / f"data-{name}").mkdir(exist_ok=True)
            self.nodes[name] = node
            await node.start(now)

    async def _registry(self) -> Path:
        out = self.folder / "registry.json"
        command = [sys.executable, "-m", "registry_build", "--tools", "tools"]
        command += ["--tools", "soak/tools", "--out", str(out), "--quiet"]
        process = await asyncio.create_subprocess_exec(*command, cwd=REPO)
        if await asyncio.wait_for(process.wait(), 120) != 0:
            raise RuntimeError("the soak's tool registry did not build")
        return out

    def _env(self, name: str, port: int, registry: Path) -> dict[str, str]:
        assert self.redis is not None
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GATEWAY_")}
        settings = {
            "HOST": "127.0.0.1",
            "PORT": str(port),  # the same port across restarts
            "AUTH": "jwt",
            "AUTH_SECRET": AUTH_SECRET,
            "REGISTRY": str(registry),
            "DATA_DIR": str(self.folder / f"data-{name}"),
            "LOG_FORMAT": "json",
            "LOG_LEVEL": "info",
            "REDIS_URL": self.redis.url,
            "REDIS_PREFIX": "soak",
            "NODE_ID": f"soak-{name}",
            "LEASE_TTL_S": str(LEASE_TTL_S),
            "DRAIN_GRACE_S": str(DRAIN_GRACE_S),
            "CONFIRMATION_TTL_S": str(CONFIRMATION_TTL_S),
            "CONNECTIONS_PER_MINUTE": "1000000",
            "MAX_SESSIONS": "100000",
            "PROVIDER": "openai",
            "OPENAI_WS_URL": self.urls["openai"],
            "GEMINI_BASE_URL": self.urls["gemini"],
            "GEMINI_CA_FILE": self.urls["gemini_ca"],
            "CHAT_BASE_URL": self.urls["chat"],
            "CHAT_API_KEY": "soak",
            "TWILIO_PROVIDER": TWILIO_PROVIDER[name],
            "TWILIO_GREETING": GREETING,
            "MODELS": str(self.models),
            "FIRST_OUTPUT_VOICE_S": str(FIRST_OUTPUT_VOICE_S),
            "FIRST_OUTPUT_TEXT_S": str(FIRST_OUTPUT_TEXT_S),
            "OUTPUT_GAP_S": str(OUTPUT_GAP_S),
        }
        if name in PHONE_ALIASES:
            settings["TWILIO_MODEL"] = PHONE_ALIASES[name]
        env.update({f"GATEWAY_{key}": value for key, value in settings.items()})
        env.update(
            OPENAI_API_KEY="sk-soak",
            GEMINI_API_KEY="soak",
            TWILIO_AUTH_TOKEN=TWILIO_AUTH_TOKEN,
            SOAK_JOURNAL=str(self.journal),
        )
        return env

    async def restart_node(self, name: str, clock_now: float) -> Incarnation:
        """A rolling deploy's step: drain the node (SIGTERM), start it again once it exited."""
        node = self.nodes[name]
        node.node.restarts.append(clock_now)
        stopped = await node.stop(clock_now)
        await node.start(clock_now + (stopped.stop_s or 0.0))
        return stopped

    async def restart_redis(self, down_s: float) -> None:
        assert self.redis is not None
        await self.redis.restart(down_s)

    async def stop(self, now: float) -> list[Incarnation]:
        stopped = []
        for node in self.nodes.values():
            if node.child is not None and node.child.alive():
                stopped.append(await node.stop(now))
        for child in self.upstreams.values():
            await child.stop()
        if self.redis is not None:
            await asyncio.to_thread(self.redis.stop)
        return stopped

    def pids(self) -> dict[str, int | None]:
        """The process of each role now (None: not running)."""
        roles: dict[str, int | None] = {
            f"node-{name}": node.pid for name, node in self.nodes.items()
        }
        for kind, child in self.upstreams.items():
            roles[f"upstreams-{kind}"] = child.pid if child.alive() else None
        process = self.redis.process if self.redis is not None else None
        roles["redis"] = process.pid if process is not None and process.poll() is None else None
        return roles

    def upstream_ports(self) -> dict[str, int]:
        ports = {}
        for name in ("openai", "gemini", "chat"):
            url = self.urls[name]
            ports[name] = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        return ports

    def pool_ports(self) -> set[int]:
        """Where the nodes keep pooled connections: Redis, the chat API."""
        ports = {self.upstream_ports()["chat"]} if self.urls else set()
        if self.redis is not None:
            ports.add(self.redis.port)
        return ports

    def logs(self) -> list[tuple[str, Path]]:
        found: list[tuple[str, Path]] = [
            (f"upstreams-{kind}", child.log_path) for kind, child in self.upstreams.items()
        ]
        for name, node in self.nodes.items():
            found += [(f"node-{name}.{i + 1}", inc.log) for i, inc in enumerate(node.incarnations)]
        return found

    async def control(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Ask the upstream fakes' control API (``soak.upstreams``): a fault goes to the fake
        it names (``openai_drop`` → the OpenAI fake's process); the tally is every fake's."""
        async with aiohttp.ClientSession() as http:
            if body is None:
                answers = []
                for url in self._controls.values():
                    async with http.get(f"{url}{path}") as response:
                        answers.append(await response.json())
                return merge_tallies(answers)
            kind = str(body.get("kind", "")).partition("_")[0]
            url = self._controls.get(kind, next(iter(self._controls.values())))
            async with http.post(f"{url}{path}", json=body) as response:
                answer: dict[str, Any] = await response.json()
        return answer

    async def applied(self) -> list[dict[str, Any]]:
        """Every time a fault mode of a fake applied (``soak.upstreams``' ``GET /applied``):
        ``kind``, ``at`` (the machine's monotonic clock), ``tag`` of the session it met."""
        found: list[dict[str, Any]] = []
        async with aiohttp.ClientSession() as http:
            for url in self._controls.values():
                async with http.get(f"{url}/applied") as response:
                    found += (await response.json())["applied"]
        return sorted(found, key=lambda a: float(a["at"]))
