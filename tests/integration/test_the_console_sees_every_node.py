"""The console across two gateway processes on one real Redis: either node's console lists
the sessions of both, serves a timeline written by the other, and drains the other node (its
sessions move; the node exits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cluster_kit import Cluster, cluster, connect, resume
from harness import SECRET, token
from redis_kit import RedisServer


@pytest.fixture
async def group(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(
        redis_server, tmp_path, provider="local", auth="jwt", auth_secret=SECRET, admin="true"
    ) as made:
        yield made


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {token('ops', ['admin'])}"}


async def until_listed(
    group: Cluster, url: str, check: Any, within: float = 10.0
) -> dict[str, Any]:
    """The first directory from ``url``'s console stream that ``check`` accepts."""
    async with group.http.get(url + "/admin/v1/console/stream", headers=admin()) as live:
        assert live.status == 200
        async with asyncio.timeout(within):
            while True:
                message = await live.content.readuntil(b"\n\n")
                if message.startswith(b"event: sessions"):
                    found: dict[str, Any] = orjson.loads(message.split(b"data: ", 1)[1])
                    if check(found):
                        return found


async def test_either_nodes_console_sees_both_and_drains_the_other(group: Cluster) -> None:
    a, b = await group.node("a"), await group.node("b")
    on_a = await connect(group, a, Authorization=f"Bearer {token('ann')}")
    on_b = await connect(group, b, Authorization=f"Bearer {token('bob')}")
    await on_a.send("session.start", mode="text")
    started_a = await on_a.last("session.started")
    await on_b.send("session.start", mode="text")
    started_b = await on_b.last("session.started")
    await on_b.say('/tool kb_get {"id": "billing-payments"}')

    def both(found: dict[str, Any]) -> bool:
        # Node ids are the name given and a suffix of the process's own.
        nodes = {s["session_id"]: s["node"].split(".")[0] for s in found["sessions"]}
        return nodes == {started_a["session_id"]: "a", started_b["session_id"]: "b"}

    found = await until_listed(group, a.url, both)
    alive = {n["node_id"].split(".")[0]: n["alive"] for n in found["nodes"]}
    assert alive == {"a": True, "b": True}
    node_b = next(n["node_id"] for n in found["nodes"] if n["node_id"].startswith("b."))

    path = f"/admin/v1/console/sessions/{started_b['session_id']}/timeline"
    async with group.http.get(a.url + path, headers=admin()) as answer:
        timeline = await answer.json()
    tool = next(e for e in timeline["entries"] if e["kind"] == "tool")
    assert set(tool["data"]) == {"id", "title"}  # written by b, read on a

    async with group.http.post(
        f"{a.url}/admin/v1/console/nodes/{node_b}/drain", headers=admin()
    ) as drained:
        assert drained.status == 202
    moving = await on_b.last("session.moving", within=10)
    again = await connect(group, a, Authorization=f"Bearer {token('bob')}")
    answer = await resume(again, started_b, token=moving["resume_token"])
    assert answer["resumed"] is True
    assert await b.wait() == 0  # it drained and stopped, as on SIGTERM
    for client in (on_a, on_b, again):
        await client.ws.close()
