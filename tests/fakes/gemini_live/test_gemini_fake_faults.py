"""The Gemini Live fake's fault modes over real sockets (TLS), through the official SDK: a
refused upgrade, an HTTP error with Google's body, a turn that never answers, one that stops
after N model messages."""

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
from fault_kit import (
    AUDIO_MODEL,
    GEMINI_PATH,
    GOOGLE_ERRORS,
    TEXT_MODEL,
    Peer,
    applied_event,
    bounded,
    closed,
    settled,
)
from google import genai
from google.genai import types as genai_types
from websockets.exceptions import InvalidMessage, InvalidStatus

from fakes.faults import UpstreamFaults
from fakes.gemini_live.server import FakeGeminiServer
from transports.local.tones import silence, tone

# Gemini Live -----------------------------------------------------------------------------------

GEMINI_RATE = 16000
GEMINI_CHUNK = GEMINI_RATE * 20 // 1000 * 2  # 20 ms of PCM16


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gemini-fault-certs")


def gemini_client(server: FakeGeminiServer) -> genai.Client:
    options = genai_types.HttpOptions(
        base_url=server.base_url,
        api_version="v1beta",
        async_client_args={"ssl": server.client_ssl_context()},
    )
    return genai.Client(api_key="test-key", http_options=options)


async def gemini_sdk_connects(server: FakeGeminiServer) -> None:
    live = gemini_client(server).aio.live
    async with live.connect(model=TEXT_MODEL.removeprefix("models/")) as session:
        assert session.setup_complete is not None


@asynccontextmanager
async def gemini_peer(server: FakeGeminiServer, setup: dict[str, Any]) -> AsyncIterator[Peer]:
    url = f"wss://127.0.0.1:{server.port}{GEMINI_PATH}"
    async with websockets.connect(url, ssl=server.client_ssl_context(), max_size=None) as ws:
        peer = Peer(ws)
        await peer.send({"setup": setup})
        assert await peer.recv() == {"setupComplete": {}}
        yield peer


async def gemini_say(peer: Peer, text: str) -> None:
    turn = {"role": "user", "parts": [{"text": text}]}
    await peer.send({"clientContent": {"turns": [turn], "turnComplete": True}})


async def gemini_nothing_pending(server: FakeGeminiServer, peer: Peer) -> None:
    """The next message is a ``goAway`` sent now: nothing was queued before it."""
    await server.connections[0].go_away(60)
    assert await peer.recv() == {"goAway": {"timeLeft": "60s"}}


async def gemini_turn(peer: Peer) -> list[dict[str, Any]]:
    """Messages up to the next ``turnComplete``."""
    seen = [await peer.recv()]
    while not seen[-1].get("serverContent", {}).get("turnComplete"):
        seen.append(await peer.recv())
    return seen


def model_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [
        part["text"]
        for m in messages
        for part in m.get("serverContent", {}).get("modelTurn", {}).get("parts", ())
    ]


async def test_gemini_refuse_resets_the_upgrade_until_switched_off(cert_dir: Path) -> None:
    faults = UpstreamFaults(refuse=True)
    async with FakeGeminiServer(cert_dir=cert_dir, faults=faults) as server:
        with pytest.raises(InvalidMessage) as caught:
            await gemini_sdk_connects(server)
        assert isinstance(caught.value.__cause__, EOFError)  # after TLS, no status line
        server.faults.clear()
        await gemini_sdk_connects(server)
        assert server.faults.applied == {"refuse": 1}
        assert len(server.connections) == 1


@pytest.mark.parametrize("status", sorted(GOOGLE_ERRORS))
async def test_gemini_status_answers_the_upgrade_with_the_api_error(
    cert_dir: Path, status: int
) -> None:
    faults = UpstreamFaults(status=status)
    async with FakeGeminiServer(cert_dir=cert_dir, faults=faults) as server:
        with pytest.raises(InvalidStatus) as caught:
            await gemini_sdk_connects(server)
        assert server.connections == []
    response = caught.value.response
    assert response.status_code == status
    error = json.loads(response.body)["error"]
    assert (error["code"], error["status"]) == (status, GOOGLE_ERRORS[status])
    assert isinstance(error["message"], str)
    if status == 429:
        assert response.headers["Retry-After"] == "1"
        retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
        assert error["details"] == [retry]
    else:
        assert set(error) == {"code", "message", "status"}
        assert "Retry-After" not in response.headers


async def test_gemini_fail_next_fails_exactly_the_next_connections(cert_dir: Path) -> None:
    async with FakeGeminiServer(cert_dir=cert_dir) as server:
        server.faults.fail_next("status", 2, status=429)
        for _ in range(2):
            with pytest.raises(InvalidStatus) as caught:
                await gemini_sdk_connects(server)
            assert caught.value.response.status_code == 429
        await gemini_sdk_connects(server)
        await gemini_sdk_connects(server)
        assert server.faults.applied == {"status": 2}
        assert len(server.connections) == 2


async def test_gemini_stall_first_output_hears_the_turn_and_answers_nothing(
    cert_dir: Path,
) -> None:
    setup = {
        "model": AUDIO_MODEL,
        "generationConfig": {"responseModalities": ["AUDIO"]},
        "inputAudioTranscription": {},
        "outputAudioTranscription": {},
        "sessionResumption": {},
        "realtimeInputConfig": {"automaticActivityDetection": {"silenceDurationMs": 200}},
    }
    faults = UpstreamFaults(stall_first_output=True)
    async with FakeGeminiServer(cert_dir=cert_dir, faults=faults) as server:
        stalled = applied_event(server.faults, "stall_first")
        before = asyncio.all_tasks()
        async with gemini_peer(server, setup) as peer:
            pcm = tone(440, 300, GEMINI_RATE) + silence(300, GEMINI_RATE)
            for start in range(0, len(pcm), GEMINI_CHUNK):
                data = base64.b64encode(pcm[start : start + GEMINI_CHUNK]).decode()
                audio = {"mimeType": "audio/pcm;rate=16000", "data": data}
                await peer.send({"realtimeInput": {"audio": audio}})
            heard = await peer.recv()
            assert heard == {"serverContent": {"inputTranscription": {"text": "audio:300ms"}}}
            await bounded(stalled)
            await gemini_nothing_pending(server, peer)
            fake = server.connections[0]
            sent = [key for direction, message in fake.log if direction == "out" for key in message]
            assert sent == [
                "setupComplete",
                "serverContent",
                "goAway",
            ]
            assert fake.session.phase.value == "generating"  # the model "speaks", silently
        await closed(fake)
        await settled(before)
    assert fake.close_code == 1000
    assert server.faults.applied == {"stall_first": 1}


async def test_gemini_a_counted_stall_first_then_a_normal_turn(cert_dir: Path) -> None:
    setup = {"model": TEXT_MODEL, "generationConfig": {"responseModalities": ["TEXT"]}}
    async with FakeGeminiServer(cert_dir=cert_dir) as server:
        stalled = applied_event(server.faults, "stall_first")
        async with gemini_peer(server, setup) as peer:
            server.faults.fail_next("stall_first", 1)
            await gemini_say(peer, "/say hello there")
            await bounded(stalled)
            await gemini_nothing_pending(server, peer)
            await gemini_say(peer, "/say hello again")  # interrupts the silent turn, silently
            turn = await gemini_turn(peer)
    assert "".join(model_texts(turn)) == "hello again"
    assert turn[-2] == {"serverContent": {"generationComplete": True}}
    assert server.faults.applied == {"stall_first": 1}


async def test_gemini_stall_mid_response_sends_n_chunks_then_nothing(cert_dir: Path) -> None:
    setup = {"model": TEXT_MODEL, "generationConfig": {"responseModalities": ["TEXT"]}}
    async with FakeGeminiServer(cert_dir=cert_dir) as server:
        stalled = applied_event(server.faults, "stall_mid")
        async with gemini_peer(server, setup) as peer:
            server.faults.fail_next("stall_mid", 1, after=3)
            await gemini_say(peer, "/say one two three four five")
            cut = await peer.recv_many(3)
            await bounded(stalled)
            await gemini_nothing_pending(server, peer)
            await gemini_say(peer, "/say six seven")
            turn = await gemini_turn(peer)
    assert "".join(model_texts(cut)) == "one two three"
    assert [list(m["serverContent"]) for m in cut] == [["modelTurn"]] * 3
    assert "".join(model_texts(turn)) == "six seven"
    assert server.faults.applied == {"stall_mid": 1}
