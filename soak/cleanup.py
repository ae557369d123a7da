"""Is everything released once the load has stopped? Each node's open sessions go to zero, and
it holds no socket of a client and none to a realtime upstream (connections to Redis and the
chat API's keep-alive pool may stay: they are pools). The driver holds no socket and no task
of its own but the one asking."""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from soak.fleet import Fleet
from soak.invariants import Violation
from soak.procfs import sample_process, tcp_sockets_of

__all__ = ["Cleanup", "check_cleanup"]

SESSIONS_GONE_WITHIN_S = 30.0
_ACTIVE = re.compile(r"^gateway_active_sessions(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.MULTILINE)


@dataclass
class Cleanup:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    driver: dict[str, Any] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)


async def _active_sessions(http: aiohttp.ClientSession, url: str) -> int | None:
    try:
        async with http.get(f"{url}/metrics") as response:
            found = _ACTIVE.search(await response.text())
    except (aiohttp.ClientError, TimeoutError):
        return None
    return int(float(found.group(1))) if found else None


async def _wait_sessions_gone(fleet: Fleet) -> dict[str, int | None]:
    """Each node's open sessions, once they are 0 (or the wait is over)."""
    found: dict[str, int | None] = {}
    connector = aiohttp.TCPConnector(force_close=True)  # no socket of ours stays at a node
    timeout = aiohttp.ClientTimeout(total=3)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        for name, node in fleet.nodes.items():
            deadline = asyncio.get_running_loop().time() + SESSIONS_GONE_WITHIN_S
            while (active := await _active_sessions(http, node.node.url)) not in (0, None):
                if asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.5)
            found[name] = active
    await asyncio.sleep(0.5)  # the nodes close their side of our last requests
    return found


async def check_cleanup(fleet: Fleet, baseline_fds: dict[str, int]) -> Cleanup:
    result = Cleanup()
    ports = fleet.upstream_ports()
    redis_port = fleet.redis.port if fleet.redis is not None else -1
    still_open = await _wait_sessions_gone(fleet)
    for name, node in fleet.nodes.items():
        active = still_open[name]
        pid = node.pid
        if pid is None:
            result.violations.append(Violation("cleanup", f"node {name} is not running"))
            continue
        sockets = [s for s in tcp_sockets_of(pid) if not s.listening]
        clients = [s for s in sockets if s.local_port == node.node.port]
        upstream = {
            what: sum(1 for s in sockets if s.remote_port == port) for what, port in ports.items()
        }
        redis = sum(1 for s in sockets if s.remote_port == redis_port)
        taken = sample_process(pid)
        result.nodes[name] = {
            "active_sessions": active,
            "client_sockets": len(clients),
            "upstream_sockets": upstream,
            "redis_sockets": redis,
            "other_sockets": len(sockets) - len(clients) - sum(upstream.values()) - redis,
            "fds": None if taken is None else taken.fds,
            "fds_at_start": baseline_fds.get(f"node-{name}"),
        }
        if active != 0:
            result.violations.append(
                Violation("cleanup", f"node {name}: {active} sessions open after the load")
            )
        if clients:
            result.violations.append(
                Violation("cleanup", f"node {name}: {len(clients)} client sockets left open")
            )
        for what in ("openai", "gemini"):
            if upstream[what]:
                result.violations.append(
                    Violation("cleanup", f"node {name}: {upstream[what]} sockets to {what} left")
                )
    here = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not here and not t.done()]
    own = [s for s in tcp_sockets_of(os.getpid()) if not s.listening]
    result.driver = {"tasks": [t.get_name() for t in tasks][:20], "sockets": len(own)}
    if tasks:
        result.violations.append(Violation("cleanup", f"driver: {len(tasks)} tasks still running"))
    if own:
        result.violations.append(Violation("cleanup", f"driver: {len(own)} sockets still open"))
    return result
