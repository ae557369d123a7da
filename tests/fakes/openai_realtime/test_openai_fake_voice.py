"""The fake's audio side over real sockets: server VAD, barge-in, pacing and the echo mode.

User speech is a loud tone from ``transports/local/tones.py`` and silence, in 20 ms appends as a
client would stream it. Tests wait for events; the only clock readings check pacing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from transports.local.tones import silence, tone

TIMEOUT_S = 5
RATE = 24000
CHUNK = RATE * 20 // 1000 * 2  # 20 ms of PCM16


class Peer:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, **event: Any) -> None:
        await self.ws.send(json.dumps(event))

    async def say(self, text: str) -> None:
        content = [{"type": "input_text", "text": text}]
        item = {"type": "message", "role": "user", "content": content}
        await self.send(type="conversation.item.create", item=item)

    async def stream(self, pcm: bytes) -> None:
        for start in range(0, len(pcm), CHUNK):
            audio = base64.b64encode(pcm[start : start + CHUNK]).decode()
            await self.send(type="input_audio_buffer.append", audio=audio)

    async def recv(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            event: dict[str, Any] = json.loads(await self.ws.recv())
        return event

    async def until(self, type_: str) -> list[dict[str, Any]]:
        seen = [await self.recv()]
        while seen[-1]["type"] != type_:
            seen.append(await self.recv())
        return seen


@asynccontextmanager
async def connect(server: FakeRealtimeServer) -> AsyncIterator[Peer]:
    url = f"{server.ws_url}/realtime?model=gpt-realtime"
    async with websockets.connect(url, max_size=None) as ws:
        peer = Peer(ws)
        assert (await peer.recv())["type"] == "session.created"
        yield peer


@asynccontextmanager
async def fake_and_peer(**options: Any) -> AsyncIterator[tuple[FakeRealtimeServer, Peer]]:
    async with FakeRealtimeServer(FakeOptions(**options)) as server, connect(server) as peer:
        yield server, peer


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def words(count: int) -> str:
    return " ".join(f"word{n}" for n in range(count))


async def test_server_vad_turns_speech_into_a_transcribed_answered_turn() -> None:
    async with fake_and_peer() as (server, peer):
        await peer.send(
            type="session.update",
            session={
                "type": "realtime",
                "audio": {
                    "input": {
                        "transcription": {"model": "gpt-4o-mini-transcribe"},
                        "turn_detection": {
                            "type": "server_vad",
                            "prefix_padding_ms": 100,
                            "silence_duration_ms": 200,
                        },
                    }
                },
            },
        )
        await peer.until("session.updated")
        await peer.stream(silence(200, RATE) + tone(440, 300, RATE) + silence(300, RATE))
        events = await peer.until("response.done")
        fake = server.connections[0]
    head = events[: types(events).index("response.created")]
    assert types(head) == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
    ]
    started, stopped, committed, added = head[:4]
    item_id = started["item_id"]
    assert started["audio_start_ms"] == 100  # speech at 200 ms, minus the prefix padding
    assert stopped["audio_end_ms"] == 700  # the end of the 200 ms of silence that ended it
    assert stopped["item_id"] == committed["item_id"] == added["item"]["id"] == item_id
    assert added["item"]["content"] == [{"type": "input_audio", "transcript": None}]
    assert head[6]["transcript"] == "audio:300ms"
    assert head[6]["usage"] == {"type": "duration", "seconds": 0.3}
    answer = events[-1]["response"]["output"][0]["content"][0]["transcript"]
    assert answer == "You said: audio:300ms"
    assert fake.items[0]["content"][0]["transcript"] == "audio:300ms"


async def test_barge_in_during_a_paced_response_cancels_it() -> None:
    async with fake_and_peer(pace=1.0) as (_, peer):
        await peer.say(f"/say {words(30)}")  # 3 s of speech, sent in real time
        await peer.send(type="response.create")
        await peer.until("response.output_audio.delta")
        await peer.stream(tone(440, 100, RATE))
        events = await peer.until("rate_limits.updated")
    after = events[types(events).index("input_audio_buffer.speech_started") + 1 :]
    assert types(after) == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "rate_limits.updated",
    ]
    done = after[-2]["response"]
    assert done["status"] == "cancelled"
    assert done["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    assert done["output"][0]["status"] == "incomplete"


@pytest.mark.parametrize(
    ("options", "interrupt_response"),
    [({"ignore_interrupt": True}, True), ({}, False)],
    ids=["ignore_interrupt", "interrupt_response_false"],
)
async def test_speech_without_interrupt_lets_the_response_finish(
    options: dict[str, Any], interrupt_response: bool
) -> None:
    async with fake_and_peer(pace=0.25, **options) as (_, peer):
        detection = {"type": "server_vad", "interrupt_response": interrupt_response}
        session = {"type": "realtime", "audio": {"input": {"turn_detection": detection}}}
        await peer.send(type="session.update", session=session)
        await peer.until("session.updated")
        await peer.say(f"/say {words(12)}")  # 1.2 s of speech at a quarter of real time
        await peer.send(type="response.create")
        await peer.until("response.output_audio.delta")
        await peer.stream(tone(440, 100, RATE))
        events = await peer.until("response.done")
    speech = types(events).index("input_audio_buffer.speech_started")
    assert "response.output_audio.delta" in types(events[speech:])
    assert events[-1]["response"]["status"] == "completed"
    transcript = events[-1]["response"]["output"][0]["content"][0]["transcript"]
    assert transcript == words(12)


async def test_pace_spreads_the_audio_over_time() -> None:
    async with fake_and_peer(pace=0.5) as (_, peer):
        await peer.say("/say one two three four five")  # 500 ms of audio
        await peer.send(type="response.create")
        await peer.until("response.output_audio.delta")
        first = time.monotonic()
        events = await peer.until("response.done")
        paced = time.monotonic() - first
    assert types(events).count("response.output_audio.delta") == 24
    assert paced >= 0.22  # 24 more chunks of 20 ms at half of real time: 240 ms
    async with fake_and_peer(pace=0.0) as (_, peer):
        await peer.say("/say one two three four five")
        await peer.send(type="response.create")
        started = time.monotonic()
        await peer.until("response.done")
        unpaced = time.monotonic() - started
    assert unpaced < paced


async def test_echo_answers_every_append_with_the_same_audio() -> None:
    async with fake_and_peer(echo=True, log_frames=False) as (server, peer):
        appends = [base64.b64encode(os.urandom(960)).decode() for _ in range(40)]
        appends.append(base64.b64encode(tone(440, 20, RATE)).decode())  # loud: still no VAD
        for audio in appends:
            await peer.send(type="input_audio_buffer.append", audio=audio)
        received = [await peer.recv() for _ in range(4 + len(appends))]
        await peer.say("hello")  # text turns still work
        await peer.send(type="response.create")
        text_turn = await peer.until("response.done")
        fake = server.connections[0]
    assert types(received[:4]) == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ]
    deltas = received[4:]
    assert types(deltas) == ["response.output_audio.delta"] * len(appends)
    assert [d["delta"] for d in deltas] == appends
    response_id = received[0]["response"]["id"]
    assert {(d["response_id"], d["item_id"]) for d in deltas} == {
        (response_id, received[1]["item"]["id"])
    }
    assert text_turn[-1]["response"]["status"] == "completed"
    assert text_turn[-1]["response"]["id"] != response_id
    assert fake.log == []
    with pytest.raises(RuntimeError):
        await fake.wait_for("response.done")
