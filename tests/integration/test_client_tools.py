"""Tools the client declares and runs itself (docs/protocol.md 10.16), over real sockets: the
model calls one, the client gets ``client_tool.requested``, answers ``client_tool.output``, and
the model (the local model, the OpenAI Realtime, Gemini Live and chat-completions fakes) gets the
answer as the call's result and replies from it. Every fake answers ``/tool NAME {json}`` with
that call and replies ``Tool results: NAME=<result>`` to results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from harness import Client, Gateway, GatewayFactory, model_results, speak, token, types

from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

LOOKUP: dict[str, Any] = {
    "name": "lookup_order",
    "description": "Look an order up by its number.",
    "parameters": {
        "type": "object",
        "properties": {"order": {"type": "string"}},
        "required": ["order"],
    },
}
CALL = '/tool lookup_order {"order": "A1"}'
ANSWER = '{"status": "shipped"}'


@asynccontextmanager
async def upstream(
    kind: str,
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    gemini: FakeGeminiOptions | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[Gateway, Any]]:
    """(a gateway on that upstream, its fake or None)."""
    if kind == "local":
        yield await gateway_factory(**settings), None
    elif kind == "openai":
        async with FakeRealtimeServer(FakeOptions()) as fake:
            gateway = await gateway_factory(
                provider="openai", openai_ws_url=fake.ws_url, openai_api_key="sk-test", **settings
            )
            yield gateway, fake
    elif kind == "gemini":
        options = gemini or FakeGeminiOptions()
        async with FakeGeminiServer(options, cert_dir=tmp_path / "certs") as fake:
            gateway = await gateway_factory(
                provider="gemini",
                gemini_base_url=fake.base_url,
                gemini_ca_file=fake.ca_file,
                gemini_api_key="test-key",
                gemini_model="gemini-2.5-flash-native-audio-preview-09-2025",
                gemini_text_model="gemini-live-2.5-flash-preview",
                **settings,
            )
            yield gateway, fake
    else:
        async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as fake:
            gateway = await gateway_factory(
                provider="chat",
                chat_base_url=fake.base_url,
                chat_api_key="sk-chat",
                chat_model="fake-chat-1",
                **settings,
            )
            yield gateway, fake


async def asked(client: Client, text: str = CALL) -> list[dict[str, Any]]:
    """Send ``text``; the events up to the ``client_tool.requested`` it leads to."""
    await client.send("text.send", text=text)
    return await client.until("client_tool.requested")


async def reply(client: Client) -> dict[str, Any]:
    """The next response that said something."""
    while not (done := await client.last("response.done"))["text"]:
        pass
    return done


def declared_upstream(kind: str, fake: Any) -> list[str]:
    """The tool names the fake was told of when the session opened."""
    if kind == "openai":
        updates = fake.connections[0].received("session.update")
        return [tool["name"] for tool in updates[0]["session"]["tools"]]
    if kind == "gemini":
        setup = fake.connections[0].received("setup")[0]["setup"]
        return [d["name"] for d in setup["tools"][0]["functionDeclarations"]]
    return [tool["function"]["name"] for tool in fake.requests[0]["tools"]]


def answered_upstream(kind: str, fake: Any, call_id: str) -> dict[str, Any]:
    """The result the fake received for ``call_id`` (the envelope, as JSON)."""
    if kind == "openai":
        outputs = [
            event["item"]
            for event in fake.connections[0].received("conversation.item.create")
            if event["item"].get("type") == "function_call_output"
            and event["item"]["call_id"] == call_id
        ]
        assert len(outputs) == 1, outputs
        return dict(json.loads(outputs[0]["output"]))
    if kind == "gemini":
        responses = [
            r
            for message in fake.connections[0].received("toolResponse")
            for r in message["toolResponse"]["functionResponses"]
            if r["id"] == call_id
        ]
        assert len(responses) == 1, responses
        return dict(responses[0]["response"])
    tool_messages = {
        json.dumps(m)
        for body in fake.requests
        for m in body["messages"]
        if m["role"] == "tool" and m.get("tool_call_id") == call_id
    }
    assert len(tool_messages) == 1, tool_messages  # the same message in every later request
    return dict(json.loads(json.loads(tool_messages.pop())["content"]))


# -- a call answered by the client, on every upstream -----------------------------------------


@pytest.mark.parametrize("kind", ["local", "openai", "gemini", "chat"])
async def test_a_client_tool_answered_by_the_client(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with upstream(kind, gateway_factory, tmp_path) as (gateway, fake):
        async with gateway.session("text", client_tools=[LOOKUP]) as client:
            tool_names = [t["name"] for t in client.started["tools"]]
            assert "lookup_order" not in tool_names  # the gateway's tools only
            seen = await asked(client)
            request = seen[-1]
            assert request["name"] == "lookup_order"
            assert json.loads(request["arguments"]) == {"order": "A1"}
            assert request["response_id"] == next(
                e["response_id"] for e in seen if e["type"] == "response.started"
            )
            await client.send("client_tool.output", call_id=request["call_id"], output=ANSWER)
            done = await reply(client)
        (name, envelope), *_ = model_results(done["text"])
        assert (name, envelope["ok"], envelope["data"]) == (
            "lookup_order",
            True,
            {"output": ANSWER},
        )
        # No tool event of the gateway's own for it; one audit line, the client's.
        assert not [e for e in client.events if e["type"].startswith("tool.")]
        assert gateway.decisions("lookup_order") == [("lookup_order", "client")]
        if fake is not None:
            assert "lookup_order" in declared_upstream(kind, fake)
            assert "get_current_time" in declared_upstream(kind, fake)
            result = answered_upstream(kind, fake, request["call_id"])
            assert result["data"] == {"output": ANSWER}


async def test_the_calling_response_ends_before_the_answer_as_on_openai(gateway: Gateway) -> None:
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        seen = await asked(client)
        seen += await client.until("response.done")  # the gateway does not hold it
        assert types(seen)[-2:] == ["client_tool.requested", "response.done"]
        await client.send("client_tool.output", call_id=seen[-2]["call_id"], output="ok")
        after = await client.until("response.done")
    assert types(after)[0] == "response.started"  # the model's reply is a response of its own
    assert after[-1]["text"].startswith("Tool results: lookup_order=")


async def test_a_batch_of_the_gateways_tool_and_a_client_tool_answers_the_model_once(
    gateway: Gateway,
) -> None:
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        seen = await asked(client, '/tools get_current_time {} ;; lookup_order {"order": "B2"}')
        request = seen[-1]
        # The gateway's call runs under its policy, beside the question to the client.
        finished = await client.last("tool.finished")
        assert (finished["name"], finished["ok"]) == ("get_current_time", True)
        await client.send("client_tool.output", call_id=request["call_id"], output="in transit")
        done = await reply(client)
    results = model_results(done["text"])
    assert [name for name, _ in results] == ["get_current_time", "lookup_order"]
    assert results[1][1]["data"] == {"output": "in transit"}
    assert sorted(gateway.decisions()) == [
        ("get_current_time", "executed"),
        ("lookup_order", "client"),
    ]


async def test_an_answer_given_while_the_gateways_own_call_still_runs_is_kept(
    gateway: Gateway,
) -> None:
    """Found in review: the answer came before the batch looked for it, and was lost (the
    model got INTERNAL for the client's call)."""
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        seen = await asked(client, '/tools sleepy {"ms": 400} ;; lookup_order {"order": "C3"}')
        await client.send("client_tool.output", call_id=seen[-1]["call_id"], output="delivered")
        done = await reply(client)
    results = model_results(done["text"])
    assert [name for name, _ in results] == ["sleepy", "lookup_order"]
    assert results[1][1]["data"] == {"output": "delivered"}
    assert sorted(gateway.decisions()) == [("lookup_order", "client"), ("sleepy", "executed")]


async def test_the_answer_to_a_waiting_call_is_never_dropped_by_the_event_budget(
    gateway_factory: GatewayFactory,
) -> None:
    """Found in review: a bridge (``/v1/realtime``) cannot send an answer twice, so the budget
    must not drop it; an answer to no waiting call still spends from it."""
    gateway = await gateway_factory(client_events_per_s=0.01, client_events_burst=2)
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        request = (await asked(client))[-1]  # spends the burst's second token
        await client.send("client_tool.output", call_id="call_nobody", output="x")
        limited = await client.last("error")
        assert limited["code"] == "rate_limited"
        await client.send("client_tool.output", call_id=request["call_id"], output="kept")
        done = await reply(client)
    assert model_results(done["text"])[0][1]["data"] == {"output": "kept"}


async def test_two_calls_answered_out_of_order_reach_the_model_in_call_order(
    gateway: Gateway,
) -> None:
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        await client.send(
            "text.send", text='/tools lookup_order {"order": "A"} ;; lookup_order {"order": "B"}'
        )
        first = await client.last("client_tool.requested")
        second = await client.last("client_tool.requested")
        assert [json.loads(r["arguments"])["order"] for r in (first, second)] == ["A", "B"]
        await client.send("client_tool.output", call_id=second["call_id"], output="b")
        await client.send("client_tool.output", call_id=first["call_id"], output="a")
        done = await reply(client)
    results = model_results(done["text"])
    assert [(env["meta"]["callId"], env["data"]) for _, env in results] == [
        (first["call_id"], {"output": "a"}),
        (second["call_id"], {"output": "b"}),
    ]


async def test_on_gemini_a_call_delivered_twice_is_asked_once(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    twice = FakeGeminiOptions(duplicate_tool_calls=True)
    async with upstream("gemini", gateway_factory, tmp_path, gemini=twice) as (gateway, fake):
        async with gateway.session("text", client_tools=[LOOKUP]) as client:
            request = (await asked(client))[-1]
            await client.send("client_tool.output", call_id=request["call_id"], output="once")
            await reply(client)
        conn = fake.connections[0]
    assert len(conn.sent("toolCall")) == 2
    assert types(client.events).count("client_tool.requested") == 1
    assert len(conn.received("toolResponse")) == 1
    assert gateway.decisions("lookup_order") == [("lookup_order", "client")]


async def test_on_gemini_a_call_the_user_talks_over_is_cancelled_for_the_client(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with upstream("gemini", gateway_factory, tmp_path) as (gateway, fake):
        audio = {"input_rate": 16000, "output_rate": 16000}
        async with gateway.session("voice", audio=audio, client_tools=[LOOKUP]) as client:
            request = (await asked(client))[-1]
            await speak(client, 300)
            cancelled = await client.last("client_tool.cancelled")
            assert (cancelled["call_id"], cancelled["reason"]) == (request["call_id"], "cancelled")
            await client.send("client_tool.output", call_id=request["call_id"], output="late")
            error = await client.last("error")
            assert error["code"] == "tool_call_not_found"
            assert "was cancelled by the model" in error["message"]
        conn = fake.connections[0]
    assert not conn.received("toolResponse")  # the model gets no result for it
    assert gateway.decisions("lookup_order") == [("lookup_order", "cancelled")]


# -- answers that cannot be taken ----------------------------------------------------------------


async def test_an_unknown_or_second_answer_is_an_error_and_loses_nothing(gateway: Gateway) -> None:
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        request = (await asked(client))[-1]
        await client.send("client_tool.output", call_id="call_nope", output="x", event_id="e1")
        error = await client.last("error")
        assert (error["code"], error["event_id"], error["fatal"]) == (
            "tool_call_not_found",
            "e1",
            False,
        )
        assert "call_nope" in error["message"]
        await client.send("client_tool.output", call_id=request["call_id"], output="first")
        done = await reply(client)
        assert model_results(done["text"])[0][1]["data"] == {"output": "first"}
        await client.send("client_tool.output", call_id=request["call_id"], output="again")
        error = await client.last("error")
        assert error["code"] == "tool_call_not_found"
        assert error["message"] == f"call '{request['call_id']}' was answered already"
        assert (await client.say("still here"))[-1]["text"] == "You said: still here"


async def test_an_output_over_the_limit_is_refused_and_the_call_still_waits(
    gateway: Gateway,
) -> None:
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        request = (await asked(client))[-1]
        big = "x" * (128 * 1024 + 1)
        await client.send("client_tool.output", call_id=request["call_id"], output=big)
        error = await client.last("error")
        assert error["code"] == "invalid_event"
        assert "'output' must be at most 131072 bytes" in error["message"]
        await client.send("client_tool.output", call_id=request["call_id"], output="small")
        assert model_results((await reply(client))["text"])[0][1]["data"] == {"output": "small"}


async def test_a_call_not_answered_in_time_times_out_for_the_model_and_the_client(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(client_tool_timeout_s=0.3)
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        request = (await asked(client))[-1]
        cancelled = await client.last("client_tool.cancelled")
        assert cancelled == {
            "type": "client_tool.cancelled",
            "call_id": request["call_id"],
            "name": "lookup_order",
            "reason": "timeout",
        }
        envelope = model_results((await reply(client))["text"])[0][1]
        assert envelope["ok"] is False
        assert envelope["error"]["type"] == "TIMEOUT"
        assert envelope["error"]["partialSideEffects"] is None
        await client.send("client_tool.output", call_id=request["call_id"], output="late")
        error = await client.last("error")
        assert error["code"] == "tool_call_not_found"
        assert "was not answered within 0.3 s" in error["message"]
    assert gateway.decisions("lookup_order") == [("lookup_order", "expired")]


async def test_ending_the_session_drops_the_waiting_call(gateway: Gateway) -> None:
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        await asked(client)
        await client.send("session.end")
        ended = await client.until("session.ended")
    assert "client_tool.cancelled" not in types(ended)
    assert gateway.decisions("lookup_order") == [("lookup_order", "cancelled")]


# -- a resume ------------------------------------------------------------------------------------


async def test_a_resume_asks_again_and_the_answer_after_it_is_taken(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(resume_window_s=30)
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        (session,) = gateway.manager.sessions.values()
        assert not session.movable  # a call waiting for the client lives here: it stays
        request = (await asked(client))[-1]
        await client.ws.close()
        ws = await gateway.http.ws_connect(
            f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {token('alice')}"}
        )
        again = Client(ws)
        started = client.started
        resume = {"session_id": started["session_id"], "resume_token": started["resume_token"]}
        await again.send("session.start", mode="text", resume=resume)
        seen = await again.until("client_tool.requested")
        assert types(seen) == ["session.started", "client_tool.requested"]
        assert seen[-1] == request
        await again.send("client_tool.output", call_id=request["call_id"], output="after")
        assert model_results((await reply(again))["text"])[0][1]["data"] == {"output": "after"}
        await again.ws.close()


# -- declarations refused ------------------------------------------------------------------------


async def test_a_name_of_the_gateways_tools_is_refused_and_the_client_may_start_again(
    gateway: Gateway,
) -> None:
    async with gateway.connect() as client:
        clash = {"name": "get_current_time", "description": "mine"}
        await client.send("session.start", mode="text", client_tools=[LOOKUP, clash], event_id="s")
        error = await client.last("error")
        assert (error["code"], error["event_id"], error["fatal"]) == ("invalid_event", "s", False)
        assert error["message"].startswith(
            "session.start: 'client_tools[1].name' 'get_current_time' is the name of one of "
            "the gateway's tools"
        )
        started = await client.start("text", client_tools=[LOOKUP])
        assert started["type"] == "session.started"


async def test_a_broken_declaration_is_refused_naming_its_field(gateway: Gateway) -> None:
    async with gateway.connect() as client:
        broken = {"name": "lookup", "parameters": {"type": "object", "required": "order"}}
        await client.send("session.start", mode="text", client_tools=[broken])
        error = await client.last("error")
        assert error["code"] == "invalid_event"
        assert error["message"].startswith(
            "session.start: 'client_tools[0].parameters' is not a valid JSON Schema"
        )
        await client.send("session.start", mode="text", client_tools=[{"name": "Bad-Name"}])
        assert "'client_tools[0].name'" in (await client.last("error"))["message"]


async def test_client_tools_cannot_be_changed_by_session_update(gateway: Gateway) -> None:
    async with gateway.session("text", client_tools=[LOOKUP]) as client:
        await client.send("session.update", mode="text", client_tools=[])
        error = await client.last("error")
        assert error["code"] == "invalid_event"
        assert "'client_tools' can only be declared in session.start" in error["message"]
        await asked(client)  # the tools it started with are still there
