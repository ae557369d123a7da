"""Keys and budgets held across nodes: two gateway processes on a real redis-server and the
OpenAI Realtime fake (which reports usage at each ``response.done``), their clocks moved by the
test (``clocked_gateway``: the next UTC day).

- a key with a small daily spend budget, used by text and voice sessions on both nodes at once:
  every session is warned, then ended ``budget_exhausted``; the spend recorded passes the budget
  by at most one response per live session; new sessions are refused on both nodes (429);
  the next UTC day they work again;
- session minutes on voice sessions that only stream silence (no response, no token report:
  the session's clock charges), and a team budget shared by two keys;
- a revoked key: its sessions on both nodes end within a second, and it is refused on both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cluster_kit import Cluster, cluster, connect
from harness import SECRET, Client, ConnectionClosed, pcm_silence, pcm_tone, token
from process_kit import REPO, GatewayProcess
from redis_kit import RedisServer

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

# Every token costs 1/1000 of the currency: a response's cost is its total tokens / 1000.
PRICES = {
    "currency": "USD",
    "models": {
        "openai/*": dict.fromkeys(
            ("input_text", "input_audio", "output_text", "output_audio"), 1000.0
        )
    },
}
DAY_S = 86400.0
WITHIN_S = 20.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer(FakeOptions()) as server:
        yield server


@pytest.fixture
async def fleet(
    redis_server: RedisServer, tmp_path: Path, fake: FakeRealtimeServer
) -> AsyncIterator[tuple[Cluster, GatewayProcess, GatewayProcess]]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    async with cluster(
        redis_server,
        tmp_path,
        provider="openai",
        openai_ws_url=fake.ws_url,
        auth="jwt",
        auth_secret=SECRET,
        admin="true",
        price_table=str(prices),
        metrics_teams="support",
    ) as group:
        group.command = (str(REPO / "tests" / "clocked_gateway.py"),)
        group.env = {"TEST_CLOCK_FILE": str(tmp_path / "clock")}
        a, b = await group.node("a"), await group.node("b")
        yield group, a, b


def admin_headers() -> dict[str, str]:
    """An admin's JWT, made when used (a module-level one would expire in a long run)."""
    return {"Authorization": f"Bearer {token('ops', ['admin'])}"}


async def admin(
    group: Cluster, node: GatewayProcess, method: str, path: str, body: Any = None
) -> dict[str, Any]:
    async with group.http.request(
        method, node.url + path, json=body, headers=admin_headers()
    ) as answer:
        found: dict[str, Any] = await answer.json()
        assert answer.status in (200, 201), found
        return found


async def new_key(group: Cluster, node: GatewayProcess, **fields: Any) -> tuple[str, str]:
    made = await admin(group, node, "POST", "/admin/v1/keys", {"owner": "alice", **fields})
    return made["key"]["id"], made["secret"]


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def move_clock(group: Cluster, seconds: float) -> None:
    (group.tmp / "clock").write_text(str(seconds))


async def turns_until_ended(client: Client, mode: str, most: int = 80) -> list[dict[str, Any]]:
    """Turn after turn until the session ends; every event the client got."""
    for _ in range(most):
        try:
            if mode == "text":
                await client.send("text.send", text="tell me something")
            else:
                await speak_in_real_time(client, 300)
            while True:
                event = await client.next(WITHIN_S)
                if event["type"] == "session.ended":
                    return client.events
                if event["type"] == "response.done":
                    break
        except ConnectionClosed:
            return client.events
    raise AssertionError("the session never ended")


async def speak_in_real_time(client: Client, ms: int) -> None:
    """An utterance at the pace a microphone sends it (20 ms frames every 20 ms): a tone, then
    the silence that ends the turn."""
    pcm = pcm_tone(ms) + pcm_silence(600)
    step = 16000 * 20 // 1000 * 2
    loop = asyncio.get_running_loop()
    due = loop.time()
    for start in range(0, len(pcm), step):
        await client.send_raw(pcm[start : start + step])
        due += 0.02
        await asyncio.sleep(max(due - loop.time(), 0))


def responses(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "response.done" and e.get("usage")]


def response_costs(events: list[dict[str, Any]]) -> list[float]:
    return [e["usage"]["total_tokens"] / 1000 for e in responses(events)]


async def refused_with(group: Cluster, node: GatewayProcess, secret: str) -> tuple[int, Any]:
    async with group.http.get(node.url + "/v1/session", headers=bearer(secret)) as answer:
        return answer.status, await answer.json()


async def key_usage(group: Cluster, node: GatewayProcess, key_id: str) -> dict[str, float]:
    shown = await admin(group, node, "GET", f"/admin/v1/keys/{key_id}")
    return {f"{u['metric']}_{u['window']}": u["used"] for u in shown["usage"]}


async def test_a_daily_spend_budget_holds_across_nodes_and_resets_the_next_day(
    fleet: tuple[Cluster, GatewayProcess, GatewayProcess],
) -> None:
    group, a, b = fleet
    budget = 0.6
    key_id, secret = await new_key(group, a, budgets={"spend_per_day": budget})
    clients = []
    for node, mode in ((a, "text"), (b, "text"), (a, "voice"), (b, "voice")):
        client = await connect(group, node, **bearer(secret))
        await client.start(mode)
        clients.append((client, mode))
    seen = await asyncio.gather(*(turns_until_ended(c, mode) for c, mode in clients))

    most = 0.0
    for events in seen:
        kinds = [e["type"] for e in events]
        assert "budget.warning" in kinds  # a warning first, then the end
        assert kinds.index("budget.warning") < len(kinds) - 1
        warning = events[kinds.index("budget.warning")]
        assert (warning["scope"], warning["metric"], warning["window"]) == ("key", "spend", "day")
        ended = events[-1]
        assert (ended["type"], ended["reason"]) == ("session.ended", "budget_exhausted")
        assert ended["budget"]["scope"] == "key"
        assert ended["budget"]["limit"] == budget
        most = max([most, *response_costs(events)])
    spent = (await key_usage(group, b, key_id))["spend_day"]
    # The bound: past the budget by at most one response per live session.
    assert budget <= spent <= budget + most * len(clients), (spent, most)

    for node in (a, b):
        status, body = await refused_with(group, node, secret)
        assert status == 429
        assert body["error"]["code"] == "budget_exhausted"
        assert body["error"]["budget"]["resets_at"].endswith("T00:00:00Z")
    move_clock(group, DAY_S)  # the next UTC day
    await asyncio.sleep(0.1)  # the nodes read the clock file again within 50 ms
    fresh = [await connect(group, node, **bearer(secret)) for node in (a, b)]
    for client in fresh:
        await client.start("text")  # both nodes take the key again
    assert (await fresh[1].say("hello"))[-1]["type"] == "response.done"
    for client in fresh:
        await client.ws.close()


async def stream_silence(client: Client) -> list[dict[str, Any]]:
    """A microphone left open on silence, in real time, until the session ends: no turn, no
    response, no token report; the session's clock is all that is charged."""
    frame = pcm_silence(20)
    loop = asyncio.get_running_loop()
    due = loop.time()
    reader = asyncio.create_task(client.until("session.ended", within=60.0))
    try:
        while not reader.done():
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientConnectionError):
                await client.send_raw(frame)
            due += 0.02
            await asyncio.sleep(max(due - loop.time(), 0))
        return reader.result()
    finally:
        reader.cancel()


async def test_session_minutes_are_charged_on_the_clock_of_voice_only_sessions(
    fleet: tuple[Cluster, GatewayProcess, GatewayProcess], fake: FakeRealtimeServer
) -> None:
    group, a, b = fleet
    minutes = 0.25  # 15 s between the two sessions: about 7.5 s each
    key_id, secret = await new_key(group, a, budgets={"minutes_per_day": minutes})
    clients = [await connect(group, node, **bearer(secret)) for node in (a, b)]
    for client in clients:
        await client.start("voice")
    began = time.monotonic()
    seen = await asyncio.gather(*(stream_silence(client) for client in clients))
    took = time.monotonic() - began

    assert not any(conn.sent("response.done") for conn in fake.connections)  # no token report
    for events in seen:
        kinds = [e["type"] for e in events]
        assert kinds.count("budget.warning") == 1
        assert kinds.index("budget.warning") < kinds.index("session.ended")
        ended = events[-1]
        assert ended["reason"] == "budget_exhausted"
        assert (ended["budget"]["scope"], ended["budget"]["metric"]) == ("key", "minutes")
    used = (await key_usage(group, a, key_id))["minutes_day"]
    # The bound on the clock: past the limit by at most one tick (5 s) per live session.
    assert minutes <= used <= minutes + 2 * 5 / 60, used
    assert 15 / 2 - 1 <= took <= 15 / 2 + 5 + 2, took  # the two clocks together
    for node in (a, b):
        status, body = await refused_with(group, node, secret)
        assert status == 429
        assert body["error"]["budget"]["metric"] == "minutes"


async def test_a_team_budget_is_shared_by_its_keys(
    fleet: tuple[Cluster, GatewayProcess, GatewayProcess],
) -> None:
    group, a, b = fleet
    await admin(group, a, "PUT", "/admin/v1/teams/support", {"budgets": {"tokens_per_day": 2000}})
    _, first = await new_key(group, a, team="support")
    _, second = await new_key(group, b, team="support", owner="bob")
    clients = [
        await connect(group, a, **bearer(first)),
        await connect(group, b, **bearer(second)),
    ]
    for client in clients:
        await client.start("text")
    seen = await asyncio.gather(*(turns_until_ended(client, "text") for client in clients))
    most = 0
    for events in seen:
        ended = events[-1]
        assert ended["reason"] == "budget_exhausted"
        assert (ended["budget"]["scope"], ended["budget"]["metric"]) == ("team", "tokens")
        most = max([most, *(e["usage"]["total_tokens"] for e in responses(events))])
    shown = await admin(group, b, "GET", "/admin/v1/usage?group_by=team")
    (row,) = shown["rows"]
    assert row["id"] == "support"
    assert 2000 <= row["tokens"] <= 2000 + 2 * most
    for node, secret in ((a, second), (b, first)):  # each key, on the other node
        status, body = await refused_with(group, node, secret)
        assert (status, body["error"]["budget"]["scope"]) == (429, "team")
    counted = 0.0
    for node in (a, b):  # the listed team's charges, in Prometheus; no key or user label
        async with group.http.get(node.url + "/metrics") as page:
            text = await page.text()
        for line in text.splitlines():
            if line.startswith('gateway_team_usage_total{metric="tokens",team="support"}'):
                counted += float(line.rsplit(" ", 1)[1])
        assert "k_" not in "".join(x for x in text.splitlines() if "team_usage" in x)
    assert counted == row["tokens"]


async def test_revoking_a_key_ends_its_sessions_on_every_node_within_a_second(
    fleet: tuple[Cluster, GatewayProcess, GatewayProcess],
) -> None:
    group, a, b = fleet
    key_id, secret = await new_key(group, a)
    clients = [await connect(group, node, **bearer(secret)) for node in (a, b, b)]
    for client in clients:
        await client.start("text")
    other = await connect(group, a, Authorization=f"Bearer {token('carol')}")
    await other.start("text")  # a session of another credential goes on

    revoked_at = time.monotonic()
    await admin(group, b, "POST", f"/admin/v1/keys/{key_id}/revoke")
    ends = await asyncio.gather(*(client.last("session.ended", within=5.0) for client in clients))
    took = time.monotonic() - revoked_at
    assert {ended["reason"] for ended in ends} == {"key_revoked"}
    assert took < 1.0, took
    for node in (a, b):
        status, body = await refused_with(group, node, secret)
        assert (status, body["error"]["message"]) == (401, "this key was revoked")
    assert (await other.say("still here"))[-1]["type"] == "response.done"
    await other.ws.close()
