"""The official SDK (``google-genai`` 3.4.0) against the fake Gemini Live server, over loopback TLS.

This is the proof that the fake is faithful enough: the SDK connects with its own TLS and URL
rules, parses every server message into its typed class, drives a BLOCKING tool round trip and a
NON_BLOCKING one (``behavior``, ``scheduling``), resumes the session with the handle the fake
issued, sees ``goAway`` and raises ``APIError`` on
closes, talks to a TEXT model, and is refused TEXT on a native-audio model. The frames the SDK
sent are asserted exactly, from the fake's log.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors, types
from websockets.exceptions import InvalidStatus

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from transports.local.speech import plan_speech
from transports.local.tones import silence, tone

TIMEOUT_S = 5
NATIVE_AUDIO = "gemini-2.5-flash-native-audio-preview-09-2025"
HALF_CASCADE = "gemini-live-2.5-flash-preview"
ASK = '/tool get_weather {"city":"Paris"}'
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="Get the weather for a city",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={"city": types.Schema(type=types.Type.STRING)},
        required=["city"],
    ),
)

SLOW_JOB = types.FunctionDeclaration(
    name="slow_job",
    description="A job that takes a while",
    behavior=types.Behavior.NON_BLOCKING,
    parameters=types.Schema(
        type=types.Type.OBJECT, properties={"rows": types.Schema(type=types.Type.INTEGER)}
    ),
)
ACK = "I've started slow_job; I'll tell you when it's done."


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gemini-fake-certs")


@pytest.fixture
async def server(cert_dir: Path) -> AsyncIterator[FakeGeminiServer]:
    async with FakeGeminiServer(cert_dir=cert_dir) as fake:
        yield fake


def client_of(server: FakeGeminiServer, api_key: str = "test-key") -> genai.Client:
    options = types.HttpOptions(
        base_url=server.base_url,
        api_version="v1beta",
        async_client_args={"ssl": server.client_ssl_context()},
    )
    return genai.Client(api_key=api_key, http_options=options)


def audio_config(handle: str | None = None) -> types.LiveConnectConfig:
    return types.LiveConnectConfig(
        response_modalities=[types.Modality.AUDIO],
        tools=[types.Tool(function_declarations=[WEATHER])],
        session_resumption=types.SessionResumptionConfig(handle=handle),
        input_audio_transcription=types.AudioTranscriptionConfig(),
        output_audio_transcription=types.AudioTranscriptionConfig(),
    )


def user_turn(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def one_turn(session: Any) -> list[types.LiveServerMessage]:
    """Messages up to and including the next ``turnComplete`` (the SDK's own loop)."""
    messages = []
    async with asyncio.timeout(TIMEOUT_S):
        async for message in session.receive():
            messages.append(message)
    return messages


async def next_message(session: Any) -> types.LiveServerMessage:
    async with asyncio.timeout(TIMEOUT_S), aclosing(session.receive()) as stream:
        return await anext(stream)


def speech_of(text: str) -> bytes:
    return b"".join(chunk for word in plan_speech(text, 24000) for chunk in word.chunks)


async def test_the_sdk_drives_a_tool_round_trip_then_resumes(server: FakeGeminiServer) -> None:
    client = client_of(server)
    async with client.aio.live.connect(model=NATIVE_AUDIO, config=audio_config()) as session:
        await session.send_client_content(turns=user_turn(ASK), turn_complete=True)
        messages: list[types.LiveServerMessage] = []
        async with asyncio.timeout(TIMEOUT_S):
            async for message in session.receive():
                messages.append(message)
                if message.tool_call is not None:
                    (call,) = message.tool_call.function_calls or []
                    assert (call.id, call.name, call.args) == (
                        "function-call-1",
                        "get_weather",
                        {"city": "Paris"},
                    )
                    await session.send_tool_response(
                        function_responses=[
                            types.FunctionResponse(
                                id=call.id, name=call.name, response={"output": {"temp_c": 21}}
                            )
                        ]
                    )
        update = await next_message(session)
    first = server.connections[0]
    async with asyncio.timeout(TIMEOUT_S):
        await first.closed.wait()

    answer = 'Tool results: get_weather={"temp_c":21}'
    assert messages[0].session_resumption_update is not None
    assert messages[0].session_resumption_update.resumable is False
    assert [m.tool_call is not None for m in messages].count(True) == 1
    audio = b"".join(m.data for m in messages if m.data is not None)
    assert audio == speech_of(answer)
    said = [
        m.server_content.output_transcription.text
        for m in messages
        if m.server_content is not None and m.server_content.output_transcription is not None
    ]
    assert "".join(text or "" for text in said) == answer
    contents = [m.server_content for m in messages if m.server_content is not None]
    assert [c.generation_complete for c in contents].count(True) == 1
    last = messages[-1]
    assert last.server_content is not None
    assert last.server_content.turn_complete is True
    assert last.usage_metadata is not None
    assert last.usage_metadata.response_token_count == len(audio) // 2 * 32 // 24000
    assert update.session_resumption_update is not None
    handle = update.session_resumption_update.new_handle
    assert handle
    assert update.session_resumption_update.resumable is True
    assert handle in server.handles

    # The exact frames the SDK sent, as the fake logged them (snake and camel mixed).
    declaration = {
        "description": "Get the weather for a city",
        "name": "get_weather",
        "parameters": {
            "properties": {"city": {"type": "STRING"}},
            "required": ["city"],
            "type": "OBJECT",
        },
    }
    assert [message for direction, message in first.log if direction == "in"] == [
        {
            "setup": {
                "model": f"models/{NATIVE_AUDIO}",
                "generationConfig": {"responseModalities": ["AUDIO"]},
                "tools": [{"functionDeclarations": [declaration]}],
                "sessionResumption": {},
                "inputAudioTranscription": {},
                "outputAudioTranscription": {},
            }
        },
        {
            "client_content": {
                "turns": [{"parts": [{"text": ASK}], "role": "user"}],
                "turnComplete": True,
            }
        },
        {
            "tool_response": {
                "functionResponses": [
                    {
                        "id": "function-call-1",
                        "name": "get_weather",
                        "response": {"output": {"temp_c": 21}},
                    }
                ]
            }
        },
    ]
    assert first.path == (
        "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    )
    assert first.headers["x-goog-api-key"] == "test-key"
    assert first.setup["generationConfig"] == {"responseModalities": ["AUDIO"]}
    assert first.received("toolResponse")[0]["toolResponse"]["functionResponses"][0]["id"] == (
        "function-call-1"
    )
    assert first.close_code == 1000
    assert first.resumed_from is None

    # A second connection resumes with the handle: the conversation goes on.
    async with client.aio.live.connect(model=NATIVE_AUDIO, config=audio_config(handle)) as session:
        fresh = await next_message(session)
        await session.send_client_content(
            turns=user_turn("/tool get_weather {}"), turn_complete=True
        )
        resumed_call = None
        async with asyncio.timeout(TIMEOUT_S), aclosing(session.receive()) as stream:
            async for message in stream:
                if message.tool_call is not None:
                    resumed_call = (message.tool_call.function_calls or [])[0]
                    break
    second = server.connections[1]
    assert second.resumed_from == handle
    assert second.setup["sessionResumption"] == {"handle": handle}
    assert fresh.session_resumption_update is not None
    assert fresh.session_resumption_update.new_handle not in ("", handle)
    assert resumed_call is not None
    assert resumed_call.id == "function-call-2"  # ids stay unique across the session
    assert second.history[:4] == first.history
    assert second.history[4] == {"role": "user", "parts": [{"text": "/tool get_weather {}"}]}
    assert len(server.connections) == 2


async def test_speech_in_is_heard_transcribed_and_answered(server: FakeGeminiServer) -> None:
    client = client_of(server)
    speech = tone(440.0, 300, 16000) + silence(400, 16000)
    async with client.aio.live.connect(model=NATIVE_AUDIO, config=audio_config()) as session:
        for start in range(0, len(speech), 640):  # 20 ms chunks
            blob = types.Blob(data=speech[start : start + 640], mime_type="audio/pcm;rate=16000")
            await session.send_realtime_input(audio=blob)
        messages = await one_turn(session)
    heard = [
        m.server_content.input_transcription.text
        for m in messages
        if m.server_content is not None and m.server_content.input_transcription is not None
    ]
    assert heard == ["audio:300ms"]
    audio = b"".join(m.data for m in messages if m.data is not None)
    assert audio == speech_of("You said: audio:300ms")
    sent = server.connections[0].received("realtimeInput.audio")
    assert len(sent) == len(speech) // 640
    first_chunk = sent[0]["realtimeInput"]["audio"]
    assert first_chunk["mimeType"] == "audio/pcm;rate=16000"
    assert base64.urlsafe_b64decode(first_chunk["data"]) == speech[:640]


async def test_go_away_then_the_close_raises_api_error(server: FakeGeminiServer) -> None:
    client = client_of(server)
    async with client.aio.live.connect(model=NATIVE_AUDIO, config=audio_config()) as session:
        fake = await server.wait_connections(1)
        await fake.go_away(0.2)
        message = await next_message(session)
        with pytest.raises(errors.APIError) as caught:
            await one_turn(session)
    assert message.go_away is not None
    assert message.go_away.time_left == "0.2s"
    assert caught.value.code == 1001
    assert fake.close_code == 1001


async def test_a_drop_raises_api_error_with_the_reason(server: FakeGeminiServer) -> None:
    client = client_of(server)
    async with client.aio.live.connect(model=NATIVE_AUDIO, config=audio_config()) as session:
        await session.send_client_content(turns=user_turn("/drop one two three"))
        with pytest.raises(errors.APIError) as caught:
            await one_turn(session)
    assert caught.value.code == 1011
    assert caught.value.details == "Internal error occurred"
    assert len(server.connections[0].sent("serverContent.modelTurn")) == 2


async def test_a_text_model_answers_in_text(server: FakeGeminiServer) -> None:
    client = client_of(server)
    config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
    async with client.aio.live.connect(model=HALF_CASCADE, config=config) as session:
        await session.send_client_content(turns=user_turn("hello there"))
        messages = await one_turn(session)
        await session.send_realtime_input(text="/say typed")
        typed = await one_turn(session)
    assert "".join(m.text for m in messages if m.text is not None) == "You said: hello there"
    assert [m.text for m in typed if m.text is not None] == ["typed"]
    assert all(m.data is None for m in messages)
    usage = messages[-1].usage_metadata
    assert usage is not None
    assert usage.response_tokens_details is not None
    assert usage.response_tokens_details[0].modality == types.MediaModality.TEXT
    assert server.connections[0].setup["model"] == f"models/{HALF_CASCADE}"


async def test_a_native_audio_model_refuses_text(server: FakeGeminiServer) -> None:
    client = client_of(server)
    config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
    with pytest.raises(errors.APIError) as caught:
        async with client.aio.live.connect(model=NATIVE_AUDIO, config=config):
            pass
    assert caught.value.code == 1007
    assert "does not support TEXT" in str(caught.value.details)
    assert server.connections[0].sent("setupComplete") == []


async def test_an_unknown_handle_fails_the_connect(server: FakeGeminiServer) -> None:
    client = client_of(server)
    with pytest.raises(errors.APIError) as caught:
        async with client.aio.live.connect(model=NATIVE_AUDIO, config=audio_config("nope")):
            pass
    assert (caught.value.code, caught.value.details) == (1008, "Session not found")


async def test_a_wrong_key_is_refused_at_the_handshake(cert_dir: Path) -> None:
    options = FakeGeminiOptions(api_key="right-key")
    async with FakeGeminiServer(options, cert_dir=cert_dir) as server:
        with pytest.raises(InvalidStatus) as caught:
            async with client_of(server, "wrong-key").aio.live.connect(model=NATIVE_AUDIO):
                pass
        async with client_of(server, "right-key").aio.live.connect(model=NATIVE_AUDIO) as session:
            assert session.setup_complete is not None
        assert len(server.connections) == 1
    assert caught.value.response.status_code == 401


async def test_the_sdk_drives_a_non_blocking_call_answered_when_idle(
    server: FakeGeminiServer,
) -> None:
    client = client_of(server)
    config = types.LiveConnectConfig(
        response_modalities=[types.Modality.AUDIO],
        tools=[types.Tool(function_declarations=[SLOW_JOB, WEATHER])],
        output_audio_transcription=types.AudioTranscriptionConfig(),
    )
    async with client.aio.live.connect(model=NATIVE_AUDIO, config=config) as session:
        await session.send_client_content(
            turns=user_turn('/tool slow_job {"rows":3}'), turn_complete=True
        )
        started = await one_turn(session)  # the call, then the acknowledgement: no waiting
        assert started[0].tool_call is not None
        (call,) = started[0].tool_call.function_calls or []
        await session.send_tool_response(
            function_responses=[
                types.FunctionResponse(
                    id=call.id,
                    name=call.name,
                    response={"output": {"rows_done": 3}},
                    scheduling=types.FunctionResponseScheduling.WHEN_IDLE,
                )
            ]
        )
        answered = await one_turn(session)

    def said(messages: list[types.LiveServerMessage]) -> str:
        return "".join(
            m.server_content.output_transcription.text or ""
            for m in messages
            if m.server_content is not None and m.server_content.output_transcription is not None
        )

    assert (call.id, call.name, call.args) == ("function-call-1", "slow_job", {"rows": 3})
    assert said(started) == ACK
    assert b"".join(m.data for m in started if m.data is not None) == speech_of(ACK)
    assert said(answered) == 'Tool results: slow_job={"rows_done":3}'
    fake = server.connections[0]
    assert fake.open_calls == []
    sent = [message for direction, message in fake.log if direction == "in"]
    declarations = sent[0]["setup"]["tools"][0]["functionDeclarations"]
    assert declarations[0] == {
        "description": "A job that takes a while",
        "name": "slow_job",
        "parameters": {"properties": {"rows": {"type": "INTEGER"}}, "type": "OBJECT"},
        "behavior": "NON_BLOCKING",
    }
    assert "behavior" not in declarations[1]
    assert sent[2:] == [
        {
            "tool_response": {
                "functionResponses": [
                    {
                        "scheduling": "WHEN_IDLE",
                        "id": "function-call-1",
                        "name": "slow_job",
                        "response": {"output": {"rows_done": 3}},
                    }
                ]
            }
        }
    ]


async def test_a_behavior_the_sdk_does_not_know_is_refused(server: FakeGeminiServer) -> None:
    with pytest.warns(UserWarning, match="SOMETIMES is not a valid Behavior"):
        declaration = types.FunctionDeclaration(name="odd", behavior="SOMETIMES")
    config = types.LiveConnectConfig(tools=[types.Tool(function_declarations=[declaration])])
    with pytest.raises(errors.APIError) as caught:
        async with client_of(server).aio.live.connect(model=NATIVE_AUDIO, config=config):
            pass
    assert caught.value.code == 1007
    assert caught.value.details == (
        "Invalid value at 'setup.tools[0].function_declarations[0].behavior' (Behavior), "
        "'SOMETIMES'"
    )
    (setup,) = server.connections[0].received("setup")
    assert setup["setup"]["tools"][0]["functionDeclarations"][0]["behavior"] == "SOMETIMES"
