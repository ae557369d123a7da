"""``session.tool_choice`` on ``/v1/realtime`` applied, not only shown, with the official
``openai`` SDK on each upstream (the embedded local model, the OpenAI Realtime fake, the Gemini
Live fake, chat completions through the chat fake; every model there follows ``/tool NAME
{json}`` by calling NAME, and ``tool_choice`` as its API says):

- ``none``: a prompt that would call a tool gets words, and no tool runs;
- ``required``: a prompt that calls nothing gets a call;
- a named function: the call is of that function, whatever the prompt asks;
- a change in the middle of the session applies from the next turn.

Gemini Live's setup has no ``tool_choice``: ``none`` is no function declared (its model cannot
call one it was not given), a named function is the only one declared, and ``required`` and a
named function ask for the call in the instructions (shown by the setup the fake received).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from harness import Gateway, GatewayFactory
from test_realtime_compat_sdk import LOOKUP, realtime, running, say, text_of, until

from fakes.chat.server import FakeChatOptions, FakeChatServer

UPSTREAMS = ["local", "openai", "gemini", "chat"]
NEVER_CALLED = "/tool get_current_time {}"


@asynccontextmanager
async def upstream(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> AsyncIterator[tuple[Gateway, str, Any]]:
    """(the gateway, the model a client names, the fake or None)."""
    if kind != "chat":
        async with running(kind, gateway_factory, tmp_path) as started:
            yield started
        return
    async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as fake:
        gateway = await gateway_factory(
            provider="chat",
            chat_base_url=fake.base_url,
            chat_api_key="sk-chat",
            chat_model="fake-chat-1",
        )
        yield gateway, "fake-chat-1", fake  # not gpt-/gemini-/local: the default provider


async def text_session(connection: Any, **session: Any) -> Any:
    """Text output (chat takes nothing else), the client's LOOKUP tool, and ``session``."""
    await connection.session.update(
        session={
            "type": "realtime",
            "output_modalities": ["text"],
            "tools": [LOOKUP],
            **session,
        }
    )
    return (await until(connection, "session.updated"))[-1]


def calls_in(events: list[Any]) -> list[tuple[str, str]]:
    """(name, arguments) of every call a response made: the client's own tools, and the
    gateway's (shown with ``gateway_tools=show``)."""
    client = [e for e in events if e.type == "response.function_call_arguments.done"]
    theirs = {e.call_id for e in client}
    gateway = [
        (e.item.name, e.item.arguments)
        for e in events
        if e.type == "conversation.item.done"
        and e.item.type == "function_call"
        and e.item.call_id not in theirs
    ]
    return [(e.name, e.arguments) for e in client] + gateway


def gemini_setup(fake: Any) -> tuple[list[str], str]:
    """The functions the last Gemini connection declared, and its instructions."""
    setup = fake.connections[-1].setup
    declared = [f["name"] for t in setup.get("tools") or () for f in t["functionDeclarations"]]
    instruction = "".join(p["text"] for p in setup["systemInstruction"]["parts"])
    return declared, instruction


@pytest.mark.parametrize("kind", UPSTREAMS)
async def test_tool_choice_none_calls_no_tool_for_a_prompt_that_would(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with (
        upstream(kind, gateway_factory, tmp_path) as (gateway, model, fake),
        realtime(gateway, model, gateway_tools="show") as connection,
    ):
        updated = await text_session(connection, tool_choice="none")
        assert updated.session.tool_choice == "none"
        events = await say(connection, NEVER_CALLED)
        client_call = await say(connection, '/tool lookup_order {"order": "A1"}')
    assert not [e.error for e in events + client_call if e.type == "error"]
    assert calls_in(events + client_call) == []
    assert text_of(events) == f"You said: {NEVER_CALLED}"
    assert gateway.decisions() == []
    if kind == "gemini":
        assert gemini_setup(fake)[0] == []  # nothing declared: nothing can be called


@pytest.mark.parametrize("kind", ["local", "openai", "chat"])
async def test_tool_choice_required_calls_a_tool_for_a_prompt_that_would_not(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with (
        upstream(kind, gateway_factory, tmp_path) as (gateway, model, _),
        realtime(gateway, model, gateway_tools="show") as connection,
    ):
        await text_session(connection, tool_choice="required")
        events = await say(connection, "hello")
    assert not [e.error for e in events if e.type == "error"]
    (call,) = calls_in(events)  # the first tool offered, asked with no arguments
    assert json.loads(call[1]) == {}
    assert "You said: hello" not in text_of(events)


async def answered(connection: Any, text: str) -> list[Any]:
    """A user message, the call of the client's tool it gets answered ``shipped`` as an OpenAI
    client answers (the output, then ``response.create``), and the reply to that output (on
    chat, the same response goes on)."""
    await connection.conversation.item.create(
        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )
    await connection.response.create()
    events = await until(connection, "response.function_call_arguments.done")
    await connection.conversation.item.create(
        item={"type": "function_call_output", "call_id": events[-1].call_id, "output": "shipped"}
    )
    await connection.response.create()
    while "Tool results:" not in text_of(events):
        events += await until(connection, "response.done")
    return events


@pytest.mark.parametrize("kind", ["local", "openai", "chat"])
async def test_a_named_function_is_the_call_whatever_the_prompt(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    named = {"type": "function", "name": "lookup_order"}
    async with (
        upstream(kind, gateway_factory, tmp_path) as (gateway, model, _),
        realtime(gateway, model, gateway_tools="show") as connection,
    ):
        updated = await text_session(connection, tool_choice=named)
        assert updated.session.tool_choice.name == "lookup_order"
        plain = await answered(connection, "hello")
        other = await answered(connection, NEVER_CALLED)
    assert not [e.error for e in plain + other if e.type == "error"]
    # The call was the named one; the reply to its output was not forced to call again.
    assert calls_in(plain) == [("lookup_order", "{}")]
    assert calls_in(other) == [("lookup_order", "{}")]
    assert gateway.decisions("get_current_time") == []
    assert gateway.decisions("lookup_order") == [("lookup_order", "client")] * 2


async def test_on_gemini_a_named_function_is_the_only_one_declared_and_asked_for(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    named = {"type": "function", "name": "lookup_order"}
    async with (
        upstream("gemini", gateway_factory, tmp_path) as (gateway, model, fake),
        realtime(gateway, model, gateway_tools="show") as connection,
    ):
        await text_session(connection, tool_choice=named)
        other = await say(connection, NEVER_CALLED)
        asked = await say(connection, '/tool lookup_order {"order": "A1"}')
        declared, instruction = gemini_setup(fake)
    assert declared == ["lookup_order"]
    assert instruction.endswith("Answer each user turn by calling the function lookup_order.")
    assert calls_in(other) == []  # not declared: the model cannot call it
    assert gateway.decisions("get_current_time") == []
    assert calls_in(asked) == [("lookup_order", '{"order":"A1"}')]


async def test_on_gemini_required_declares_every_tool_and_asks_for_a_call(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with (
        upstream("gemini", gateway_factory, tmp_path) as (gateway, model, fake),
        realtime(gateway, model) as connection,
    ):
        await text_session(connection, tool_choice="required")
        await say(connection, "hello")
        declared, instruction = gemini_setup(fake)
    assert {"lookup_order", "get_current_time"} <= set(declared)
    assert instruction.endswith("Answer each user turn by calling one of your functions.")


@pytest.mark.parametrize("kind", UPSTREAMS)
async def test_a_tool_choice_changed_mid_session_applies_from_the_next_turn(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with (
        upstream(kind, gateway_factory, tmp_path) as (gateway, model, _),
        realtime(gateway, model, gateway_tools="show") as connection,
    ):
        await text_session(connection)
        first = await say(connection, NEVER_CALLED)
        while "Tool results:" not in text_of(first):  # the gateway's tool, then the answer
            first += await until(connection, "response.done")
        await connection.session.update(session={"type": "realtime", "tool_choice": "none"})
        await until(connection, "session.updated")
        then = await say(connection, NEVER_CALLED)
    assert [name for name, _ in calls_in(first)] == ["get_current_time"]
    assert calls_in(then) == []
    assert text_of(then) == f"You said: {NEVER_CALLED}"
    assert gateway.decisions("get_current_time") == [("get_current_time", "executed")]


async def test_a_named_function_that_is_not_a_session_tool_is_refused_and_changes_nothing(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    async with realtime(gateway, "local") as connection:
        await connection.send(
            {
                "type": "session.update",
                "event_id": "evt_choice",
                "session": {
                    "type": "realtime",
                    "tool_choice": {"type": "function", "name": "get_current_time"},
                },
            }
        )
        error = (await until(connection, "error"))[-1].error
        assert (error.code, error.param, error.event_id) == (
            "invalid_value",
            "session.tool_choice.name",
            "evt_choice",
        )
        updated = await text_session(connection)  # the refused update changed nothing
        assert updated.session.tool_choice == "auto"
        # Clearing the tools a named function needs is refused the same way.
        await text_session(connection, tool_choice={"type": "function", "name": "lookup_order"})
        await connection.session.update(session={"type": "realtime", "tools": []})
        cleared = (await until(connection, "error"))[-1].error
        assert cleared.param == "session.tool_choice.name"


async def test_a_detector_that_would_not_answer_or_not_be_cut_is_refused(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    async with realtime(gateway, "local") as connection:
        for flag in ("create_response", "interrupt_response"):
            detector = {"type": "server_vad", flag: False}
            await connection.session.update(
                session={"type": "realtime", "audio": {"input": {"turn_detection": detector}}}
            )
            error = (await until(connection, "error"))[-1].error
            assert (error.code, error.param) == (
                "unsupported",
                f"session.audio.input.turn_detection.{flag}",
            )
            assert "set turn_detection to null" in error.message
