"""A cluster under faults: a node killed (SIGKILL), paused past its lease (SIGSTOP/SIGCONT),
drained (SIGTERM) with sessions and tool calls in flight, and Redis restarted empty. Real
gateway processes on one real Redis, the OpenAI fake in this process."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from typing import Any

from cluster_kit import LEASE_TTL_S, Cluster, connect, drop, resume, resumed_on
from harness import Client
from process_kit import wait_ready
from redis_kit import RedisServer

from fakes.openai_realtime.server import FakeRealtimeServer


def journal_call(label: str, sleep_ms: int) -> str:
    return "/tool journal " + json.dumps({"label": label, "sleep_ms": sleep_ms})


def results_given(fake: FakeRealtimeServer, call_id: str) -> list[tuple[int, str]]:
    """Every item, on every upstream connection, that gave the model ``call_id``'s result."""
    given = []
    for index, conn in enumerate(fake.connections):
        for event in conn.received("conversation.item.create"):
            item = event["item"]
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
                given.append((index, "output"))
            text = " ".join(str(part.get("text", "")) for part in item.get("content", []))
            if item.get("type") == "message" and call_id in text and "Result of" in text:
                given.append((index, "late"))
    return given


async def test_a_killed_node_s_session_resumes_elsewhere_and_the_lost_turn_is_named(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await client.say("before the crash")
    asked = journal_call("crash", 5000)
    await client.send("text.send", text=asked)
    call_id = (await client.last("tool.started"))["call_id"]
    await on_openai.call_started(started["session_id"], call_id)
    a.signal(signal.SIGKILL)
    await a.wait()
    await drop(client)

    again, answer = await resumed_on(on_openai, b, started)
    assert answer["recovery"] == {
        "reason": "node_lost",
        "lost_turn": {"text": asked},
        "failed_calls": [call_id],
    }
    finished = await again.last("tool.finished", call_id=call_id)
    assert finished["ok"] is False
    assert finished["error"]["type"] == "INTERNAL"
    reply = await again.until("response.done")
    assert call_id in reply[-1]["text"]  # the model was told, once
    assert results_given(fake, call_id) == [(len(fake.connections) - 1, "late")]
    assert on_openai.journal_lines() == []  # never completed, never run again
    assert (await again.say("still here?"))[-1]["text"] == "You said: still here?"
    await again.ws.close()


async def test_a_paused_node_cannot_act_for_a_session_that_moved(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await client.send("text.send", text=journal_call("paused", 1500))
    call_id = (await client.last("tool.started"))["call_id"]
    await on_openai.call_started(started["session_id"], call_id)
    a_upstream = fake.connections[-1]
    a.signal(signal.SIGSTOP)
    paused_at = time.monotonic()
    await drop(client)

    again, answer = await resumed_on(on_openai, b, started)
    # Taken once a's heartbeat expired (a paused node looks dead): a recovery.
    assert time.monotonic() - paused_at < 3 * LEASE_TTL_S
    assert answer["recovery"]["failed_calls"] == [call_id]
    await again.last("tool.finished", call_id=call_id)
    await again.until("response.done")  # the model's answer to "it failed"
    sent_by_a = len(a_upstream.log)

    a.signal(signal.SIGCONT)
    # The handler on a wakes up and finishes: its result goes to the ledger, never to a's
    # model (fenced), and b does not deliver it a second time (it told the model "failed").
    for _ in range(100):
        if on_openai.journal_lines():
            break
        await asyncio.sleep(0.05)
    assert [line["label"] for line in on_openai.journal_lines()] == ["paused"]
    await wait_ready(a.url)  # a is alive and well, serving others
    await asyncio.sleep(LEASE_TTL_S)  # a's checks after the pause have run
    inbound_after = [
        event["type"] for direction, event in a_upstream.log[sent_by_a:] if direction == "in"
    ]
    assert "conversation.item.create" not in inbound_after, inbound_after
    assert "response.create" not in inbound_after
    assert len(results_given(fake, call_id)) == 1  # b's "failed", only
    assert (await again.say("after the pause"))[-1]["text"] == "You said: after the pause"
    await again.ws.close()


class MovingClient:
    """A client that follows ``session.moving``: reconnects to ``target`` and resumes."""

    def __init__(self, group: Cluster, client: Client, started: dict[str, Any]) -> None:
        self.group, self.client, self.started = group, client, started
        self.moved = False
        self.close_code: int | None = None

    async def follow(self, target: Any) -> dict[str, Any]:
        moving = await self.client.last("session.moving", within=15)
        assert moving["session_id"] == self.started["session_id"]
        self.close_code = await self.client.wait_closed(within=10)
        self.client = await connect(self.group, target)
        answer = await resume(self.client, self.started, token=moving["resume_token"])
        self.moved = True
        return answer


async def test_a_drained_node_moves_twenty_sessions_and_their_running_calls(
    on_openai: Cluster, fake: FakeRealtimeServer
) -> None:
    a = await on_openai.node("a", drain_grace_s="8")
    b = await on_openai.node("b")
    movers: list[MovingClient] = []
    calls: dict[int, str] = {}
    for n in range(20):
        client = await connect(on_openai, a)
        started = await client.start("text")
        movers.append(MovingClient(on_openai, client, started))
        if n % 4 == 0:  # five of them have a call running when the drain begins
            await client.send("text.send", text=journal_call(f"call{n}", 1500))
            calls[n] = (await client.last("tool.started"))["call_id"]
            await on_openai.call_started(started["session_id"], calls[n])
    a.signal(signal.SIGTERM)
    answers = await asyncio.gather(*(m.follow(b) for m in movers))
    assert all(answer["type"] == "session.started" and answer["resumed"] for answer in answers)
    assert {m.close_code for m in movers} == {1012}
    for n, call_id in calls.items():
        finished = await movers[n].client.last("tool.finished", call_id=call_id)
        assert finished["ok"] is True
        assert finished["data"]["pid"] == a.pid  # it ran where it started
        reply = await movers[n].client.until("response.done")  # b gave the model its result
        assert call_id in reply[-1]["text"]
    for m in movers:
        reply = await m.client.say("hello after the move")
        assert reply[-1]["text"] == "You said: hello after the move"
    assert await a.wait() == 0
    labels = sorted(line["label"] for line in on_openai.journal_lines())
    assert labels == sorted(f"call{n}" for n in calls)  # each ran once
    for call_id in calls.values():
        assert len(results_given(fake, call_id)) == 1  # each result reached the model once
    for m in movers:
        await m.client.ws.close()


async def test_live_sessions_outlive_a_redis_restart(
    on_openai: Cluster, redis_server: RedisServer
) -> None:
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await client.say("before the restart")
    redis_server.stop()
    try:
        # Live sessions keep talking; a new session needs the store and says so.
        assert (await client.say("while it is down"))[-1]["text"] == "You said: while it is down"
        other = await connect(on_openai, b)
        await other.send("session.start", mode="text", event_id="s1")
        refused = await other.next(within=10)
        assert (refused["code"], refused["retryable"], refused["event_id"]) == (
            "store_unavailable",
            True,
            "s1",
        )
        await other.ws.close()
        for _ in range(100):
            async with on_openai.http.get(f"{a.url}/readyz") as response:
                if response.status == 503:
                    assert (await response.json())["status"] == "degraded"
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("readyz never said degraded")
    finally:
        await asyncio.to_thread(redis_server.start)
    await wait_ready(a.url)
    await client.say("after the restart")  # a boundary: the record is written again
    await drop(client)
    again, _ = await resumed_on(on_openai, b, started)
    assert (await again.say("resumed"))[-1]["text"] == "You said: resumed"
    async with on_openai.http.get(f"{a.url}/metrics") as response:
        text = await response.text()
    assert 'gateway_store_errors_total{op="heartbeat"}' in text
    await again.ws.close()


async def test_a_session_resumes_after_a_redis_restart_without_a_new_turn(
    on_openai: Cluster, redis_server: RedisServer
) -> None:
    """The store came back empty; the node recorded its sessions again by itself."""
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await client.say("only turn")
    await redis_server.restart(down_for_s=LEASE_TTL_S)
    await wait_ready(a.url)
    await drop(client)
    again, _ = await resumed_on(on_openai, b, started)
    await again.ws.close()


async def test_a_confirmation_and_a_running_call_outlive_redis_restarting_empty(
    on_openai: Cluster, redis_server: RedisServer, fake: FakeRealtimeServer
) -> None:
    """Redis restarts without its data while a confirmation waits and a tool call runs: the
    node records its confirmation again (it can still be approved, once), and the call's
    result, whose ledger entry is gone, still reaches the model, once."""
    a = await on_openai.node("a")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await client.send("text.send", text='/tool journal_confirm {"label":"booking"}')
    requested = await client.last("confirmation.requested")
    await client.until_reply()
    await client.send("text.send", text=journal_call("slow", 2500))
    call_id = (await client.last("tool.started"))["call_id"]
    await on_openai.call_started(started["session_id"], call_id)
    await redis_server.restart(down_for_s=0.5)
    finished = await client.last("tool.finished", call_id=call_id)
    assert finished["ok"] is True
    answer = await client.last("response.done")
    while not answer["text"]:  # the response that asked for the call ends first, empty
        answer = await client.last("response.done")
    assert call_id in answer["text"]  # the model got the result and answered
    assert len(results_given(fake, call_id)) == 1
    await client.send(
        "confirmation.respond", confirmation_id=requested["confirmation_id"], decision="approve"
    )
    resolved = await client.last("confirmation.resolved")
    assert (resolved["decision"], resolved["result"]["ok"]) == ("approved", True)
    labels = sorted(line["label"] for line in on_openai.journal_lines())
    assert labels == ["booking", "slow"]
    await client.ws.close()


async def test_a_confirmation_approved_before_the_node_noticed_redis_came_back_empty_runs(
    on_openai: Cluster, redis_server: RedisServer
) -> None:
    """Found by the soak (a phone call whose caller pressed 1 and heard nothing): Redis came
    back empty; before the node's heartbeat recorded its sessions again, the approval's write
    found no record, registered the session again, but not its open confirmation, and took the
    missing key for one another node had taken: ``confirmation_not_found``, nothing ran."""
    a = await on_openai.node("a", lease_ttl_s="60")  # no heartbeat in this test's time
    client = await connect(on_openai, a)
    await client.start("text")
    await client.send("text.send", text='/tool journal_confirm {"label":"booking"}')
    requested = await client.last("confirmation.requested")
    await client.until_reply()
    await redis_server.restart()
    await client.send(
        "confirmation.respond", confirmation_id=requested["confirmation_id"], decision="approve"
    )
    resolved = await client.last("confirmation.resolved")
    assert (resolved["decision"], resolved["result"]["ok"]) == ("approved", True)
    assert [line["label"] for line in on_openai.journal_lines()] == ["booking"]
    # Approving again is refused: the confirmation was taken, once.
    await client.send(
        "confirmation.respond", confirmation_id=requested["confirmation_id"], decision="approve"
    )
    assert (await client.last("error"))["code"] == "confirmation_not_found"
    await client.ws.close()


async def test_a_resume_before_the_owner_recorded_its_sessions_again_is_retryable(
    on_openai: Cluster, redis_server: RedisServer
) -> None:
    """Found by the soak (sessions lost at the Redis restart): Redis came back empty and a
    client resumed before its session's node had recorded it again (its next heartbeat): the
    claim found no record and the answer was ``resume_failed``, final, for a session alive on
    its node. While Redis has been up for less than a lease, it is ``store_unavailable``."""
    a = await on_openai.node("a", lease_ttl_s="60")  # its next heartbeat is far away
    b = await on_openai.node("b", lease_ttl_s="60")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await client.say("only turn")
    await drop(client)
    # Node a is held still while Redis comes back, so that the resume surely comes before a
    # records its sessions again (a node that sees the store return re-records them at once:
    # a resume after that succeeds, which was this test's race).
    a.signal(signal.SIGSTOP)
    try:
        await redis_server.restart()
        again = await connect(on_openai, b)
        answer = await resume(again, started)
    finally:
        a.signal(signal.SIGCONT)
    assert (answer["type"], answer["code"], answer["retryable"]) == (
        "error",
        "store_unavailable",
        True,
    )
    await again.ws.close()


async def test_resume_while_redis_is_down_is_a_retryable_error(
    on_openai: Cluster, redis_server: RedisServer
) -> None:
    a, b = await on_openai.node("a"), await on_openai.node("b")
    client = await connect(on_openai, a)
    started = await client.start("text")
    await drop(client)
    redis_server.stop()
    try:
        again = await connect(on_openai, b)
        answer = await resume(again, started)
        assert (answer["type"], answer["code"], answer["retryable"]) == (
            "error",
            "store_unavailable",
            True,
        )
        await again.ws.close()
    finally:
        await asyncio.to_thread(redis_server.start)
