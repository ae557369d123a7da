"""Adversarial review of the chat-completions upstream (issue 6): each test showed a bug found
in review and failed before its fix.

Races between the session's calls into ``ChatTransport`` and its turn task, over real sockets
against the fake server (some tests drive the gateway as a client does, the others drive
``ChatTransport`` directly, as the session does, where the interleaving must be exact), then the
pure pieces (marker filter, call planning): two test files may not share a basename.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from harness import Client, Gateway, GatewayFactory, types
from test_gateway_chat import chat_gateway

from fakes.chat.server import FakeChatOptions, FakeChatServer
from gateway.registry import Registry
from gateway.toolrun import Caller, MemoryAuditSink, ToolCall, ToolRunner
from transports.base import ToolDeclaration, ToolResult, UpstreamConfig
from transports.chat import ChatOptions, ChatTransport
from transports.chat.calls import PlannedCalls, plan_calls
from transports.chat.dialects import Dialect
from transports.chat.inline import InlineMarkerFilter, MarkerProblem
from transports.chat.reader import Completion, CompletionReader
from transports.events import (
    ResponseDone,
    ResponseStarted,
    ToolCallsRequested,
    UpstreamEvent,
)

TIMEOUT_S = 5.0
CALENDAR_ARGS = {
    "title": "Dentist",
    "start": "2030-01-15T10:00:00+00:00",
    "duration_minutes": 30,
}
TIME_TOOL = ToolDeclaration(
    "get_current_time",
    "The current time",
    {
        "openaiChat": {
            "type": "function",
            "function": {
                "name": "get_current_time",
                "description": "The current time",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    },
)


# -- fixtures and helpers ---------------------------------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeChatServer]:
    async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as server:
        yield server


@pytest.fixture
async def gateway(fake: FakeChatServer, gateway_factory: GatewayFactory) -> Gateway:
    return await chat_gateway(gateway_factory, fake)


async def responses_until(client: Client, dones: int) -> list[dict[str, Any]]:
    """Client events until ``dones`` ``response.done`` events have arrived."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(TIMEOUT_S):
        while types(seen).count("response.done") < dones:
            seen.append(await client.next())
    return seen


def overlapping(events: list[dict[str, Any]]) -> list[str]:
    """Response ids that started while another response was still open."""
    open_id: str | None = None
    bad: list[str] = []
    for event in events:
        if event["type"] == "response.started":
            if open_id is not None:
                bad.append(event["response_id"])
            open_id = event["response_id"]
        elif event["type"] == "response.done" and event["response_id"] == open_id:
            open_id = None
    return bad


class Upstream:
    """The session's side of a ``ChatTransport``: its one events() reader, with timeouts."""

    def __init__(self, transport: ChatTransport) -> None:
        self.transport = transport
        self.events = transport.events()
        self.seen: list[UpstreamEvent] = []

    async def until(self, done: Callable[[UpstreamEvent], bool]) -> list[UpstreamEvent]:
        out: list[UpstreamEvent] = []
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                event = await anext(self.events)
                self.seen.append(event)
                out.append(event)
                if done(event):
                    return out

    async def calls(self) -> ToolCallsRequested:
        event = (await self.until(lambda e: isinstance(e, ToolCallsRequested)))[-1]
        assert isinstance(event, ToolCallsRequested)
        return event

    async def done(self, response_id: str) -> ResponseDone:
        event = (
            await self.until(lambda e: isinstance(e, ResponseDone) and e.response_id == response_id)
        )[-1]
        assert isinstance(event, ResponseDone)
        return event


@asynccontextmanager
async def upstream(fake_server: FakeChatServer) -> AsyncIterator[Upstream]:
    transport = ChatTransport(
        ChatOptions(
            api_key="sk-chat",
            model="fake-chat-1",
            base_url=fake_server.base_url,
            max_retries=0,
        )
    )
    await transport.connect(
        UpstreamConfig(mode="text", instructions="Be brief.", tools=[TIME_TOOL])
    )
    try:
        yield Upstream(transport)
    finally:
        await transport.close()


def ok(call_id: str, data: dict[str, Any]) -> ToolResult:
    return ToolResult(call_id, "get_current_time", {"ok": True, "data": data})


def tool_content(body: dict[str, Any], call_id: str) -> dict[str, Any]:
    [content] = [
        m["content"]
        for m in body["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == call_id
    ]
    parsed: dict[str, Any] = json.loads(content)
    return parsed


# -- the bugs ---------------------------------------------------------------------------------


async def test_a_message_that_cancels_a_response_with_a_late_result_waiting_runs_one_turn_at_a_time(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text", tools=["calendar_create_event"]) as client:
        await client.send(
            "text.send", text=f"/tool calendar_create_event {json.dumps(CALENDAR_ARGS)}"
        )
        request = await client.last("confirmation.requested")
        await client.until("response.done")
        # A slow answer is streaming when the client approves: the approved result waits in
        # the transport (send_late_result) for the active response to end.
        await client.send("text.send", text="/slow 3000 still thinking")
        await client.until("response.started")
        await fake.wait_for_requests(3)
        await client.send(
            "confirmation.respond", confirmation_id=request["confirmation_id"], decision="approve"
        )
        await client.until("confirmation.resolved")
        # A new message ends the slow response; the late result opens the new message's turn
        # (one response, the model told both), never a second turn running beside it.
        await client.send("text.send", text="hello")
        events = await responses_until(client, 2)
    assert overlapping(events) == []
    assert types(events).count("response.started") == 1
    assert events[-1]["text"] == "You said: hello"
    messages = fake.requests[-1]["messages"]
    assert messages[-1] == {"role": "user", "content": "hello"}
    assert messages[-2]["role"] == "system"
    assert request["call_id"] in messages[-2]["content"]


async def test_results_of_a_cancelled_batch_do_not_answer_the_next_batch(
    fake: FakeChatServer,
) -> None:
    async with upstream(fake) as up:
        await up.transport.send_text("/tool get_current_time {}")
        stale = (await up.calls()).calls[0].call_id
        # A new message cancels the first response; its own turn asks for a new call.
        await up.transport.send_text("/tool get_current_time {}")
        current = await up.calls()
        [call] = current.calls
        # The session answers the cancelled batch late (a call it could not cancel in time),
        # then the current one.
        await up.transport.send_tool_results([ok(stale, {"time": "stale"})])
        await up.transport.send_tool_results([ok(call.call_id, {"time": "12:00"})])
        await up.done(current.response_id)
    # The model must get the real result of the call that ran, not "it did not run".
    assert tool_content(fake.requests[-1], call.call_id) == {"ok": True, "data": {"time": "12:00"}}


async def test_results_delivered_before_a_cancel_are_what_the_model_sees(
    fake: FakeChatServer,
) -> None:
    async with upstream(fake) as up:
        await up.transport.send_text("/tool get_current_time {}")
        batch = await up.calls()
        [call] = batch.calls
        # The tool ran and its result is in; the user's next message comes before the turn
        # task has taken it.
        await up.transport.send_tool_results([ok(call.call_id, {"time": "12:00"})])
        await up.transport.send_text("what now?")
        await up.done(batch.response_id)
        await up.until(lambda e: isinstance(e, ResponseDone))
    # The call did run (the client saw tool.finished ok): the history must say so.
    assert tool_content(fake.requests[-1], call.call_id) == {"ok": True, "data": {"time": "12:00"}}


async def test_close_during_a_new_message_leaves_nothing_running(fake: FakeChatServer) -> None:
    async with upstream(fake) as up:
        transport = up.transport
        await transport.send_text("/slow 3000 thinking")
        await fake.wait_for_requests(1)
        await up.until(lambda e: isinstance(e, ResponseStarted))
        # The session's client reader sends a message (it waits for the slow response to be
        # cancelled) while another task ends the session.
        message = asyncio.create_task(transport.send_text("one more"))
        closing = asyncio.create_task(transport.close())
        async with asyncio.timeout(TIMEOUT_S):
            await asyncio.gather(message, closing)
            # Whatever the transport still runs after close() gets to finish.
            turns = [
                t
                for t in asyncio.all_tasks()
                if not t.done() and "_run_turn" in t.get_coro().__qualname__  # type: ignore[union-attr]
            ]
            await asyncio.gather(*turns, return_exceptions=True)
            # The session's reader reads on to the end of events() (close ends it) ...
            async for _ in up.events:
                pass
            # ... and nothing may come after that end.
            after_close = [e async for e in transport.events()]
    assert after_close == []
    assert len(fake.requests) == 1


async def test_a_new_message_during_a_tool_call_ends_the_old_response_before_the_new_starts(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text", tools=["sleepy"]) as client:
        await client.send("text.send", text='/tool sleepy {"ms": 900}')
        events = await client.until("tool.started")
        await client.send("text.send", text="hello")
        events += await client.until("response.done", text="You said: hello")
    assert overlapping(events) == []
    assert [e["status"] for e in events if e["type"] == "response.done"] == [
        "cancelled",
        "completed",
    ]


async def test_a_cancelled_call_still_waiting_for_its_dependency_does_not_run(
    runner_registry: Registry, tmp_path: Path
) -> None:
    # The feed of the stale results above: ToolFlow.cancel cancels a batch call by call, and
    # a call that has not started yet (after_sleepy dependsOn sleepy) is not cancelled.
    runner = ToolRunner(runner_registry, data_dir=tmp_path, audit=MemoryAuditSink())
    caller = Caller(session_id="s-1", user_id="alice", roles=(), mode="text", turn=1)
    calls = [ToolCall("a", "sleepy", {"ms": 900}), ToolCall("b", "after_sleepy", {})]
    batch = asyncio.create_task(runner.run_batch(calls, caller))
    # asyncio runs ready tasks in order: a few yields get sleepy to its first await.
    for _ in range(3):
        await asyncio.sleep(0)
    assert (tmp_path / "sleepy_a.state").read_text() == "started"
    for call in calls:  # the provider cancels the whole batch (ToolCallsCancelled)
        runner.cancel(call.call_id)
    sleepy, after = await asyncio.wait_for(batch, TIMEOUT_S)
    assert sleepy.cancelled
    assert after.cancelled  # else ToolFlow sends its result to a model that no longer waits


# -- the pure pieces ----------------------------------------------------------------------------


def unique_ids() -> Callable[[str], str]:
    """The transport's id rule: a provider's id unless missing or already used."""
    used: set[str] = set()
    fresh: Iterator[str] = iter(f"call_new_{n}" for n in range(1, 100))

    def make(call_id: str) -> str:
        if not call_id or call_id in used:
            call_id = next(fresh)
        used.add(call_id)
        return call_id

    return make


def read(dialect: Dialect, text: str, *, planning: bool = False) -> Completion:
    reader = CompletionReader(dialect, planning=planning)
    shown = reader.feed({"choices": [{"index": 0, "delta": {"content": text}}]})
    reader.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    tail, completion = reader.finish()
    assert shown + tail == completion.shown
    return completion


def filtered(text: str) -> tuple[str, list[Any]]:
    marker_filter = InlineMarkerFilter()
    shown, found = marker_filter.feed(text)
    tail, more = marker_filter.finish()
    return shown + tail, found + more


def test_a_marker_without_braces_is_not_shown() -> None:
    shown, found = filtered('One moment. [TOOL_CALL:get_current_time {"timezone": "UTC"}] Done.')
    assert [type(f) for f in found] == [MarkerProblem]
    assert shown.startswith("One moment. ")
    assert "get_current_time" not in shown
    assert "timezone" not in shown


@pytest.mark.parametrize("confidence", ["true", "NaN"])
def test_an_inline_confidence_that_is_not_a_number_never_runs_the_call(confidence: str) -> None:
    entry = f'{{"id":"c1","tool":"log_medication","parameters":{{}},"confidence":{confidence}}}'
    marker = f"[TOOL_CALL:{entry}]"
    planned = plan_calls(
        read(Dialect.INLINE, f"Logging it. {marker}"), Dialect.INLINE, unique_ids()
    )
    # The json dialect refuses the same plan entry ('"confidence" must be a number').
    assert planned.requested == ()
    assert len(planned.refused) == 1


def _round(dialect: Dialect, call_id: str, make: Callable[[str], str]) -> PlannedCalls:
    entry = {"id": call_id, "tool": "get_current_time", "parameters": {}, "confidence": 0.9}
    if dialect is Dialect.INLINE:
        text = f"Checking. [TOOL_CALL:{orjson.dumps(entry).decode()}]"
        return plan_calls(read(dialect, text), dialect, make)
    plan = orjson.dumps({"toolCalls": [entry], "reasoning": "asked"}).decode()
    return plan_calls(read(dialect, plan, planning=True), dialect, make)


@pytest.mark.parametrize("dialect", [Dialect.INLINE, Dialect.JSON])
def test_a_result_line_names_an_id_the_model_can_find_in_its_own_message(
    dialect: Dialect,
) -> None:
    make = unique_ids()
    _round(dialect, "call-1", make)
    # Models restart at "call-1" in the next round (or the next message) all the time.
    again = _round(dialect, "call-1", make)
    [call] = again.requested
    assistant, results = again.messages({call.call_id: {"ok": True, "data": {}}})
    [result_id] = re.findall(r"\[TOOL_RESULT:([^:\]]*):", results["content"])
    assert result_id in assistant["content"]
