"""``tool_choice`` on the chat upstream (``docs/protocol.md`` 10.8, 10.18), over real sockets
against the chat fake: the first completion of a message carries it as chat completions take it,
the completions after tool results are not forced to call again, and a text dialect, which
cannot force a call, refuses ``required`` and a named tool at ``session.start``."""

from __future__ import annotations

from typing import Any

import pytest
from harness import Gateway, GatewayFactory

from fakes.chat.server import FakeChatOptions, FakeChatServer


async def chat_gateway(gateway_factory: GatewayFactory, fake: FakeChatServer) -> Gateway:
    return await gateway_factory(
        provider="chat",
        chat_base_url=fake.base_url,
        chat_api_key="sk-chat",
        chat_model="fake-chat-1",
    )


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("required", "required"),
        (
            {"type": "function", "name": "get_current_time"},
            {"type": "function", "function": {"name": "get_current_time"}},
        ),
    ],
)
async def test_a_forced_call_is_asked_of_the_first_completion_only(
    gateway_factory: GatewayFactory, choice: Any, sent: Any
) -> None:
    async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as fake:
        gateway = await chat_gateway(gateway_factory, fake)
        async with gateway.session("text", tools=["get_current_time"], tool_choice=choice) as c:
            await c.send("text.send", text="hello")
            events = await c.until("response.done")
        first, after = fake.requests[0], fake.requests[1]
    assert first["tool_choice"] == sent
    assert "tool_choice" not in after  # auto: the model answers from the result
    finished = [e for e in events if e["type"] == "tool.finished"]
    assert [e["name"] for e in finished] == ["get_current_time"]
    assert events[-1]["text"].startswith("Tool results: get_current_time=")


async def test_none_is_asked_and_a_prompt_that_would_call_gets_words(
    gateway_factory: GatewayFactory,
) -> None:
    async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as fake:
        gateway = await chat_gateway(gateway_factory, fake)
        async with gateway.session("text", tool_choice="none") as client:
            await client.send("text.send", text="/tool get_current_time {}")
            events = await client.until("response.done")
        (request,) = fake.requests
    assert request["tool_choice"] == "none"
    assert "tool.started" not in [e["type"] for e in events]
    assert events[-1]["text"] == "You said: /tool get_current_time {}"


async def test_a_text_dialect_cannot_force_a_call(gateway_factory: GatewayFactory) -> None:
    async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as fake:
        gateway = await chat_gateway(gateway_factory, fake)
        async with gateway.connect() as client:
            await client.send(
                "session.start", mode="text", tool_dialect="inline", tool_choice="required"
            )
            refused = await client.last("error")
        assert fake.requests == []
    assert refused["code"] == "invalid_event"
    assert (
        "needs the model's own function calling, not the inline tool dialect"
        in (refused["message"])
    )
