"""``gateway serve --workers 2``: one supervisor, two worker processes on one port (the kernel
spreads connections), each its own node on one real Redis; ``/metrics`` on either shows both;
a worker that dies is started again and its sessions resume on the machine's other worker."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

import redis.asyncio as redis
from cluster_kit import cluster, connect, drop, resume
from harness import Client
from process_kit import GatewayProcess
from redis_kit import RedisServer

SESSIONS = 16


async def owners(client: redis.Redis, prefix: str, session_ids: list[str]) -> dict[str, str]:
    found = {}
    for session_id in session_ids:
        owner = await client.hget(f"{prefix}:s:{session_id}", "owner")
        found[session_id] = str(owner or "")
    return found


async def live_nodes(client: redis.Redis, prefix: str, count: int, within: float = 20) -> set[str]:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        nodes = {str(key) for key in await client.hkeys(f"{prefix}:nodes")}
        alive = {n for n in nodes if await client.exists(f"{prefix}:node:{n}")}
        if len(alive) >= count:
            return alive
        assert asyncio.get_running_loop().time() < deadline, f"only {alive} came up"
        await asyncio.sleep(0.05)


def worker_pids(machine: GatewayProcess) -> list[int]:
    for record in machine.log_records():
        if record.get("event") == "workers_started":
            return [int(pid) for pid in record["pids"]]
    raise AssertionError("the supervisor did not say which workers it started")


async def listening(machine: GatewayProcess, times: int, within: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        records = machine.log_records()
        if sum(r.get("event") == "gateway_listening" for r in records) >= times:
            return
        assert asyncio.get_running_loop().time() < deadline, "the worker was not started again"
        await asyncio.sleep(0.05)


def active_sessions(exposition: str) -> float:
    match = re.search(r"^gateway_active_sessions (\S+)$", exposition, re.MULTILINE)
    assert match, exposition[:2000]
    return float(match.group(1))


async def test_two_workers_share_a_port_the_sessions_the_metrics_and_a_crash(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    store = redis.Redis(port=redis_server.port, decode_responses=True)
    async with cluster(redis_server, tmp_path, provider="local") as group:
        machine = await group.node("machine", workers="2")
        nodes = await live_nodes(store, group.prefix, 2)
        assert sorted(n.split(".")[0] for n in nodes) == ["machine-w0", "machine-w1"]
        w0 = next(n for n in nodes if n.startswith("machine-w0."))

        clients: list[Client] = []
        for _ in range(SESSIONS):
            client = await connect(group, machine)
            await client.start("text")
            clients.append(client)
        ids = [c.started["session_id"] for c in clients]
        placed = await owners(store, group.prefix, ids)
        assert set(placed.values()) == nodes  # both workers took sessions

        # Every worker's /metrics adds up the machine (prometheus-client multiprocess mode).
        for _ in range(4):  # new connections land on either worker
            async with group.http.get(f"{machine.url}/metrics") as response:
                assert active_sessions(await response.text()) == SESSIONS

        # A worker dies: the supervisor starts it again; its sessions resume on a worker.
        pids = worker_pids(machine)
        os.kill(pids[0], signal.SIGKILL)
        lost = [c for c in clients if placed[c.started["session_id"]] == w0]
        assert lost
        for client in lost:
            await drop(client)
        await listening(machine, times=3)  # w0 again: a new process, a new node, one port
        for client in lost:
            again = await connect(group, machine)
            answer = await resume(again, client.started)
            assert answer["type"] == "session.started", answer
            assert answer["resumed"] is True
            # The restarted worker is another node: the dead one's sessions are recovered.
            assert answer["recovery"] == {
                "reason": "node_lost",
                "lost_turn": None,
                "failed_calls": [],
            }
            reply = await again.say("still there?")
            assert reply[-1]["type"] == "response.done"
            await again.ws.close()
        died = [r for r in machine.log_records() if r.get("event") == "worker_died"]
        assert [(r["worker"], r["code"]) for r in died] == [(0, -signal.SIGKILL)]

        # SIGTERM to the supervisor: both workers drain and stop, and so does it.
        for client in clients:
            if client not in lost:
                await client.ws.close()
        machine.signal(signal.SIGTERM)
        assert await machine.wait(within=30) == 0
        assert not any(p for p in worker_pids(machine) if _alive(p))
    await store.aclose()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
