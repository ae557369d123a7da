"""The OpenAI-compatible endpoint driven by the official ``openai`` SDK, unmodified:
``AsyncOpenAI(base_url=…, api_key=<the gateway's JWT>).realtime.connect(model=…)``, on each
upstream: the embedded local model, the OpenAI Realtime fake and the Gemini Live fake (all three
answer ``/tool NAME {json}`` with that call and ``/say TEXT`` with that speech): turns, the
gateway's tools, the client's own tools (``session.tools``) answered by the client, barge-in,
refusals and the end."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, pcm_silence, pcm_tone, token
from openai import AsyncOpenAI
from websockets.exceptions import ConnectionClosedError

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

UPSTREAMS = ["local", "openai", "gemini"]
WITHIN_S = 10.0
GEMINI_VOICE = "gemini-2.5-flash-native-audio-preview-09-2025"
GEMINI_TEXT = "gemini-live-2.5-flash-preview"
MODELS = {"local": "local", "openai": "gpt-realtime", "gemini": GEMINI_VOICE}


@asynccontextmanager
async def running(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> AsyncIterator[tuple[Gateway, str, Any]]:
    """(the gateway, the model a client names, the fake or None) for one upstream."""
    if kind == "local":
        yield await gateway_factory(), MODELS[kind], None
    elif kind == "openai":
        async with FakeRealtimeServer(FakeOptions()) as fake:
            gateway = await gateway_factory(
                openai_ws_url=fake.ws_url,
                openai_api_key="sk-test",
                upstream_reconnect_attempts=1,
                upstream_reconnect_backoff_s=0.01,
            )
            yield gateway, MODELS[kind], fake
    else:
        async with FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs") as fake:
            gateway = await gateway_factory(
                gemini_base_url=fake.base_url,
                gemini_ca_file=fake.ca_file,
                gemini_api_key="test-key",
                gemini_model=GEMINI_VOICE,
                gemini_text_model=GEMINI_TEXT,
                upstream_reconnect_attempts=1,
                upstream_reconnect_backoff_s=0.01,
            )
            yield gateway, MODELS[kind], fake


@pytest.fixture(params=UPSTREAMS)
async def upstream(
    request: pytest.FixtureRequest, gateway_factory: GatewayFactory, tmp_path: Path
) -> AsyncIterator[tuple[Gateway, str, Any]]:
    async with running(request.param, gateway_factory, tmp_path) as started:
        yield started


@pytest.fixture(params=["openai", "gemini"])
async def hosted(
    request: pytest.FixtureRequest, gateway_factory: GatewayFactory, tmp_path: Path
) -> AsyncIterator[tuple[Gateway, str, Any]]:
    """The upstreams reached over a connection (the local model has none to lose)."""
    async with running(request.param, gateway_factory, tmp_path) as started:
        yield started


@asynccontextmanager
async def realtime(gateway: Gateway, model: str, **query: str) -> AsyncIterator[Any]:
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=token("sdk-user"))
    async with client.realtime.connect(model=model, extra_query=query) as connection:
        created = await connection.recv()
        assert created.type == "session.created"
        yield connection
    await client.close()


async def until(connection: Any, kind: str, within: float = WITHIN_S) -> list[Any]:
    """Every event up to and including the first of ``kind``."""
    seen: list[Any] = []
    try:
        async with asyncio.timeout(within):
            async for event in connection:
                seen.append(event)
                if event.type == kind:
                    return seen
    except TimeoutError:
        errors = [e.error for e in seen if e.type == "error"]
        raise AssertionError(
            f"no {kind} in {within} s: {[e.type for e in seen]} {errors}"
        ) from None
    raise AssertionError(f"the socket closed before {kind}: {[e.type for e in seen]}")


async def say(connection: Any, text: str) -> list[Any]:
    """A user message and a response, as an SDK client asks for one."""
    await connection.conversation.item.create(
        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )
    await connection.response.create()
    return await until(connection, "response.done")


async def text_mode(connection: Any) -> None:
    await connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
    await until(connection, "session.updated")


async def read_all(connection: Any, into: list[Any]) -> None:
    """Every event until the socket closes (the SDK raises its close)."""
    async with asyncio.timeout(WITHIN_S):
        async for event in connection:
            into.append(event)


def text_of(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


# -- turns ---------------------------------------------------------------------------------------


async def test_a_text_turn(upstream: tuple[Gateway, str, Any]) -> None:
    gateway, model, _ = upstream
    async with realtime(gateway, model) as connection:
        await text_mode(connection)
        events = await say(connection, "hello there")
    kinds = [e.type for e in events]
    assert kinds.index("response.created") < kinds.index("response.output_text.delta")
    assert text_of(events) == "You said: hello there"
    done = events[-1]
    assert done.response.status == "completed"
    assert done.response.output[0].content[0].text == "You said: hello there"


async def test_a_voice_turn(upstream: tuple[Gateway, str, Any]) -> None:
    gateway, model, _ = upstream
    async with realtime(gateway, model) as connection:
        utterance = pcm_tone(400, 24000) + pcm_silence(800, 24000)
        for start in range(0, len(utterance), 4800):  # 100 ms appends
            chunk = base64.b64encode(utterance[start : start + 4800]).decode()
            await connection.input_audio_buffer.append(audio=chunk)
        events = await until(connection, "response.done")
    kinds = [e.type for e in events]
    # Gemini Live reports no start of speech (only an interruption): the turn shows as committed.
    said = (
        "input_audio_buffer.committed"
        if model == GEMINI_VOICE
        else "input_audio_buffer.speech_started"
    )
    assert said in kinds
    audio = b"".join(
        base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta"
    )
    transcript = "".join(
        e.delta for e in events if e.type == "response.output_audio_transcript.delta"
    )
    assert transcript.startswith("You said: audio:")
    # Every upstream speaks 100 ms a word; the client gets 24 kHz PCM16, the GA format.
    assert abs(len(audio) - len(transcript.split()) * 100 * 48) <= 48 * 40
    assert events[-1].response.status == "completed"


# -- tools ---------------------------------------------------------------------------------------


async def test_a_registry_tool_runs_in_the_gateway_and_the_client_answers_nothing(
    upstream: tuple[Gateway, str, Any],
) -> None:
    gateway, model, _ = upstream
    async with realtime(gateway, model) as connection:
        await text_mode(connection)
        events = await say(connection, "/tool get_current_time {}")
        while "Tool results: get_current_time=" not in text_of(events):
            events += await until(connection, "response.done")
    # The model got the result and wrote from it; nothing asked the client to run a tool.
    assert '"ok":true' in text_of(events)
    assert not [e for e in events if e.type.startswith("response.function_call_arguments")]
    for done in (e for e in events if e.type == "response.done"):
        assert all(item.type == "message" for item in done.response.output)
    assert ("get_current_time", "executed") in gateway.decisions("get_current_time")


async def test_with_gateway_tools_shown_the_call_is_an_item_the_client_need_not_answer(
    upstream: tuple[Gateway, str, Any],
) -> None:
    gateway, model, _ = upstream
    async with realtime(gateway, model, gateway_tools="show") as connection:
        await text_mode(connection)
        events = await say(connection, "/tool get_current_time {}")
        while "Tool results:" not in text_of(events):
            events += await until(connection, "response.done")
    items = [e.item for e in events if e.type == "conversation.item.done"]
    call = next(i for i in items if i.type == "function_call")
    output = next(i for i in items if i.type == "function_call_output")
    assert call.name == "get_current_time"
    assert output.call_id == call.call_id
    assert json.loads(output.output)["ok"] is True


LOOKUP = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look an order up by its number.",
    "parameters": {
        "type": "object",
        "properties": {"order": {"type": "string"}},
        "required": ["order"],
    },
}


async def with_tools(connection: Any, *tools: dict[str, Any]) -> Any:
    """A text session offering ``tools``: the ``session.updated`` it gets."""
    await connection.session.update(
        session={"type": "realtime", "output_modalities": ["text"], "tools": list(tools)}
    )
    return (await until(connection, "session.updated"))[-1]


async def test_a_client_tool_answered_by_the_client(upstream: tuple[Gateway, str, Any]) -> None:
    gateway, model, _ = upstream
    async with realtime(gateway, model) as connection:
        updated = await with_tools(connection, LOOKUP)
        assert [tool.name for tool in updated.session.tools] == ["lookup_order"]
        events = await say(connection, '/tool lookup_order {"order": "A1"}')
        arguments = next(e for e in events if e.type == "response.function_call_arguments.done")
        call = next(
            e.item
            for e in events
            if e.type == "response.output_item.done" and e.item.type == "function_call"
        )
        assert (call.name, call.call_id) == ("lookup_order", arguments.call_id)
        assert json.loads(arguments.arguments) == {"order": "A1"}
        assert events[-1].response.output[-1].type == "function_call"
        # As a client of OpenAI answers: the output, then response.create.
        await connection.conversation.item.create(
            item={"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}
        )
        await connection.response.create()
        reply = await until(connection, "response.done")
        # One reply to the output: the next message gets the next response.
        after = await say(connection, "and then?")
    assert not [e for e in events + reply + after if e.type == "error"]
    text = text_of(reply)
    assert text.startswith("Tool results: lookup_order=")
    assert json.loads(text.split("=", 1)[1])["data"] == {"output": "shipped"}
    assert [e.type for e in after].count("response.created") == 1
    assert text_of(after) == "You said: and then?"
    assert gateway.decisions("lookup_order") == [("lookup_order", "client")]


async def test_an_output_with_no_response_create_does_not_swallow_a_later_one(
    gateway_factory: GatewayFactory,
) -> None:
    """Found in review: after an output the gateway replies by itself and drops the client's
    response.create that asks for that reply; one that never came made the next one vanish."""
    gateway = await gateway_factory()
    async with realtime(gateway, "local") as connection:
        await with_tools(connection, LOOKUP)
        await text_mode(connection)
        events = await say(connection, '/tool lookup_order {"order": "A1"}')
        call = next(e for e in events if e.type == "response.function_call_arguments.done")
        await connection.conversation.item.create(
            item={"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}
        )
        reply = await until(connection, "response.done")  # no response.create sent
        assert text_of(reply).startswith("Tool results: lookup_order=")
        # A later response.create is the client's own again: with nothing to answer, it is
        # refused as any such request (it was dropped in silence).
        await connection.response.create()
        refused = (await until(connection, "error"))[-1]
        assert refused.error.code == "unsupported"
        assert "needs a user message first" in refused.error.message


async def test_a_client_tool_named_as_a_gateway_tool_is_an_error_at_session_update(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    clash = {**LOOKUP, "name": "get_current_time"}
    async with realtime(gateway, "local") as connection:
        await connection.send(
            {
                "type": "session.update",
                "event_id": "evt_tools",
                "session": {"type": "realtime", "tools": [LOOKUP, clash]},
            }
        )
        error = (await until(connection, "error"))[-1].error
        assert (error.code, error.param, error.event_id) == (
            "invalid_value",
            "session.tools[1].name",
            "evt_tools",
        )
        assert "'get_current_time' is the name of one of the gateway's tools" in error.message
        updated = await with_tools(connection)  # the refused update changed nothing
        assert updated.session.tools == []
        assert text_of(await say(connection, "still here")) == "You said: still here"


async def test_tools_cannot_change_once_the_session_has_started(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    async with realtime(gateway, "local") as connection:
        await with_tools(connection, LOOKUP)
        await say(connection, "hello")  # the session starts with its tools
        again = await with_tools(connection, LOOKUP)  # the same tools: nothing changes
        assert [tool.name for tool in again.session.tools] == ["lookup_order"]
        other = {**LOOKUP, "name": "ring_bell"}
        await connection.session.update(session={"type": "realtime", "tools": [other]})
        error = (await until(connection, "error"))[-1].error
        assert (error.code, error.param) == ("unsupported", "session.tools")


async def test_a_client_tool_not_answered_in_time_is_an_error_and_the_model_goes_on(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(client_tool_timeout_s=0.3)
    async with realtime(gateway, "local") as connection:
        await with_tools(connection, LOOKUP)
        events = await say(connection, '/tool lookup_order {"order": "A1"}')
        call_id = next(e for e in events if e.type == "response.function_call_arguments.done")
        later = await until(connection, "response.done")
        error = next(e for e in later if e.type == "error").error
        assert error.code == "client_tool_timeout"
        assert '"TIMEOUT"' in text_of(later)  # the model was told, and said so
        await connection.conversation.item.create(
            item={"type": "function_call_output", "call_id": call_id.call_id, "output": "late"}
        )
        refused = (await until(connection, "error"))[-1].error
        assert (refused.code, refused.param) == ("invalid_tool_call_id", "item.call_id")


# -- barge-in, refusals, the end -------------------------------------------------------------------


async def test_barge_in_is_cut_and_truncated_where_the_client_stopped_playing(
    upstream: tuple[Gateway, str, Any],
) -> None:
    gateway, model, _ = upstream
    words = " ".join(f"w{n}" for n in range(40))  # 4 s of speech
    async with realtime(gateway, model) as connection:
        await connection.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"/say {words}"}],
            }
        )
        await connection.response.create()
        events = await until(connection, "response.output_audio.delta")
        first = events[-1]
        interrupting = pcm_tone(400, 24000) + pcm_silence(800, 24000)
        for start in range(0, len(interrupting), 4800):
            chunk = base64.b64encode(interrupting[start : start + 4800]).decode()
            await connection.input_audio_buffer.append(audio=chunk)
        events += await until(connection, "input_audio_buffer.speech_started")
        # The client played half of what it had received when the user spoke.
        received_ms = sum(
            len(base64.b64decode(e.delta)) // 48
            for e in events
            if e.type == "response.output_audio.delta" and e.item_id == first.item_id
        )
        played_ms = received_ms // 2
        await connection.conversation.item.truncate(
            item_id=first.item_id, content_index=0, audio_end_ms=played_ms
        )
        more = await until(connection, "conversation.item.truncated")
        assert not [e for e in more if e.type == "error"], [e for e in more if e.type == "error"]
        events += more
        cut = next(e for e in events if e.type == "response.done")
    assert cut.response.status == "cancelled"
    truncated = events[-1]
    assert (truncated.item_id, truncated.audio_end_ms) == (first.item_id, played_ms)


async def test_a_refused_event_is_an_error_event_and_the_socket_goes_on(
    upstream: tuple[Gateway, str, Any],
) -> None:
    gateway, model, _ = upstream
    async with realtime(gateway, model) as connection:
        await connection.send({"type": "no.such.event", "event_id": "evt_mine"})
        error = (await until(connection, "error"))[-1]
        assert error.error.type == "invalid_request_error"
        assert error.error.event_id == "evt_mine"
        await connection.send({"type": "input_audio_buffer.append", "audio": "%%%"})
        bad_audio = (await until(connection, "error"))[-1]
        assert bad_audio.error.param == "audio"
        await text_mode(connection)
        assert text_of(await say(connection, "after")) == "You said: after"


async def test_once_audio_flows_a_bad_append_is_refused_as_before_and_the_turn_goes_on(
    upstream: tuple[Gateway, str, Any],
) -> None:
    """Appends of a started session take the socket's hot path: it must refuse what the
    decoder refuses, with the same error, and lose nothing of the audio around it."""
    gateway, model, _ = upstream
    async with realtime(gateway, model) as connection:
        utterance = pcm_tone(400, 24000) + pcm_silence(800, 24000)
        chunks = [utterance[at : at + 4800] for at in range(0, len(utterance), 4800)]
        await connection.input_audio_buffer.append(audio=base64.b64encode(chunks[0]).decode())
        await connection.send(
            {"type": "input_audio_buffer.append", "audio": "%%%", "event_id": "evt_bad"}
        )
        bad = (await until(connection, "error"))[-1]
        assert (bad.error.param, bad.error.event_id) == ("audio", "evt_bad")
        odd = base64.b64encode(b"\x01\x02\x03").decode()
        await connection.send({"type": "input_audio_buffer.append", "audio": odd})
        assert (await until(connection, "error"))[-1].error.param == "audio"
        for chunk in chunks[1:]:
            await connection.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
        events = await until(connection, "response.done")
    transcript = "".join(
        e.delta for e in events if e.type == "response.output_audio_transcript.delta"
    )
    assert transcript.startswith("You said: audio:")
    assert events[-1].response.status == "completed"


async def test_an_upstream_that_closes_for_good_closes_the_socket(
    hosted: tuple[Gateway, str, Any],
) -> None:
    gateway, model, fake = hosted
    async with realtime(gateway, model) as connection:
        await text_mode(connection)
        await say(connection, "hello")
        await fake.stop()  # gone: the one reconnect allowed fails too
        events: list[Any] = []
        with pytest.raises(ConnectionClosedError, match="1011"):
            await read_all(connection, events)
    errors = [e for e in events if e.type == "error"]
    assert errors
    assert errors[-1].error.code == "upstream_failed"
