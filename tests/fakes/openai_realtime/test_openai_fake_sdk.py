"""The official SDK (``openai`` 3.54, GA path) against the fake, over a real loopback socket.

This is the proof that the fake is faithful enough: the SDK parses every event into its typed
class, a tool round trip works, a bad key is an HTTP 401, a 1011 drop raises, and both ways of
pointing the SDK at a local server (``websocket_base_url`` and ``base_url``) reach it.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from openai import AsyncOpenAI
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime import (
    RateLimitsUpdatedEvent,
    RealtimeServerEvent,
    ResponseAudioDeltaEvent,
    ResponseAudioTranscriptDeltaEvent,
    ResponseCreatedEvent,
    ResponseDoneEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    SessionCreatedEvent,
    SessionUpdatedEvent,
)
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from transports.local.speech import plan_speech

TIMEOUT_S = 5
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
SESSION = {
    "type": "realtime",
    "instructions": "Be brief.",
    "output_modalities": ["audio"],
    "audio": {
        "input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 500},
        },
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"},
    },
    "tools": [WEATHER_TOOL],
    "tool_choice": "auto",
}
ASK = '/tool get_weather {"city":"Paris"}'


@pytest.fixture
async def server() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer() as fake:
        yield fake


@asynccontextmanager
async def sdk_connection(
    model: str = "gpt-realtime", **client_options: Any
) -> AsyncIterator[AsyncRealtimeConnection]:
    """A GA connection of the official client; the client is closed afterwards."""
    async with (
        AsyncOpenAI(**client_options) as client,
        client.realtime.connect(model=model) as conn,
    ):
        yield conn


async def read_until_closed(conn: AsyncRealtimeConnection, seen: list[str]) -> None:
    async with asyncio.timeout(TIMEOUT_S):
        async for event in conn:
            seen.append(event.type)


async def until_done(conn: AsyncRealtimeConnection) -> list[RealtimeServerEvent]:
    """Typed events up to and including the next ``response.done``."""
    events: list[RealtimeServerEvent] = []
    async with asyncio.timeout(TIMEOUT_S):
        async for event in conn:
            events.append(event)
            if isinstance(event, ResponseDoneEvent):
                return events
    raise AssertionError(f"the connection ended before response.done: {events}")


async def test_the_sdk_drives_a_tool_round_trip(server: FakeRealtimeServer) -> None:
    user: Any = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": ASK}],
    }
    async with sdk_connection(api_key="sk-test", websocket_base_url=server.ws_url) as conn:
        await conn.session.update(session=SESSION)  # type: ignore[arg-type]
        await conn.conversation.item.create(item=user)
        await conn.response.create()
        first = await until_done(conn)
        (args,) = [e for e in first if isinstance(e, ResponseFunctionCallArgumentsDoneEvent)]
        output = json.dumps({"temp_c": 21, "sky": "clear"})
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": args.call_id, "output": output}
        )
        await conn.response.create()
        second = await until_done(conn)
        rate_limits = await anext(aiter(conn))
    fake = server.connections[0]
    async with asyncio.timeout(TIMEOUT_S):
        await fake.closed.wait()

    created, updated = first[0], first[1]
    assert isinstance(created, SessionCreatedEvent)
    assert created.session.model == "gpt-realtime"
    assert created.session.id.startswith("sess_")
    assert isinstance(updated, SessionUpdatedEvent)
    assert updated.session.instructions == "Be brief."
    assert [tool.name for tool in updated.session.tools or []] == ["get_weather"]
    assert any(isinstance(e, ResponseCreatedEvent) for e in first)
    assert (args.name, args.call_id, args.arguments) == (
        "get_weather",
        "call_1",
        '{"city":"Paris"}',
    )
    done = first[-1]
    assert isinstance(done, ResponseDoneEvent)
    assert done.response.status == "completed"
    assert done.response.output is not None
    assert done.response.output[0].type == "function_call"

    answer = 'Tool results: get_weather={"sky":"clear","temp_c":21}'
    audio = [e for e in second if isinstance(e, ResponseAudioDeltaEvent)]
    words = [e for e in second if isinstance(e, ResponseAudioTranscriptDeltaEvent)]
    assert "".join(w.delta for w in words) == answer
    assert b"".join(base64.b64decode(a.delta) for a in audio) == b"".join(
        chunk for word in plan_speech(answer, 24000) for chunk in word.chunks
    )
    assert {a.response_id for a in audio} == {second[-1].response.id}  # type: ignore[union-attr]
    last = second[-1]
    assert isinstance(last, ResponseDoneEvent)
    assert last.response.status == "completed"
    assert last.response.usage is not None
    assert last.response.usage.total_tokens
    assert isinstance(rate_limits, RateLimitsUpdatedEvent)

    # The exact frames the SDK sent, as the fake logged them.
    assert [event for direction, event in fake.log if direction == "in"] == [
        {"type": "session.update", "session": SESSION},
        {"type": "conversation.item.create", "item": user},
        {"type": "response.create"},
        {
            "type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": "call_1", "output": output},
        },
        {"type": "response.create"},
    ]
    assert fake.model == "gpt-realtime"
    assert fake.headers["Authorization"] == "Bearer sk-test"
    assert "OpenAI-Beta" not in fake.headers
    assert fake.session["audio"]["output"]["voice"] == "marin"
    assert [item["type"] for item in fake.items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert fake.close_code == 1000


async def test_a_wrong_key_is_an_http_401() -> None:
    async with FakeRealtimeServer(FakeOptions(api_key="sk-right")) as server:
        with pytest.raises(InvalidStatus) as caught:
            async with sdk_connection(api_key="sk-wrong", websocket_base_url=server.ws_url):
                pass
        async with sdk_connection(api_key="sk-right", websocket_base_url=server.ws_url) as conn:
            assert isinstance(await anext(aiter(conn)), SessionCreatedEvent)
        assert len(server.connections) == 1  # the rejected upgrade was never a connection
    response = caught.value.response
    assert response.status_code == 401
    body: dict[str, Any] = json.loads(response.body)
    assert body["error"]["code"] == "invalid_api_key"
    assert body["error"]["type"] == "invalid_request_error"


async def test_a_1011_drop_raises_in_the_sdk_loop(server: FakeRealtimeServer) -> None:
    text = {"type": "input_text", "text": "/drop Hello there friend"}
    seen: list[str] = []
    async with sdk_connection(api_key="sk-test", websocket_base_url=server.ws_url) as conn:
        await conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [text]}  # type: ignore[list-item]
        )
        await conn.response.create()
        with pytest.raises(ConnectionClosedError) as caught:
            await read_until_closed(conn, seen)
    assert caught.value.rcvd is not None
    assert caught.value.rcvd.code == 1011
    assert seen.count("response.output_audio.delta") == 2
    assert "response.done" not in seen
    assert server.connections[0].close_code == 1011


async def test_a_server_drop_mid_session_raises_too(server: FakeRealtimeServer) -> None:
    seen: list[str] = []
    async with sdk_connection(api_key="sk-test", websocket_base_url=server.ws_url) as conn:
        assert isinstance(await anext(aiter(conn)), SessionCreatedEvent)
        fake = await server.wait_connections(1)
        await fake.drop(1011, "boom")
        with pytest.raises(ConnectionClosedError) as caught:
            await read_until_closed(conn, seen)
    assert caught.value.rcvd is not None
    assert (caught.value.rcvd.code, caught.value.rcvd.reason) == (1011, "boom")
    assert seen == []
    assert fake.close_code == 1011


async def test_the_base_url_form_reaches_the_fake(server: FakeRealtimeServer) -> None:
    base_url = f"http://127.0.0.1:{server.port}/v1"
    async with sdk_connection("gpt-realtime-mini", api_key="sk-test", base_url=base_url) as conn:
        created = await anext(aiter(conn))
    assert isinstance(created, SessionCreatedEvent)
    assert created.session.model == "gpt-realtime-mini"
    fake = server.connections[0]
    assert fake.model == "gpt-realtime-mini"
    assert fake.headers["User-Agent"].startswith("AsyncOpenAI/Python")
