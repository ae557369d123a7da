"""Who ends the user's turn on ``/v1/realtime``, with the official ``openai`` SDK on each
upstream (the embedded local model, the OpenAI Realtime fake, the Gemini Live fake):

- push-to-talk (``audio.input.turn_detection: null``): the client appends, commits, then asks
  for the reply with ``response.create``; the commit only commits (OpenAI's semantics), so the
  request gets one response and no ``conversation_already_has_active_response``, and the turn
  is the whole buffer, silence included (no detector cut it);
- server VAD (the default): the server ends the turn and replies by itself, and a
  ``response.create`` while that reply runs is refused as OpenAI refuses it.

The chat upstream takes text only (``docs/protocol.md`` 10.8): it has no voice turn to end.
"""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, pcm_silence, pcm_tone
from test_realtime_compat_sdk import GEMINI_TEXT, GEMINI_VOICE, MODELS, realtime, until

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

UPSTREAMS = ["local", "openai", "gemini"]
SPEECH_MS, SILENCE_MS = 400, 800
APPEND_BYTES = 4800  # 100 ms of 24 kHz PCM16


@asynccontextmanager
async def paced(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path, pace: float
) -> AsyncIterator[tuple[Gateway, str, Any]]:
    """(the gateway, the model a client names, the fake or None), the model speaking at
    ``pace`` × real time."""
    reconnect = {"upstream_reconnect_attempts": 1, "upstream_reconnect_backoff_s": 0.01}
    if kind == "local":
        yield await gateway_factory(local_pace=pace), MODELS[kind], None
    elif kind == "openai":
        async with FakeRealtimeServer(FakeOptions(pace=pace)) as fake:
            gateway = await gateway_factory(
                openai_ws_url=fake.ws_url, openai_api_key="sk-test", **reconnect
            )
            yield gateway, MODELS[kind], fake
    else:
        options = FakeGeminiOptions(pace=pace)
        async with FakeGeminiServer(options, cert_dir=tmp_path / "certs") as fake:
            gateway = await gateway_factory(
                gemini_base_url=fake.base_url,
                gemini_ca_file=fake.ca_file,
                gemini_api_key="test-key",
                gemini_model=GEMINI_VOICE,
                gemini_text_model=GEMINI_TEXT,
                **reconnect,
            )
            yield gateway, MODELS[kind], fake


async def append(connection: Any, pcm: bytes) -> None:
    for start in range(0, len(pcm), APPEND_BYTES):
        chunk = base64.b64encode(pcm[start : start + APPEND_BYTES]).decode()
        await connection.input_audio_buffer.append(audio=chunk)


def heard_ms(events: list[Any]) -> int:
    """The utterance length the model says it heard (``You said: audio:<N>ms``)."""
    transcript = "".join(
        e.delta for e in events if e.type == "response.output_audio_transcript.delta"
    )
    found = re.fullmatch(r"You said: audio:(\d+)ms", transcript)
    assert found is not None, transcript
    return int(found.group(1))


@pytest.mark.parametrize("kind", UPSTREAMS)
async def test_push_to_talk_commit_then_response_create_is_one_reply_to_the_whole_buffer(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with (
        paced(kind, gateway_factory, tmp_path, 0.0) as (gateway, model, _),
        realtime(gateway, model) as connection,
    ):
        await connection.session.update(
            session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
        )
        updated = (await until(connection, "session.updated"))[-1]
        assert updated.session.audio.input.turn_detection is None
        # Speech, then the silence of a button still held: no detector may end the turn.
        await append(connection, pcm_tone(SPEECH_MS, 24000) + pcm_silence(SILENCE_MS, 24000))
        await connection.input_audio_buffer.commit()
        committed = await until(connection, "conversation.item.done")
        await connection.response.create()
        events = committed + await until(connection, "response.done")
    kinds = [e.type for e in events]
    assert not [e.error for e in events if e.type == "error"]
    assert "input_audio_buffer.speech_started" not in kinds  # no server VAD
    assert kinds.count("input_audio_buffer.committed") == 1
    assert kinds.count("response.created") == 1
    assert kinds.index("input_audio_buffer.committed") < kinds.index("response.created")
    assert events[-1].response.status == "completed"
    # The turn is what the client committed, its silence included (Gemini: resampled).
    assert abs(heard_ms(events) - (SPEECH_MS + SILENCE_MS)) <= 20


@pytest.mark.parametrize("kind", UPSTREAMS)
async def test_push_to_talk_takes_several_turns_each_answered_on_request(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with (
        paced(kind, gateway_factory, tmp_path, 0.0) as (gateway, model, _),
        realtime(gateway, model) as connection,
    ):
        await connection.session.update(
            session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
        )
        await until(connection, "session.updated")
        replies = []
        for speech_ms in (300, 500):
            await append(connection, pcm_tone(speech_ms, 24000) + pcm_silence(700, 24000))
            await connection.input_audio_buffer.commit()
            await until(connection, "conversation.item.done")
            await connection.response.create()
            replies.append(await until(connection, "response.done"))
    for speech_ms, events in zip((300, 500), replies, strict=True):
        assert not [e.error for e in events if e.type == "error"]
        assert [e.type for e in events].count("response.created") == 1
        assert abs(heard_ms(events) - (speech_ms + 700)) <= 20


@pytest.mark.parametrize("kind", UPSTREAMS)
async def test_server_vad_replies_by_itself_and_a_response_create_during_it_is_refused(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    # Real-time speech, so that the reply is still running when the request arrives.
    async with (
        paced(kind, gateway_factory, tmp_path, 1.0) as (gateway, model, _),
        realtime(gateway, model) as connection,
    ):
        await connection.session.update(
            session={
                "type": "realtime",
                "audio": {"input": {"turn_detection": {"type": "server_vad"}}},
            }
        )
        await until(connection, "session.updated")
        await append(connection, pcm_tone(SPEECH_MS, 24000) + pcm_silence(SILENCE_MS, 24000))
        events = await until(connection, "response.created")  # no response.create sent
        await connection.send({"type": "response.create", "event_id": "evt_again"})
        events += await until(connection, "response.done")
    refused = [e.error for e in events if e.type == "error"]
    assert [(e.code, e.event_id) for e in refused] == [
        ("conversation_already_has_active_response", "evt_again")
    ]
    kinds = [e.type for e in events]
    assert kinds.count("response.created") == 1
    assert kinds.index("input_audio_buffer.committed") < kinds.index("response.created")
    assert events[-1].response.status == "completed"
    # The detector cut the turn at the end of the speech, not of the buffer.
    assert heard_ms(events) < SPEECH_MS + SILENCE_MS - 200
