"""Client ↔ gateway ↔ the fake chat-completions server, over real sockets, through the SDK.

The fake (``fakes/chat/server.py``) streams like the real API, with tool calls the hard
way (arguments in 3-character fragments, parallel calls interleaved by index) and answers with
the local model's directives: ``/tool``, ``/tools``, ``/badjson``, ``/chain N`` (call again in
each round until N rounds), ``/unsure`` (confidence 0.4), ``/http STATUS [TIMES]``, ``/cut``,
and ``Tool results: NAME=<result>; …`` once results are in. Its request log shows exactly what
the gateway sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from harness import Client, Fakes, Gateway, GatewayFactory, first, model_results, types

from fakes.chat.server import FakeChatOptions, FakeChatServer

FakeFactory = Callable[..., Awaitable[FakeChatServer]]


@pytest.fixture
async def fake_factory() -> AsyncIterator[FakeFactory]:
    fakes = Fakes(lambda **o: FakeChatServer(FakeChatOptions(**o)))
    yield fakes
    await fakes.stop_all()


@pytest.fixture
async def fake(fake_factory: FakeFactory) -> FakeChatServer:
    return await fake_factory(api_key="sk-chat")


async def chat_gateway(
    gateway_factory: GatewayFactory, fake: FakeChatServer, **settings: Any
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "chat",
        "chat_base_url": fake.base_url,
        "chat_api_key": "sk-chat",
        "chat_model": "fake-chat-1",
        **settings,
    }
    return await gateway_factory(**options)


@pytest.fixture
async def gateway(fake: FakeChatServer, gateway_factory: GatewayFactory) -> Gateway:
    return await chat_gateway(gateway_factory, fake)


async def turn(client: Client, text: str) -> list[dict[str, Any]]:
    """Send a message; every event up to its (single) ``response.done``."""
    await client.send("text.send", text=text)
    return await client.until("response.done")


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "text.delta")


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


# -- the agent loop (native tool calls) -----------------------------------------------------------


async def test_a_plain_message_streams_one_response(gateway: Gateway, fake: FakeChatServer) -> None:
    async with gateway.session("text") as client:
        events = await turn(client, "hello there")
    assert types(events)[0] == "response.started"
    assert text_of(events) == "You said: hello there"
    done = events[-1]
    assert done["status"] == "completed"
    assert done["text"] == "You said: hello there"
    body = fake.requests[0]
    assert body["model"] == "fake-chat-1"
    assert body["stream"] is True
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": "hello there"}
    assert {t["function"]["name"] for t in body["tools"]} >= {"get_current_time", "kb_search"}


async def test_multi_round_tool_use_is_one_response(gateway: Gateway, fake: FakeChatServer) -> None:
    async with gateway.session("text", tools=["get_current_time"]) as client:
        events = await turn(client, '/chain 3 get_current_time {"timezone": "UTC"}')
    assert types(events).count("response.started") == 1
    assert types(events).count("response.done") == 1
    started = [e for e in events if e["type"] == "tool.started"]
    finished = [e for e in events if e["type"] == "tool.finished"]
    assert len(started) == len(finished) == 3
    assert len({e["call_id"] for e in started}) == 3
    assert all(e["ok"] for e in finished)
    assert len(fake.requests) == 4
    # Each round's request carries every earlier call with its result, ids unchanged.
    last = fake.requests[-1]
    calls = [c["id"] for m in last["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
    assert calls == [e["call_id"] for e in started]
    assert [m["tool_call_id"] for m in tool_messages(last)] == calls
    assert [name for name, _ in model_results(events[-1]["text"])] == ["get_current_time"]


async def test_the_round_limit_forces_an_answer_without_tools(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text", tools=["get_current_time"]) as client:
        events = await turn(client, "/chain 99 get_current_time {}")
    assert types(events).count("tool.started") == 5
    assert types(events).count("response.done") == 1
    assert events[-1]["status"] == "completed"
    assert events[-1]["text"].startswith("Tool results: get_current_time=")
    assert len(fake.requests) == 6
    assert all("tool_choice" not in body for body in fake.requests[:5])
    final = fake.requests[5]
    assert final["tool_choice"] == "none"
    assert "5 rounds" in final["messages"][-1]["content"]
    assert final["messages"][-1]["role"] == "system"


async def test_the_round_limit_is_configurable(
    fake: FakeChatServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await chat_gateway(gateway_factory, fake, chat_max_rounds=2)
    async with gateway.session("text", tools=["get_current_time"]) as client:
        events = await turn(client, "/chain 99 get_current_time {}")
    assert types(events).count("tool.started") == 2
    assert len(fake.requests) == 3


async def test_invalid_json_arguments_are_fed_back_and_the_loop_goes_on(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text", tools=["get_current_time"]) as client:
        events = await turn(client, "/badjson get_current_time")
        after = await turn(client, "still there?")
    finished = first(events, "tool.finished")
    assert finished["ok"] is False
    assert finished["error"]["type"] == "VALIDATION"
    [(name, envelope)] = model_results(events[-1]["text"])
    assert name == "get_current_time"
    assert envelope["error"]["type"] == "VALIDATION"
    assert types(events).count("response.done") == 1
    assert after[-1]["text"] == "You said: still there?"
    # The invalid call stays in the history with its result, so the provider accepts it.
    assert tool_messages(fake.requests[-1])[0]["tool_call_id"] == finished["call_id"]


async def test_parallel_calls_run_as_one_batch_with_results_in_call_order(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    text = '/tools kb_search {"query": "visit fee"} ;; get_current_time {"timezone": "UTC"}'
    async with gateway.session("text", tools=["get_current_time", "kb_search"]) as client:
        events = await turn(client, text)
    started = [e for e in events if e["type"] == "tool.started"]
    assert [e["name"] for e in started] == ["kb_search", "get_current_time"]
    assert started[0]["arguments"] == {"query": "visit fee", "limit": 3}
    results = model_results(events[-1]["text"])
    assert [name for name, _ in results] == ["kb_search", "get_current_time"]
    assert all(envelope["ok"] for _, envelope in results)
    assert len(fake.requests) == 2
    assert [m["tool_call_id"] for m in tool_messages(fake.requests[1])] == [
        e["call_id"] for e in started
    ]


async def test_providers_without_call_ids_get_stable_ids_made_once(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    fake = await fake_factory(omit_ids=True, split_names=True)
    gateway = await chat_gateway(gateway_factory, fake)
    async with gateway.session("text", tools=["get_current_time"]) as client:
        events = await turn(client, "/tools get_current_time {} ;; get_current_time {}")
    started = [e for e in events if e["type"] == "tool.started"]
    finished = [e for e in events if e["type"] == "tool.finished"]
    ids = [e["call_id"] for e in started]
    assert len(set(ids)) == 2
    assert all(i.startswith("call_") for i in ids)
    assert [e["call_id"] for e in finished] == ids
    assert [e["name"] for e in started] == ["get_current_time"] * 2
    assert [m["tool_call_id"] for m in tool_messages(fake.requests[1])] == ids


async def test_confirmation_approved_later_starts_a_new_response(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    arguments = {
        "title": "Dentist",
        "start": "2030-01-15T10:00:00+00:00",
        "duration_minutes": 30,
    }
    async with gateway.session("text", tools=["calendar_create_event"]) as client:
        await client.send("text.send", text=f"/tool calendar_create_event {json.dumps(arguments)}")
        seen = await client.until("confirmation.requested")
        request = seen[-1]
        seen += await client.until("response.done")
        await client.send(
            "confirmation.respond", confirmation_id=request["confirmation_id"], decision="approve"
        )
        after = await client.until("response.done")
    first_done = seen[-1]
    assert first_done["status"] == "completed"
    [(_, envelope)] = model_results(first_done["text"])
    assert envelope["error"]["type"] == "CONFIRMATION_REQUIRED"
    assert first(after, "confirmation.resolved")["decision"] == "approved"
    assert after[-1]["status"] == "completed"
    late = [m for m in fake.requests[-1]["messages"] if request["call_id"] in str(m["content"])]
    assert late
    assert late[-1]["role"] == "system"
    # The model was given the result (the fake acknowledges context given without a new user
    # message) and did not call the tool again.
    assert after[-1]["text"].startswith("Noted: The result of the earlier call")
    assert '"event_id"' in after[-1]["text"]
    answer = after[types(after).index("response.started") :]
    assert "tool.started" not in types(answer)


# -- the text dialects ----------------------------------------------------------------------------


async def test_inline_markers_split_across_chunks_are_never_shown(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    fake = await fake_factory(text_chunk_chars=3)
    gateway = await chat_gateway(gateway_factory, fake)
    async with gateway.session("text", tools=["get_current_time"], tool_dialect="inline") as client:
        events = await turn(client, '/tool get_current_time {"timezone": "UTC"}')
    deltas = [e["delta"] for e in events if e["type"] == "text.delta"]
    shown = "".join(deltas)
    assert "TOOL_CALL" not in shown
    assert "[T" not in shown  # not even the marker's first characters
    assert "confidence" not in shown
    assert shown.startswith("Let me check that.")
    started = first(events, "tool.started")
    assert started["name"] == "get_current_time"
    assert started["arguments"] == {"timezone": "UTC"}
    assert first(events, "tool.finished")["ok"] is True
    assert types(events).count("response.done") == 1
    first_body, second_body = fake.requests
    assert "tools" not in first_body
    assert "[TOOL_CALL:" in first_body["messages"][0]["content"]
    results = second_body["messages"][-1]
    assert results["role"] == "user"
    assert results["content"].startswith(f"[TOOL_RESULT:{started['call_id']}:success] ")
    # The model's own message, markers included, stays in the history as it wrote it.
    assert "[TOOL_CALL:" in second_body["messages"][-2]["content"]
    assert events[-1]["text"] == shown
    assert "Tool results: get_current_time=" in shown


async def test_inline_low_confidence_blocks_the_call_and_the_model_asks(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    fake = await fake_factory()
    gateway = await chat_gateway(gateway_factory, fake)
    async with gateway.session("text", tools=["get_current_time"], tool_dialect="inline") as client:
        events = await turn(client, "/unsure get_current_time {}")
    assert "tool.started" not in types(events)
    assert gateway.decisions() == []  # nothing reached the tool runner
    result_line = fake.requests[1]["messages"][-1]["content"]
    assert ":error] " in result_line
    assert "INTENT_NOT_EXPLICIT" in result_line
    assert "0.4" in result_line
    assert "INTENT_NOT_EXPLICIT" in events[-1]["text"]


async def test_json_dialect_plans_first_then_answers(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text", tools=["get_current_time"], tool_dialect="json") as client:
        events = await turn(client, '/tool get_current_time {"timezone": "UTC"}')
        plain = await turn(client, "no tools please")
    plan_body, answer_body = fake.requests[0], fake.requests[1]
    assert plan_body["response_format"] == {"type": "json_object"}
    assert '"toolCalls"' in plan_body["messages"][0]["content"]
    assert "response_format" not in answer_body
    assert "tools" not in answer_body
    started = first(events, "tool.started")
    assert started["arguments"] == {"timezone": "UTC"}
    assert "toolCalls" not in text_of(events)  # the plan is never shown
    assert text_of(events) == events[-1]["text"]
    assert events[-1]["text"].startswith("Tool results: ")
    plan_message, results, note = answer_body["messages"][-3:]
    assert plan_message["role"] == "assistant"  # the plan, for the record
    assert results["content"].startswith(f"[TOOL_RESULT:{started['call_id']}:success] ")
    assert note["role"] == "system"
    assert "plain text" in note["content"]
    # A plan without calls goes straight to the answer: two requests, no plan in history.
    assert plain[-1]["text"] == "You said: no tools please"
    assert len(fake.requests) == 4
    last = fake.requests[3]["messages"]
    asked_at = last.index({"role": "user", "content": "no tools please"})
    assert all(m["role"] != "assistant" for m in last[asked_at:])


async def test_json_dialect_low_confidence_and_unreadable_plans(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text", tools=["get_current_time"], tool_dialect="json") as client:
        unsure = await turn(client, "/unsure get_current_time {}")
        broken = await turn(client, "/json {not json")
    assert "tool.started" not in types(unsure) + types(broken)
    assert "INTENT_NOT_EXPLICIT" in fake.requests[1]["messages"][-2]["content"]
    assert unsure[-1]["status"] == broken[-1]["status"] == "completed"
    note = fake.requests[3]["messages"][-1]
    assert note["role"] == "system"
    assert "could not be read" in note["content"]


# -- provider failures ----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500])
async def test_http_errors_are_retryable_upstream_errors_and_the_session_lives(
    fake: FakeChatServer, gateway_factory: GatewayFactory, status: int
) -> None:
    gateway = await chat_gateway(gateway_factory, fake, chat_max_retries=1)
    async with gateway.session("text") as client:
        failed = await turn(client, f"/http {status}")
        after = await turn(client, "are you back?")
    error = first(failed, "error")
    assert error["code"] == "upstream_error"
    assert error["retryable"] is True
    assert error["fatal"] is False
    assert str(status) in error["message"]
    assert failed[-1]["status"] == "failed"
    assert types(failed).count("response.done") == 1
    assert len(fake.requests) == 3  # the SDK retried once, then the next message
    assert after[-1]["text"] == "You said: are you back?"


async def test_a_transient_error_is_retried_by_the_sdk_unseen(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text") as client:
        events = await turn(client, "/http 500 1 hi")
    assert "error" not in types(events)
    assert events[-1]["status"] == "completed"
    assert len(fake.requests) == 2


async def test_a_stream_that_breaks_off_fails_the_response_not_the_session(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text") as client:
        failed = await turn(client, "/cut half a sentence")
        after = await turn(client, "again")
    error = first(failed, "error")
    assert error["code"] == "upstream_error"
    assert error["retryable"] is True
    assert failed[-1]["status"] == "failed"
    assert after[-1]["text"] == "You said: again"


async def test_a_refused_key_is_a_non_retryable_error(
    fake: FakeChatServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await chat_gateway(gateway_factory, fake, chat_api_key="sk-wrong")
    async with gateway.session("text") as client:
        failed = await turn(client, "hello")
    error = first(failed, "error")
    assert error["retryable"] is False
    assert "401" in error["message"]
    assert "sk-wrong" not in json.dumps(failed)


# -- session behaviour ----------------------------------------------------------------------------


async def test_voice_is_refused_at_start_with_a_clear_error(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.connect() as client:
        await client.send("session.start", mode="voice", event_id="s1")
        error = await client.last("error")
        started = await client.start("text")
        await client.send("session.update", mode="voice", event_id="u1")
        refused = await client.last("error")
    assert error["code"] == "forbidden"
    assert error["event_id"] == "s1"
    assert "does not support voice" in error["message"]
    assert "text" in error["message"]
    assert started["session_id"]
    assert refused["code"] == "forbidden"
    assert refused["event_id"] == "u1"
    assert fake.requests == []


async def test_cancel_ends_the_response_and_the_next_message_is_answered(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text") as client:
        await client.send("text.send", text="/slow 3000 too late")
        await fake.wait_for_requests(1)
        await client.send("response.cancel")
        cancelled = await client.until("response.done", within=2)
        after = await turn(client, "next")
    assert cancelled[-1]["status"] == "cancelled"
    assert after[-1]["text"] == "You said: next"
    assert fake.requests[-1]["messages"][-1] == {"role": "user", "content": "next"}


async def test_a_pending_message_is_injected_before_the_next_user_message(
    gateway: Gateway, fake: FakeChatServer
) -> None:
    async with gateway.session("text", tools=["remember_for_next_turn"]) as client:
        await turn(client, '/tool remember_for_next_turn {"message": "ask about dizziness"}')
        await turn(client, "hello")
    messages = fake.requests[-1]["messages"]
    assert messages[-1] == {"role": "user", "content": "hello"}
    assert messages[-2]["role"] == "system"
    assert "ask about dizziness" in messages[-2]["content"]


async def test_history_is_bounded_oldest_turns_first(
    fake: FakeChatServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await chat_gateway(gateway_factory, fake, chat_history_tokens=300)
    async with gateway.session("text", tools=[]) as client:
        for n in range(8):
            await turn(client, f"message {n} " + "x" * 200)
    contents = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "user"]
    assert contents[-1].startswith("message 7 ")
    assert not any(c.startswith("message 0 ") for c in contents)
    assert len(contents) < 8
    assert fake.requests[0]["messages"][0]["role"] == "system"
    assert all(body["messages"][0]["role"] == "system" for body in fake.requests)


async def test_usage_is_summed_over_rounds(gateway: Gateway, fake: FakeChatServer) -> None:
    async with gateway.session("text", tools=["get_current_time"]) as client:
        events = await turn(client, "/chain 2 get_current_time {}")
    assert len(fake.usages) == 3  # two tool rounds and the answer
    assert events[-1]["usage"] == {
        key: sum(u[key] for u in fake.usages)
        for key in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    assert fake.requests[0]["stream_options"] == {"include_usage": True}
