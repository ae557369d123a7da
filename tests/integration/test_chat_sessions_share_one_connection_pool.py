"""Found by profiling the soak's surviving node after a restart: every chat session built its
own SDK client (a fresh SSL context, the CA bundle loaded again) and opened its own connection
to the provider, so the dozens of sessions a node takes over at once each paid for both while
the sessions it already held waited. Chat sessions now share the node's client and its
keep-alive connections: one after another, they reach the provider on one connection.

Client ↔ gateway ↔ the fake chat-completions server, over real sockets, through the SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from harness import GatewayFactory

from fakes.chat.server import FakeChatOptions, FakeChatServer


@pytest.fixture
async def fake() -> AsyncIterator[FakeChatServer]:
    async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as server:
        yield server


async def test_chat_sessions_one_after_another_reuse_one_connection(
    gateway_factory: GatewayFactory, fake: FakeChatServer
) -> None:
    gateway = await gateway_factory(
        provider="chat", chat_base_url=fake.base_url, chat_api_key="sk-chat"
    )
    for n in range(3):
        async with gateway.session("text") as client:
            assert (await client.say(f"hello {n}"))[-1]["text"] == f"You said: hello {n}"
    assert len(fake.requests) == 3
    assert len(fake.peers) == 1, fake.peers  # before: one connection per session


async def test_sessions_with_other_keys_do_not_share_a_client(
    gateway_factory: GatewayFactory, fake: FakeChatServer
) -> None:
    good = await gateway_factory(
        provider="chat", chat_base_url=fake.base_url, chat_api_key="sk-chat"
    )
    wrong = await gateway_factory(
        provider="chat", chat_base_url=fake.base_url, chat_api_key="sk-not-this-one"
    )
    async with good.session("text") as client:
        assert (await client.say("hi"))[-1]["text"] == "You said: hi"
    async with wrong.session("text") as client:
        await client.send("text.send", text="hi")
        refused = await client.last("error")
        assert refused["code"] == "upstream_error", refused  # its own key, refused
