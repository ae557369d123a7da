"""A session on a model alias of two targets survives its first target failing: at the start
(the provider refuses), mid-session (the connection is lost and cannot be opened again) and when
the provider stalls. Real sockets, the official SDKs, the fakes; the client never reconnects.

The alias file (``GATEWAY_MODELS``) is written per test. The OpenAI fake transcribes a voice
utterance of N ms as ``audio:<N>ms``, as the Gemini fake does: what the fallback model heard is
in its transcript.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from harness import Fakes, Gateway, GatewayFactory, first, pcm_silence, pcm_tone, types

from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

GEMINI_VOICE = "gemini-2.5-flash-native-audio-preview-09-2025"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def alias_file(tmp_path: Path, *targets: dict[str, Any], name: str = "assistant") -> Path:
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"default": name, "models": {name: {"targets": list(targets)}}}))
    return path


@pytest.fixture
async def openai_fakes() -> AsyncIterator[Callable[..., Awaitable[FakeRealtimeServer]]]:
    fakes = Fakes(lambda **o: FakeRealtimeServer(FakeOptions(**o)))
    yield fakes
    await fakes.stop_all()


@pytest.fixture
async def chat_fakes() -> AsyncIterator[Callable[..., Awaitable[FakeChatServer]]]:
    fakes = Fakes(lambda **o: FakeChatServer(FakeChatOptions(**o)))
    yield fakes
    await fakes.stop_all()


async def openai_then_chat(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    chat: FakeChatServer,
    *,
    openai_url: str,
    **settings: Any,
) -> Gateway:
    models = alias_file(
        tmp_path,
        {"provider": "openai", "model": "gpt-realtime"},
        {"provider": "chat", "model": "fake-chat-1"},
    )
    return await gateway_factory(
        models=models,
        openai_ws_url=openai_url,
        openai_api_key="sk-test",
        chat_base_url=chat.base_url,
        chat_api_key="sk-chat",
        chat_model="fake-chat-1",
        upstream_reconnect_backoff_s=0.01,
        **settings,
    )


@pytest.fixture
async def nothing_listening_then_chat(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    chat_fakes: Callable[..., Awaitable[FakeChatServer]],
) -> Gateway:
    """The alias's first target is a port nobody listens on; the second, the chat fake."""
    chat = await chat_fakes()
    closed = f"ws://127.0.0.1:{_closed_port()}/v1"
    return await openai_then_chat(gateway_factory, tmp_path, chat, openai_url=closed)


async def test_a_start_on_a_refusing_provider_is_served_by_the_next_target(
    nothing_listening_then_chat: Gateway,
) -> None:
    gateway = nothing_listening_then_chat
    async with gateway.session("text", model="assistant") as client:
        assert client.started["provider"] == "chat"
        reply = await client.say("hello there")
        assert first(reply, "response.done")["text"] == "You said: hello there"
    # The refusal counted against the target that refused (its breaker), and the start on the
    # next target is a failover for the operator.
    states = await gateway.manager.parts.health.states()  # type: ignore[union-attr]
    assert states["openai/gpt-realtime"].recent_failures == 1
    labels = {"previous": "openai/gpt-realtime", "target": "chat/fake-chat-1", "reason": "connect"}
    assert gateway.metric("gateway_upstream_failovers_total", **labels) == 1


async def test_a_model_that_names_no_alias_is_refused_listing_the_aliases(
    nothing_listening_then_chat: Gateway,
) -> None:
    async with nothing_listening_then_chat.connect() as client:
        await client.send("session.start", mode="text", model="gpt-4o")
        error = await client.last("error")
        assert error["code"] == "invalid_event"
        assert error["message"] == "model: no model named 'gpt-4o'; this gateway serves 'assistant'"


async def test_a_lost_provider_moves_a_text_session_to_the_next_target_with_its_history(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    openai_fakes: Callable[..., Awaitable[FakeRealtimeServer]],
    chat_fakes: Callable[..., Awaitable[FakeChatServer]],
) -> None:
    openai, chat = await openai_fakes(), await chat_fakes()
    gateway = await openai_then_chat(gateway_factory, tmp_path, chat, openai_url=openai.ws_url)
    async with gateway.session("text", model="assistant") as client:
        assert client.started["provider"] == "openai"
        reply = await client.say("my name is Ada")
        assert first(reply, "response.done")["text"] == "You said: my name is Ada"
        await openai.stop()  # gone for good: the transparent reconnect fails too
        changed = await client.last("session.provider_changed", within=10)
        assert changed["provider"] == "chat"
        assert changed["previous"] == "openai/gpt-realtime"
        assert changed["reason"] == "lost"
        reply = await client.say("and what now")
        assert first(reply, "response.done")["text"] == "You said: and what now"
        assert "session.ended" not in types(client.events)
    # The chat model was given the conversation so far.
    request = chat.requests[-1]
    contents = [m.get("content") for m in request["messages"]]
    assert "my name is Ada" in contents
    assert "You said: my name is Ada" in contents
    assert (
        gateway.metric(
            "gateway_upstream_failovers_total",
            previous="openai/gpt-realtime",
            target="chat/fake-chat-1",
            reason="lost",
        )
        == 1
    )


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gemini-certs")


@pytest.fixture
async def gemini_fakes(cert_dir: Path) -> AsyncIterator[Callable[..., Awaitable[FakeGeminiServer]]]:
    fakes = Fakes(lambda **o: FakeGeminiServer(FakeGeminiOptions(**o), cert_dir=cert_dir))
    yield fakes
    await fakes.stop_all()


def gemini_settings(gemini: FakeGeminiServer) -> dict[str, Any]:
    return {
        "gemini_base_url": gemini.base_url,
        "gemini_ca_file": gemini.ca_file,
        "gemini_api_key": "test-key",
        "gemini_model": GEMINI_VOICE,
    }


async def openai_then_gemini(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    openai: FakeRealtimeServer,
    gemini: FakeGeminiServer,
    **settings: Any,
) -> Gateway:
    models = alias_file(
        tmp_path,
        {"provider": "openai", "model": "gpt-realtime", "voice": "marin"},
        {"provider": "gemini", "model": GEMINI_VOICE, "voice": "Puck"},
    )
    return await gateway_factory(
        models=models,
        openai_ws_url=openai.ws_url,
        openai_api_key="sk-test",
        upstream_reconnect_backoff_s=0.01,
        **gemini_settings(gemini),
        **settings,
    )


def whole(transcript: str, sent_ms: int) -> bool:
    """The fakes transcribe N ms of speech ``audio:<N>ms``: all of it was heard (a filter's tail
    may add one 10 ms frame)."""
    heard = int(transcript.removeprefix("audio:").removesuffix("ms"))
    return sent_ms <= heard <= sent_ms + 10


async def frames(client: Any, pcm: bytes, rate: int = 16000) -> None:
    step = rate * 20 // 1000 * 2
    for start in range(0, len(pcm), step):
        await client.send_raw(pcm[start : start + step])


async def test_a_voice_session_loses_its_provider_mid_utterance_and_the_next_hears_all_of_it(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    openai_fakes: Callable[..., Awaitable[FakeRealtimeServer]],
    gemini_fakes: Callable[..., Awaitable[FakeGeminiServer]],
) -> None:
    openai, gemini = await openai_fakes(), await gemini_fakes()
    gateway = await openai_then_gemini(gateway_factory, tmp_path, openai, gemini)
    audio = {"input_rate": 16000, "output_rate": 16000}
    async with gateway.session("voice", model="assistant", audio=audio) as client:
        assert client.started["provider"] == "openai"
        await frames(client, pcm_tone(300))
        conn = await openai.wait_connections(1)
        await conn.wait_for("input_audio_buffer.append", direction="in")
        await openai.stop()  # mid-utterance: the transparent reconnect fails too
        changed = await client.last("session.provider_changed", within=10)
        assert (changed["provider"], changed["reason"]) == ("gemini", "lost")
        await frames(client, pcm_tone(300) + pcm_silence(700))
        events = await client.until_reply()
    heard = first(events, "transcript.done", role="user")["text"]
    assert whole(heard, 600)  # both halves of the tone: nothing the user said was lost
    assert first(events, "response.done")["text"] == f"You said: {heard}"
    assert (
        gemini.connections[0].setup["generationConfig"]["speechConfig"]["voiceConfig"][
            "prebuiltVoiceConfig"
        ]["voiceName"]
        == "Puck"
    )


@pytest.mark.parametrize("fault", ["refuse", 429, 503, 401, 403])
async def test_each_connect_failure_sends_a_new_session_to_the_next_target(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    openai_fakes: Callable[..., Awaitable[FakeRealtimeServer]],
    chat_fakes: Callable[..., Awaitable[FakeChatServer]],
    fault: str | int,
) -> None:
    openai, chat = await openai_fakes(), await chat_fakes()
    if fault == "refuse":
        openai.faults.refuse = True
    else:
        openai.faults.status = int(fault)
    gateway = await openai_then_chat(gateway_factory, tmp_path, chat, openai_url=openai.ws_url)
    async with gateway.session("text", model="assistant") as client:
        assert client.started["provider"] == "chat"
        reply = await client.say("still here?")
        assert first(reply, "response.done")["text"] == "You said: still here?"
    kind = "refuse" if fault == "refuse" else "status"
    assert openai.faults.applied[kind] == 1  # tried once, then the next target


async def test_a_text_turn_with_no_first_output_fails_over_and_is_answered_by_the_next(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    openai_fakes: Callable[..., Awaitable[FakeRealtimeServer]],
    chat_fakes: Callable[..., Awaitable[FakeChatServer]],
) -> None:
    openai, chat = await openai_fakes(), await chat_fakes()
    gateway = await openai_then_chat(
        gateway_factory, tmp_path, chat, openai_url=openai.ws_url, first_output_text_s=0.5
    )
    async with gateway.session("text", model="assistant") as client:
        reply = await client.say("first")
        assert first(reply, "response.done")["text"] == "You said: first"
        openai.faults.stall_first_output = True
        await client.send("text.send", text="second")
        changed = await client.last("session.provider_changed", within=10)
        assert (changed["provider"], changed["reason"]) == ("chat", "stall_first_output")
        reply = await client.until_reply()
        assert first(reply, "response.done")["text"] == "You said: second"
    # The new model got the conversation and the unanswered message once, as the turn.
    messages = chat.requests[-1]["messages"]
    user_texts = [m["content"] for m in messages if m["role"] == "user"]
    assert user_texts == ["first", "second"]
    assert openai.faults.applied["stall_first"] == 1


async def test_a_voice_turn_the_provider_never_answers_is_heard_whole_by_the_next(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    openai_fakes: Callable[..., Awaitable[FakeRealtimeServer]],
    gemini_fakes: Callable[..., Awaitable[FakeGeminiServer]],
) -> None:
    openai, gemini = await openai_fakes(), await gemini_fakes()
    openai.faults.stall_first_output = True
    gateway = await openai_then_gemini(
        gateway_factory, tmp_path, openai, gemini, first_output_voice_s=0.5
    )
    audio = {"input_rate": 16000, "output_rate": 16000}
    async with gateway.session("voice", model="assistant", audio=audio) as client:
        await frames(client, pcm_tone(500) + pcm_silence(700))
        changed = await client.last("session.provider_changed", within=10)
        assert (changed["provider"], changed["reason"]) == ("gemini", "stall_first_output")
        events = await client.until_reply()
    heard = [
        e["text"] for e in client.events if e["type"] == "transcript.done" and e["role"] == "user"
    ]
    assert len(heard) == 2
    # OpenAI heard it, then said nothing; Gemini heard all of it (a resampler's tail may add a
    # VAD frame; nothing is lost).
    assert whole(heard[-1], 500)
    assert first(events, "response.done")["text"] == f"You said: {heard[-1]}"


async def test_a_reply_that_stops_mid_way_is_cut_where_it_was_heard_and_answered_again(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    openai_fakes: Callable[..., Awaitable[FakeRealtimeServer]],
    gemini_fakes: Callable[..., Awaitable[FakeGeminiServer]],
) -> None:
    openai, gemini = await openai_fakes(), await gemini_fakes()
    models = alias_file(
        tmp_path,
        {"provider": "gemini", "model": GEMINI_VOICE},
        {"provider": "openai", "model": "gpt-realtime"},
    )
    gateway = await gateway_factory(
        models=models,
        openai_ws_url=openai.ws_url,
        openai_api_key="sk-test",
        upstream_reconnect_backoff_s=0.01,
        output_gap_s=0.5,
        **gemini_settings(gemini),
    )
    gemini.faults.stall_mid_response_after = 2
    audio = {"input_rate": 16000, "output_rate": 16000}
    async with gateway.session("voice", model="assistant", audio=audio) as client:
        assert client.started["provider"] == "gemini"
        await frames(client, pcm_tone(400) + pcm_silence(700))
        changed = await client.last("session.provider_changed", within=10)
        assert (changed["provider"], changed["reason"]) == ("openai", "stall_mid_response")
        cut = [e for e in client.events if e["type"] == "response.done"]
        assert [e["status"] for e in cut] == ["interrupted"]
        events = await client.until_reply()
    said = first(events, "response.done")["text"]
    assert whole(said.removeprefix("You said: "), 400)
    conn = await openai.wait_connections(1)
    assert conn.received("input_audio_buffer.append"), "the utterance was replayed to OpenAI"


async def test_a_message_whose_reply_was_cancelled_reaches_the_next_model_as_context(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    openai_fakes: Callable[..., Awaitable[FakeRealtimeServer]],
    chat_fakes: Callable[..., Awaitable[FakeChatServer]],
) -> None:
    """Nothing was owed (the user cancelled the reply), but what the user said stays known."""
    openai, chat = await openai_fakes(), await chat_fakes()
    gateway = await openai_then_chat(gateway_factory, tmp_path, chat, openai_url=openai.ws_url)
    async with gateway.session("text", model="assistant") as client:
        openai.faults.stall_first_output = True  # the reply never comes: the user cancels it
        await client.send("text.send", text="my locker is number 42")
        await client.send("response.cancel")
        await openai.stop()
        changed = await client.last("session.provider_changed", within=10)
        assert changed["reason"] == "lost"
        reply = await client.say("which locker?")
        assert first(reply, "response.done")["text"] == "You said: which locker?"
    messages = chat.requests[-1]["messages"]
    assert any("my locker is number 42" in str(m.get("content")) for m in messages)
