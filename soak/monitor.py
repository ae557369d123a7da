"""Samples every few seconds, from ``/proc``: resident memory, open files and CPU time of each
process of the fleet (each node's current incarnation, the upstream fakes, Redis) and of the
driver itself; for the nodes, how many of their files are pooled connections (to Redis and to
the chat API: pools keep what the busiest moment opened, by design); each node's open sessions
(``gateway_active_sessions``); and how late the driver's event loop wakes up (a driver that
falls behind would make latencies its own)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from soak.procfs import sample_process, tcp_sockets_of
from soak.records import Clock

__all__ = ["Monitor", "ResourceSample"]

_ACTIVE = re.compile(r"^gateway_active_sessions(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.MULTILINE)


@dataclass(frozen=True)
class ResourceSample:
    at: float
    role: str
    pid: int
    rss_kb: int
    fds: int
    cpu_s: float
    pooled: int = 0  # sockets to Redis and the chat API (a node's connection pools)


@dataclass
class Monitor:
    clock: Clock
    pids: Callable[[], dict[str, int | None]]
    node_urls: Callable[[], dict[str, str]]
    pool_ports: Callable[[], set[int]]
    every_s: float
    samples: list[ResourceSample] = field(default_factory=list)
    node_sessions: list[tuple[float, str, int]] = field(default_factory=list)
    loop_lag_ms: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def sample_now(self) -> None:
        now = self.clock.now()
        roles = {**self.pids(), "driver": os.getpid()}
        for role, pid in roles.items():
            if pid is None:
                continue
            taken = sample_process(pid)
            if taken is None:
                continue
            pooled = 0
            if role.startswith("node-"):
                ports = self.pool_ports()
                pooled = sum(1 for s in tcp_sockets_of(pid) if s.remote_port in ports)
            self.samples.append(
                ResourceSample(now, role, pid, taken.rss_kb, taken.fds, taken.cpu_s, pooled)
            )

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
            while True:
                asked = loop.time()
                await asyncio.sleep(self.every_s)
                self.loop_lag_ms.append((loop.time() - asked - self.every_s) * 1000)
                self.sample_now()
                for name, url in self.node_urls().items():
                    with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                        async with http.get(f"{url}/metrics") as response:
                            found = _ACTIVE.search(await response.text())
                        if found:
                            count = int(float(found.group(1)))
                            self.node_sessions.append((self.clock.now(), name, count))
