"""The fake Gemini Live server's audio side over real sockets: server VAD, barge-in by speech,
NO_INTERRUPTION, manual activity, audioStreamEnd, pacing and the echo mode.

User speech is a loud tone from ``transports/local/tones.py`` and silence, 16 kHz PCM in 20 ms
``realtimeInput.audio`` messages as a client would stream it. Tests wait for messages; the only
clock readings check pacing.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from transports.local.tones import silence, tone

TIMEOUT_S = 5
RATE = 16000
CHUNK = RATE * 20 // 1000 * 2  # 20 ms of PCM16
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
MIME = "audio/pcm;rate=16000"


def setup_of(**realtime: Any) -> dict[str, Any]:
    detection = realtime.pop("detection", {"silenceDurationMs": 200})
    return {
        "model": "models/gemini-2.5-flash-native-audio-preview-12-2025",
        "generationConfig": {"responseModalities": ["AUDIO"]},
        "inputAudioTranscription": {},
        "outputAudioTranscription": {},
        "realtimeInputConfig": {"automaticActivityDetection": detection, **realtime},
    }


class Peer:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def say(self, text: str) -> None:
        turn = {"role": "user", "parts": [{"text": text}]}
        await self.send({"clientContent": {"turns": [turn], "turnComplete": True}})

    async def stream(self, pcm: bytes) -> None:
        for start in range(0, len(pcm), CHUNK):
            data = base64.b64encode(pcm[start : start + CHUNK]).decode()
            await self.send({"realtimeInput": {"audio": {"mimeType": MIME, "data": data}}})

    async def recv(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            message: dict[str, Any] = json.loads(await self.ws.recv())
        return message

    async def until(self, key: str) -> list[dict[str, Any]]:
        seen = [await self.recv()]
        while not has(seen[-1], key):
            seen.append(await self.recv())
        return seen


def has(message: dict[str, Any], key: str) -> bool:
    top, _, sub = key.partition(".")
    value = message.get(top)
    return value is not None if not sub else isinstance(value, dict) and sub in value


def content_keys(messages: list[dict[str, Any]]) -> list[str]:
    return ["+".join(m["serverContent"]) for m in messages if "serverContent" in m]


def transcript(messages: list[dict[str, Any]], kind: str = "outputTranscription") -> str:
    return "".join(
        m["serverContent"][kind]["text"] for m in messages if kind in m.get("serverContent", {})
    )


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gemini-fake-certs")


@asynccontextmanager
async def session(
    cert_dir: Path, setup: dict[str, Any], **options: Any
) -> AsyncIterator[tuple[FakeGeminiServer, Peer]]:
    async with FakeGeminiServer(FakeGeminiOptions(**options), cert_dir=cert_dir) as server:
        url = f"wss://127.0.0.1:{server.port}{PATH}"
        async with websockets.connect(url, ssl=server.client_ssl_context(), max_size=None) as ws:
            peer = Peer(ws)
            await peer.send({"setup": setup})
            assert await peer.recv() == {"setupComplete": {}}
            yield server, peer


def speech(ms: int, then_silence_ms: int = 300) -> bytes:
    return tone(440.0, ms, RATE) + silence(then_silence_ms, RATE)


async def test_an_utterance_is_transcribed_and_answered(cert_dir: Path) -> None:
    async with session(cert_dir, setup_of()) as (server, peer):
        await peer.stream(speech(400))
        turn = await peer.until("serverContent.turnComplete")
        fake = server.connections[0]
    assert turn[0] == {"serverContent": {"inputTranscription": {"text": "audio:400ms"}}}
    assert transcript(turn) == "You said: audio:400ms"
    assert content_keys(turn)[-2:] == ["generationComplete", "turnComplete"]
    prompt = turn[-1]["usageMetadata"]["promptTokensDetails"]
    # The turn starts when 200 ms of silence end the utterance: 600 ms heard so far.
    assert {"modality": "AUDIO", "tokenCount": 600 * 32 // 1000} in prompt
    assert fake.history == [
        {"role": "user", "parts": [{"text": "audio:400ms"}]},
        {"role": "model", "parts": [{"text": "You said: audio:400ms"}]},
    ]


async def test_speech_interrupts_a_paced_reply(cert_dir: Path) -> None:
    long_text = " ".join(f"word{n}" for n in range(30))  # 3 s of audio, real time
    async with session(cert_dir, setup_of(), pace=1.0) as (server, peer):
        await peer.say(f"/say {long_text}")
        started = await peer.until("serverContent.modelTurn")
        await peer.stream(speech(200))
        cut = await peer.until("serverContent.turnComplete")
        reply = await peer.until("serverContent.turnComplete")
        fake = server.connections[0]
        interrupted = await fake.wait_for("serverContent.interrupted")
    keys = content_keys(cut)
    assert keys[-2:] == ["interrupted", "turnComplete"]
    assert "generationComplete" not in keys
    assert interrupted == {"serverContent": {"interrupted": True}}
    assert reply[0] == {"serverContent": {"inputTranscription": {"text": "audio:200ms"}}}
    assert transcript(reply) == "You said: audio:200ms"
    said = transcript(started + cut)
    assert said
    assert long_text.startswith(said)
    assert len(said) < len(long_text)  # cut short
    assert fake.history[1] == {"role": "model", "parts": [{"text": said}]}


@pytest.mark.parametrize(
    ("setup", "options"),
    [
        (setup_of(activityHandling="NO_INTERRUPTION"), {}),
        (setup_of(), {"interrupt_on_speech": False}),
    ],
)
async def test_without_interruption_speech_waits_for_the_turn(
    cert_dir: Path, setup: dict[str, Any], options: dict[str, Any]
) -> None:
    async with session(cert_dir, setup, pace=0.5, **options) as (_, peer):
        await peer.say("/say one two three")
        first = await peer.until("serverContent.modelTurn")
        await peer.stream(speech(100))
        first += await peer.until("serverContent.turnComplete")
        second = await peer.until("serverContent.turnComplete")
    assert "interrupted" not in content_keys(first + second)
    assert transcript(first) == "one two three"
    assert transcript(first, "inputTranscription") == "audio:100ms"  # heard at once
    assert transcript(second) == "You said: audio:100ms"  # answered after


async def test_manual_activity_bounds_the_utterance(cert_dir: Path) -> None:
    setup = setup_of(detection={"disabled": True})
    async with session(cert_dir, setup) as (server, peer):
        await peer.stream(speech(200))  # outside an activity: heard, never answered
        await peer.send({"realtimeInput": {"activityStart": {}}})
        await peer.stream(silence(250, RATE))  # manual mode trusts the client, not energy
        await peer.send({"realtimeInput": {"activityEnd": {}}})
        turn = await peer.until("serverContent.turnComplete")
        fake = server.connections[0]
    assert turn[0] == {"serverContent": {"inputTranscription": {"text": "audio:250ms"}}}
    assert transcript(turn) == "You said: audio:250ms"
    assert len(fake.received("realtimeInput.audio")) == 500 // 20 + 13  # 250 ms: 12.5 chunks


async def test_manual_activity_with_automatic_detection_on(cert_dir: Path) -> None:
    async with session(cert_dir, setup_of()) as (_, peer):
        await peer.send({"realtimeInput": {"activityStart": {}}})
        with pytest.raises(ConnectionClosed) as caught:
            await peer.recv()
    assert caught.value.rcvd is not None
    assert caught.value.rcvd.code == 1007
    async with session(cert_dir, setup_of(), reject_manual_activity=False) as (server, peer):
        await peer.send({"realtimeInput": {"activityStart": {}}})
        await peer.say("/say still open")
        turn = await peer.until("serverContent.turnComplete")
        ignored = server.connections[0].ignored
    assert transcript(turn) == "still open"
    assert ignored == ["activityStart with automatic activity detection on"]


async def test_audio_stream_end_closes_the_utterance(cert_dir: Path) -> None:
    async with session(cert_dir, setup_of()) as (_, peer):
        await peer.stream(tone(440.0, 300, RATE))
        await peer.send({"realtimeInput": {"audioStreamEnd": True}})
        turn = await peer.until("serverContent.turnComplete")
    assert turn[0] == {"serverContent": {"inputTranscription": {"text": "audio:300ms"}}}


async def test_url_safe_unpadded_media_chunks_are_heard(cert_dir: Path) -> None:
    pcm = speech(300)
    async with session(cert_dir, setup_of()) as (_, peer):
        for start in range(0, len(pcm), CHUNK * 5):
            data = base64.urlsafe_b64encode(pcm[start : start + CHUNK * 5]).decode().rstrip("=")
            chunk = {"mime_type": MIME, "data": data}
            await peer.send({"realtime_input": {"media_chunks": [chunk]}})
        turn = await peer.until("serverContent.turnComplete")
    assert turn[0] == {"serverContent": {"inputTranscription": {"text": "audio:300ms"}}}


async def test_pace_spreads_audio_over_real_time(cert_dir: Path) -> None:
    loop = asyncio.get_running_loop()
    async with session(cert_dir, setup_of(), pace=0.5) as (_, peer):
        await peer.say("/say a b c d e")  # 500 ms of audio → 250 ms at pace 0.5
        first = await peer.until("serverContent.modelTurn")
        start = loop.time()
        rest = await peer.until("serverContent.generationComplete")
        elapsed = loop.time() - start
    assert len(content_keys(first + rest)) == 5 * 6 + 1  # transcript + 5 chunks per word
    assert elapsed >= 0.2


# -- echo mode ---------------------------------------------------------------------------------


async def test_echo_answers_each_audio_input_with_the_same_data(cert_dir: Path) -> None:
    pcm = speech(400)  # loud: no VAD, no barge-in, no transcription in echo mode
    sent = []
    async with session(cert_dir, setup_of(), echo=True, log_frames=False) as (server, peer):
        for n, start in enumerate(range(0, len(pcm), CHUNK)):
            piece = pcm[start : start + CHUNK]
            encode = base64.urlsafe_b64encode if n % 2 else base64.b64encode
            data = encode(piece).decode()
            sent.append(data)
            await peer.send({"realtimeInput": {"audio": {"mimeType": MIME, "data": data}}})
        echoed = [await peer.recv() for _ in sent]
        await peer.say("/say done")
        after = await peer.until("serverContent.turnComplete")
        fake = server.connections[0]
        with pytest.raises(RuntimeError):
            await fake.wait_for("setupComplete")
    assert [m["serverContent"]["modelTurn"]["parts"][0]["inlineData"]["data"] for m in echoed] == (
        sent
    )
    assert echoed[0] == {
        "serverContent": {
            "modelTurn": {
                "role": "model",
                "parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": sent[0]}}],
            }
        }
    }
    assert transcript(after) == "done"  # text still reaches the brain
    assert fake.log == []


async def test_echo_splits_what_would_not_fit_one_frame(cert_dir: Path) -> None:
    data = base64.b64encode(bytes(range(256)) * 8192).decode()  # 2 MiB of audio, 2.8 MB base64
    async with session(cert_dir, setup_of(), echo=True) as (server, peer):
        await peer.send({"realtimeInput": {"audio": {"mimeType": MIME, "data": data}}})
        frames = []
        while sum(len(f) for f in frames) < len(data):
            async with asyncio.timeout(TIMEOUT_S):
                frame = await peer.ws.recv()
            assert isinstance(frame, bytes)
            frames.append(
                json.loads(frame)["serverContent"]["modelTurn"]["parts"][0]["inlineData"]["data"]
            )
            assert len(frame) < 2**20
        fake = server.connections[0]
    assert "".join(frames) == data
    assert len(frames) == 3
    assert all(base64.b64decode(f) for f in frames)
    assert len(fake.sent("serverContent.modelTurn")) == 3
