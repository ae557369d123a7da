"""Tool results reach the model once when a session with a background call moves between nodes.

Found by the soak (``result_once``): a text session on the Gemini fake ran a background call on
node a; node a was drained (SIGTERM) and the session moved to node b, which adopted the call
from the ledger and gave its result to the model as a text turn. That turn reached the model
while the session's next call (a blocking one) was pending: a ``clientContent`` cuts the turn in
progress, so the model cancelled the call (``toolCallCancellation``) and its result, ready a
moment later, was dropped (``tool_result_dropped``); the model answered the late result instead.

Two real gateway processes share a real Redis and talk to a fake upstream in this process (the
Gemini fake over TLS; the same walk on OpenAI Realtime and chat completions). The soak's
journaling tools return their execution's key (``soakrun:…``), and the soak's own judge
(``soak.upstream_tally``) reads every frame the fakes get and send: which results were given to
the model, on which connection, and which of its completed replies answered them.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cluster_kit import CLUSTER_TOOLS, Cluster, cluster, connect, resume
from harness import Client
from process_kit import REPO, GatewayProcess, build_registry_file
from redis_kit import RedisServer

from fakes.chat.brain import FakeReply, Text
from fakes.chat.server import FakeChatServer
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from soak.journal import JOURNAL_ENV
from soak.upstream_tally import RUN_KEY, Tally

WITHIN_S = 20.0


@dataclass
class Upstream:
    """The fake model the nodes talk to, and the soak's judge of what it was given."""

    provider: str
    settings: dict[str, str] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)
    gemini: FakeGeminiServer | None = None

    def cancelled_by_the_model(self) -> list[str]:
        """Call ids the Gemini model cancelled (``toolCallCancellation``)."""
        if self.gemini is None:
            return []
        return [
            call_id
            for connection in self.gemini.connections
            for message in connection.sent("toolCallCancellation")
            for call_id in message["toolCallCancellation"]["ids"]
        ]

    def assert_each_given_once(self, runs: set[str]) -> None:
        """The soak's ``result_once``, and stricter: each result given to the model on one
        connection, once (each session here has one upstream connection per node, and no
        result reaches a node's before it moves), none answered twice; no call cancelled."""
        tally = self.tally
        assert tally.duplicates == []
        assert {run: tally.given[run] for run in runs} == dict.fromkeys(runs, 1)
        assert {run: tally.answered[run] <= 1 for run in runs} == dict.fromkeys(runs, True)
        assert self.cancelled_by_the_model() == []


async def start_fake(provider: str, tmp_path: Path, stack: AsyncExitStack) -> Upstream:
    upstream = Upstream(provider)
    tally = upstream.tally
    if provider == "gemini":
        gemini = FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs")
        gemini.tap = lambda conn, direction, msg: tally.frame(id(conn), "gemini", direction, msg)
        upstream.gemini = await stack.enter_async_context(gemini)
        upstream.settings = {
            "gemini_base_url": gemini.base_url,
            "gemini_ca_file": str(gemini.ca_file),
        }
    elif provider == "openai":
        openai = FakeRealtimeServer(FakeOptions())
        openai.tap = lambda conn, direction, msg: tally.frame(id(conn), "openai", direction, msg)
        await stack.enter_async_context(openai)
        upstream.settings = {"openai_ws_url": openai.ws_url}
    else:
        chat = FakeChatServer()

        def exchange(body: dict[str, Any], reply: FakeReply) -> None:
            tally.chat_exchange(body, reply.text if isinstance(reply, Text) else None)

        chat.tap = exchange
        await stack.enter_async_context(chat)
        upstream.settings = {"chat_base_url": chat.base_url, "chat_api_key": "test-key"}
    upstream.settings["provider"] = provider
    return upstream


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as exits:
        yield exits


@pytest.fixture
def soak_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The nodes' registry (``Cluster.node`` uses it): the soak's journaling tools too."""
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    monkeypatch.setenv(JOURNAL_ENV, str(tmp_path / "soak-journal.jsonl"))
    tools = (REPO / "tools", CLUSTER_TOOLS, REPO / "soak" / "tools")
    build_registry_file(tmp_path / "registry.json", *tools)


async def nodes_on(
    provider: str, redis_server: RedisServer, tmp_path: Path, stack: AsyncExitStack
) -> tuple[Upstream, Cluster]:
    upstream = await start_fake(provider, tmp_path, stack)
    group = await stack.enter_async_context(cluster(redis_server, tmp_path, **upstream.settings))
    return upstream, group


def tool(name: str, **arguments: Any) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


def finished(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for event in events:
        if event["type"] == "tool.finished" and event["name"] == name:
            return event
    raise AssertionError(f"no tool.finished of {name} in {[e['type'] for e in events]}")


def index_of(events: list[dict[str, Any]], type_: str, **match: Any) -> int:
    for index, event in enumerate(events):
        if event["type"] == type_ and all(event.get(k) == v for k, v in match.items()):
            return index
    raise AssertionError(f"no {type_} {match} in {[e['type'] for e in events]}")


def named_by_replies(events: list[dict[str, Any]], runs: set[str]) -> set[str]:
    """The runs that a completed reply among ``events`` names (the model answered them)."""
    return {
        run
        for event in events
        if event["type"] == "response.done" and event.get("status") == "completed"
        for run in RUN_KEY.findall(event.get("text") or "")
        if run in runs
    }


async def until_answered(client: Client, events: list[dict[str, Any]], runs: set[str]) -> None:
    """Read into ``events`` until a completed reply has named each of ``runs``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WITHIN_S
    while named_by_replies(events, runs) != runs:
        events.append(await client.next(max(deadline - loop.time(), 0.01)))


async def with_background_call(
    group: Cluster, node: GatewayProcess, ms: int
) -> tuple[Client, dict[str, Any], list[dict[str, Any]]]:
    """A text session on ``node`` whose background call runs, and that the model acknowledged
    (``tool.started`` and the acknowledgement may come in either order)."""
    client = await connect(group, node)
    started = await client.start("text")
    await client.send("text.send", text=tool("soak_background", label="background", ms=ms))
    events: list[dict[str, Any]] = []
    while not (
        any(e["type"] == "tool.started" for e in events)
        and any(e["type"] == "response.done" and e.get("text") for e in events)
    ):
        events.append(await client.next(WITHIN_S))
    return client, started, events


async def drained_to(
    group: Cluster, a: GatewayProcess, b: GatewayProcess, client: Client, started: dict[str, Any]
) -> tuple[Client, list[dict[str, Any]]]:
    """Drain ``a`` (SIGTERM); the client follows ``session.moving`` to ``b``: its new socket,
    and what the old one got from the drain on."""
    a.signal(signal.SIGTERM)
    before_move = await client.until("session.moving", within=WITHIN_S)
    await client.wait_closed(within=10)
    moved = await connect(group, b)
    answer = await resume(moved, started, token=before_move[-1]["resume_token"])
    assert answer["type"] == "session.started", answer
    assert answer["resumed"] is True
    return moved, before_move


def log_events(*nodes: GatewayProcess) -> list[str]:
    return [str(record.get("event")) for node in nodes for record in node.log_records()]


@pytest.mark.parametrize("provider", ["gemini", "openai", "chat"])
async def test_a_background_result_adopted_while_the_next_call_runs_costs_neither_result(
    provider: str,
    redis_server: RedisServer,
    tmp_path: Path,
    stack: AsyncExitStack,
    soak_tools: None,
) -> None:
    """The soak's loss: node b adopts the background call that finished on a, and gives its
    result while the session's next (blocking) call runs. Neither result may be lost."""
    upstream, group = await nodes_on(provider, redis_server, tmp_path, stack)
    a, b = await group.node("a"), await group.node("b")
    client, started, _ = await with_background_call(group, a, ms=3000)
    moved, _ = await drained_to(group, a, b, client, started)
    await moved.send("text.send", text=tool("soak_sleep", label="next", ms=3500))
    events = await moved.until("tool.finished", within=WITHIN_S, name="soak_sleep")
    background, after_move = finished(events, "soak_background"), finished(events, "soak_sleep")
    # The path of the soak's loss: the background result came while the next call ran.
    assert (
        index_of(events, "tool.started", name="soak_sleep")
        < events.index(background)
        < events.index(after_move)
    )
    assert after_move["ok"] is True, after_move
    runs = {background["data"]["run"], after_move["data"]["run"]}
    await until_answered(moved, events, runs)
    await moved.ws.close()
    assert await a.wait() == 0

    upstream.assert_each_given_once(runs)
    logged = log_events(a, b)
    assert "tool_result_dropped" not in logged
    assert "tool_call_cancelled" not in logged


async def test_a_background_result_adopted_while_idle_and_the_next_call_each_reach_gemini_once(
    redis_server: RedisServer, tmp_path: Path, stack: AsyncExitStack, soak_tools: None
) -> None:
    """Drained while the background call runs; its result reaches node b's model while it is
    idle, and the call made after it reaches it too."""
    upstream, group = await nodes_on("gemini", redis_server, tmp_path, stack)
    a, b = await group.node("a"), await group.node("b")
    client, started, _ = await with_background_call(group, a, ms=1500)
    moved, _ = await drained_to(group, a, b, client, started)
    events = await moved.until("tool.finished", within=WITHIN_S, name="soak_background")
    background = finished(events, "soak_background")
    await until_answered(moved, events, {background["data"]["run"]})
    after = await moved.say(tool("soak_count", label="next"))
    counted = finished(after, "soak_count")
    runs = {background["data"]["run"], counted["data"]["run"]}
    await until_answered(moved, events + after, runs)
    await moved.ws.close()
    assert await a.wait() == 0

    upstream.assert_each_given_once(runs)
    assert "tool_result_dropped" not in log_events(a, b)


async def test_a_background_result_answered_before_the_drain_is_not_given_again_on_gemini(
    redis_server: RedisServer, tmp_path: Path, stack: AsyncExitStack, soak_tools: None
) -> None:
    """The background call finished and was answered on node a; then a drains: node b
    adopts nothing, and the call made there reaches its model once."""
    upstream, group = await nodes_on("gemini", redis_server, tmp_path, stack)
    a, b = await group.node("a"), await group.node("b")
    client, started, events = await with_background_call(group, a, ms=200)
    while not any(e["type"] == "tool.finished" for e in events):
        events.append(await client.next(WITHIN_S))
    background = finished(events, "soak_background")
    await until_answered(client, events, {background["data"]["run"]})
    moved, _ = await drained_to(group, a, b, client, started)
    after = await moved.say(tool("soak_count", label="next"))
    counted = finished(after, "soak_count")
    await until_answered(moved, after, {counted["data"]["run"]})
    await moved.ws.close()
    assert await a.wait() == 0

    # node b adopts nothing: no background result finishes there (the Gemini fake has been
    # seen to call soak_count a second time after the move, in about one run of five of this
    # file: each call ran once and reached the model once, checked below; not yet explained)
    finished_on_b = [e["name"] for e in after if e["type"] == "tool.finished"]
    assert "soak_background" not in finished_on_b
    assert finished_on_b[0] == "soak_count"
    upstream.assert_each_given_once({background["data"]["run"], counted["data"]["run"]})
    assert "tool_result_dropped" not in log_events(a, b)
