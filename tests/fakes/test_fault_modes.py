"""The fakes' fault modes (``fakes.faults``) over real loopback sockets: what a client sees when
a fake refuses, answers an HTTP error, or stalls a response, that ``fail_next`` counts down and
the fake then serves normally, and that a stalled connection the client closes leaves nothing
running.

Tests wait for events: the fault's own ``on_applied`` hook (the moment a stall bites), and, for
the realtime fakes, a message the client asks for after the stall, which the fake's single writer
can only send after anything of the stalled response. Chat has no such message, so its tests
read for ``QUIET_S`` where they show that nothing comes; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
import websockets
from cli_kit import served
from google import genai
from google.genai import types as genai_types
from openai.types.realtime import SessionCreatedEvent
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import InvalidMessage, InvalidStatus

from fakes.chat.cli import _parse_args as chat_args
from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.faults import FaultKind, Refuse, UpstreamFaults
from fakes.gemini_live.server import FakeGeminiServer
from fakes.gemini_live.server import _parse_args as gemini_args
from fakes.openai_realtime.server import FakeRealtimeServer
from fakes.openai_realtime.server import _parse_command_line as openai_args
from fakes.shell import ConnectionShell
from transports.local.tones import silence, tone

TIMEOUT_S = 5
QUIET_S = 0.2  # chat only: how long a client reads to see that nothing more comes
GEMINI_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
TEXT_MODEL = "models/gemini-live-2.5-flash-preview"
AUDIO_MODEL = "models/gemini-2.5-flash-native-audio-preview-12-2025"
# status → (OpenAI error type, code), (Google status name)
OPENAI_ERRORS = {
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
}
GOOGLE_ERRORS = {
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
}
SDK_ERRORS: dict[int, type[openai.APIStatusError]] = {
    429: openai.RateLimitError,
    500: openai.InternalServerError,
    503: openai.InternalServerError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
}


# Shared helpers --------------------------------------------------------------------------------


def applied_event(faults: UpstreamFaults, kind: FaultKind) -> asyncio.Event:
    """Set when ``kind`` applies (``on_applied``)."""
    event = asyncio.Event()

    def seen(applied: FaultKind) -> None:
        if applied == kind:
            event.set()

    faults.on_applied = seen
    return event


async def bounded(event: asyncio.Event) -> None:
    async with asyncio.timeout(TIMEOUT_S):
        await event.wait()


async def settled(before: set[asyncio.Task[Any]]) -> None:
    """Every task started since ``before`` ends: a stalled connection leaves nothing running."""
    left = asyncio.all_tasks() - before - {asyncio.current_task()}
    if left:
        _, pending = await asyncio.wait(left, timeout=TIMEOUT_S)
        assert not pending, pending


async def closed(connection: ConnectionShell[Any, Any, Any]) -> None:
    async with asyncio.timeout(TIMEOUT_S):
        await connection.closed.wait()


class Peer:
    """A raw WebSocket client of a realtime fake: JSON in, JSON out, every read bounded."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def recv(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            message: dict[str, Any] = json.loads(await self.ws.recv())
        return message

    async def recv_many(self, count: int) -> list[dict[str, Any]]:
        return [await self.recv() for _ in range(count)]


# The pure record and the command lines ---------------------------------------------------------


def test_fail_next_counts_down_then_switches_the_mode_off() -> None:
    seen: list[FaultKind] = []
    faults = UpstreamFaults(on_applied=seen.append)
    faults.fail_next("refuse", 1)
    faults.fail_next("status", 2, status=429)
    outcomes = [faults.take_connection_fault() for _ in range(4)]
    assert outcomes == [Refuse(), 429, 429, None]  # refuse first, while both are on
    assert (faults.refuse, faults.status, faults.remaining) == (False, None, {})
    faults.fail_next("stall_mid", 1, after=2)
    assert not faults.take_stall_mid(1)  # not yet: a count is used up only by a cut
    assert faults.take_stall_mid(2)
    assert not faults.take_stall_mid(3)
    faults.stall_first_output = True  # set directly: on until switched off
    assert all([faults.take_stall_first() for _ in range(3)])
    assert faults.take_whole_answer_stall()
    faults.clear()
    assert not faults.take_stall_first()
    assert not faults.take_whole_answer_stall()
    assert faults.applied == {"refuse": 1, "status": 2, "stall_mid": 1, "stall_first": 4}
    assert seen == ["refuse", "status", "status", "stall_mid", *["stall_first"] * 4]


def test_fail_next_refuses_what_it_cannot_mean() -> None:
    faults = UpstreamFaults()
    with pytest.raises(ValueError, match="status="):
        faults.fail_next("status", 1)
    with pytest.raises(ValueError, match="status must be one of"):
        faults.fail_next("status", 1, status=418)
    with pytest.raises(ValueError, match="after="):
        faults.fail_next("stall_first", 1, after=3)
    with pytest.raises(ValueError, match=">= 0"):
        faults.fail_next("stall_mid", 1, after=-1)
    with pytest.raises(ValueError, match="count"):
        faults.fail_next("refuse", 0)
    with pytest.raises(ValueError, match="status must be one of"):
        UpstreamFaults(status=200)
    assert faults.remaining == {}
    assert not faults.applied


def test_each_command_line_takes_the_fault_flags(tmp_path: Path) -> None:
    *_, faults = openai_args(["--fault", "503", "--fault-count", "2"])
    assert (faults.status, faults.remaining) == (503, {"status": 2})
    *_, faults = gemini_args(["--cert-dir", str(tmp_path), "--fault", "stall-mid"])
    assert (faults.stall_mid_response_after, faults.remaining) == (1, {})
    *_, faults = chat_args(["--fault", "stall-mid", "--stall-after", "4", "--fault-count", "1"])
    assert (faults.stall_mid_response_after, faults.remaining) == (4, {"stall_mid": 1})
    *_, faults = chat_args(["--fault", "refuse"])
    assert faults.refuse
    *_, faults = chat_args(["--fault", "429", "--retry-after-s", "7"])
    assert (faults.status, faults.retry_after_s) == (429, 7)
    *_, faults = chat_args(["--fault", "stall-first"])
    assert faults.stall_first_output
    *_, faults = chat_args([])
    off = (faults.refuse, faults.status, faults.stall_first_output, faults.stall_mid_response_after)
    assert off == (False, None, False, None)
    for wrong in (
        ["--fault", "teapot"],
        ["--fault", "418"],
        ["--fault-count", "2"],
        ["--fault", "refuse", "--fault-count", "0"],
        ["--fault", "stall-mid", "--stall-after", "-1"],
    ):
        with pytest.raises(SystemExit):
            chat_args(wrong)


# OpenAI Realtime -------------------------------------------------------------------------------

OPENAI_RATE = 24000
OPENAI_CHUNK = OPENAI_RATE * 20 // 1000 * 2  # 20 ms of PCM16
HEARD = [  # what the fake sends for an utterance under server VAD with transcription on
    "input_audio_buffer.speech_started",
    "input_audio_buffer.speech_stopped",
    "input_audio_buffer.committed",
    "conversation.item.added",
    "conversation.item.done",
    "conversation.item.input_audio_transcription.delta",
    "conversation.item.input_audio_transcription.completed",
]


@asynccontextmanager
async def openai_sdk(server: FakeRealtimeServer) -> AsyncIterator[Any]:
    async with (
        openai.AsyncOpenAI(api_key="sk-test", websocket_base_url=server.ws_url) as client,
        client.realtime.connect(model="gpt-realtime") as conn,
    ):
        yield conn


@asynccontextmanager
async def openai_peer(server: FakeRealtimeServer) -> AsyncIterator[Peer]:
    url = f"{server.ws_url}/realtime?model=gpt-realtime"
    async with websockets.connect(url, max_size=None) as ws:
        peer = Peer(ws)
        assert (await peer.recv())["type"] == "session.created"
        yield peer


async def openai_say(peer: Peer, text: str) -> None:
    """A user text item and ``response.create``; reads the item's added / done."""
    content = [{"type": "input_text", "text": text}]
    item = {"type": "message", "role": "user", "content": content}
    await peer.send({"type": "conversation.item.create", "item": item})
    await peer.send({"type": "response.create"})
    added, done = await peer.recv_many(2)
    assert (added["type"], done["type"]) == ("conversation.item.added", "conversation.item.done")


async def openai_until(peer: Peer, type_: str) -> list[dict[str, Any]]:
    seen = [await peer.recv()]
    while seen[-1]["type"] != type_:
        seen.append(await peer.recv())
    return seen


async def openai_nothing_pending(peer: Peer) -> None:
    """The next event is the answer to a ``session.update`` sent now: nothing was queued."""
    await peer.send({"type": "session.update", "session": {"type": "realtime"}})
    assert (await peer.recv())["type"] == "session.updated"


async def test_openai_refuse_resets_the_upgrade_until_switched_off() -> None:
    async with FakeRealtimeServer(faults=UpstreamFaults(refuse=True)) as server:
        for _ in range(2):
            with pytest.raises(InvalidMessage) as caught:
                async with openai_sdk(server):
                    pass
            assert isinstance(caught.value.__cause__, EOFError)  # no status line came
        server.faults.refuse = False
        async with openai_sdk(server) as conn:
            assert isinstance(await anext(aiter(conn)), SessionCreatedEvent)
        assert server.faults.applied == {"refuse": 2}
        assert len(server.connections) == 1  # a refused upgrade never was one


@pytest.mark.parametrize("status", sorted(OPENAI_ERRORS))
async def test_openai_status_answers_the_upgrade_with_the_api_error(status: int) -> None:
    async with FakeRealtimeServer(faults=UpstreamFaults(status=status)) as server:
        with pytest.raises(InvalidStatus) as caught:
            async with openai_sdk(server):
                pass
        assert server.connections == []
    response = caught.value.response
    assert response.status_code == status
    error = json.loads(response.body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == (*OPENAI_ERRORS[status], None)
    assert response.headers.get("Retry-After") == ("1" if status == 429 else None)


async def test_openai_fail_next_fails_exactly_the_next_connections() -> None:
    async with FakeRealtimeServer() as server:
        server.faults.fail_next("refuse", 1)
        server.faults.fail_next("status", 2, status=503)
        with pytest.raises(InvalidMessage):
            async with openai_sdk(server):
                pass
        for _ in range(2):
            with pytest.raises(InvalidStatus) as caught:
                async with openai_sdk(server):
                    pass
            assert caught.value.response.status_code == 503
        for _ in range(2):
            async with openai_sdk(server) as conn:
                assert isinstance(await anext(aiter(conn)), SessionCreatedEvent)
        assert server.faults.applied == {"refuse": 1, "status": 2}
        assert (server.faults.refuse, server.faults.status) == (False, None)


async def test_openai_stall_first_output_hears_the_turn_and_answers_nothing() -> None:
    async with FakeRealtimeServer(faults=UpstreamFaults(stall_first_output=True)) as server:
        stalled = applied_event(server.faults, "stall_first")
        before = asyncio.all_tasks()
        async with openai_peer(server) as peer:
            vad = {"type": "server_vad", "silence_duration_ms": 200}
            audio_input = {"transcription": {"model": "whisper-1"}, "turn_detection": vad}
            session = {"type": "realtime", "audio": {"input": audio_input}}
            await peer.send({"type": "session.update", "session": session})
            assert (await peer.recv())["type"] == "session.updated"
            pcm = silence(200, OPENAI_RATE) + tone(440, 300, OPENAI_RATE)
            pcm += silence(300, OPENAI_RATE)
            for start in range(0, len(pcm), OPENAI_CHUNK):
                audio = base64.b64encode(pcm[start : start + OPENAI_CHUNK]).decode()
                await peer.send({"type": "input_audio_buffer.append", "audio": audio})
            heard = await peer.recv_many(len(HEARD))
            assert [event["type"] for event in heard] == HEARD
            assert heard[-1]["transcript"] == "audio:300ms"
            await bounded(stalled)  # the VAD started a response: it says nothing
            await openai_nothing_pending(peer)
            await peer.send({"type": "response.create"})  # the model is still "busy"
            error = (await peer.recv())["error"]
            assert error["code"] == "conversation_already_has_active_response"
            fake = server.connections[0]
            sent = [event["type"] for direction, event in fake.log if direction == "out"]
            assert not [type_ for type_ in sent if type_.startswith("response.")]
        await closed(fake)
        await settled(before)
    assert fake.close_code == 1000
    assert server.faults.applied == {"stall_first": 1}


async def test_openai_a_counted_stall_first_then_a_normal_response() -> None:
    async with FakeRealtimeServer() as server, openai_peer(server) as peer:
        stalled = applied_event(server.faults, "stall_first")
        server.faults.fail_next("stall_first", 1)
        await openai_say(peer, "/say hello there")
        await bounded(stalled)
        await peer.send({"type": "response.cancel"})  # even its cancellation says nothing
        await openai_nothing_pending(peer)
        await openai_say(peer, "/say hello again")
        events = await openai_until(peer, "response.done")
        assert events[0]["type"] == "response.created"
        assert events[-1]["response"]["status"] == "completed"
        transcript = events[-1]["response"]["output"][0]["content"][0]["transcript"]
        assert transcript == "hello again"


async def test_openai_stall_mid_response_sends_n_deltas_then_nothing() -> None:
    async with FakeRealtimeServer() as server:
        stalled = applied_event(server.faults, "stall_mid")
        before = asyncio.all_tasks()
        async with openai_peer(server) as peer:
            text_only = {"type": "realtime", "output_modalities": ["text"]}
            await peer.send({"type": "session.update", "session": text_only})
            assert (await peer.recv())["type"] == "session.updated"
            server.faults.fail_next("stall_mid", 1, after=3)
            await openai_say(peer, "/say one two three four five six")
            await bounded(stalled)
            await peer.send({"type": "session.update", "session": {"type": "realtime"}})
            events = await openai_until(peer, "session.updated")
            types = [event["type"] for event in events[:-1]]
            assert types == [
                "response.created",
                "response.output_item.added",
                "conversation.item.added",
                "response.content_part.added",
                *["response.output_text.delta"] * 3,
            ]
            assert "".join(event["delta"] for event in events[4:7]) == "one two three"
            await peer.send({"type": "response.cancel"})  # nothing: not even response.done
            await openai_nothing_pending(peer)
            await openai_say(peer, "/say seven eight nine ten")  # the count is used up
            events = await openai_until(peer, "rate_limits.updated")
            assert events[-2]["response"]["status"] == "completed"
            deltas = [event["delta"] for event in events if event.get("delta")]
            assert "".join(deltas) == "seven eight nine ten"
            stalled.clear()
            server.faults.stall_mid_response_after = 0  # on for good: response.created only
            await openai_say(peer, "/say a stall again")
            assert (await peer.recv())["type"] == "response.created"
            await bounded(stalled)
            await openai_nothing_pending(peer)
            fake = server.connections[0]
        # The client leaves in the middle of a stalled response.
        await closed(fake)
        await settled(before)
    assert server.faults.applied == {"stall_mid": 2}


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


# Chat completions ------------------------------------------------------------------------------

CHAT_BODY: dict[str, Any] = {
    "model": "gpt-fake",
    "messages": [{"role": "user", "content": "/say one two three"}],
}


@asynccontextmanager
async def chat_sdk(
    server: FakeChatServer, max_retries: int = 0
) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="sk-test", max_retries=max_retries
    ) as client:
        yield client


async def chat_text(client: openai.AsyncOpenAI, text: str = "/say hello") -> str:
    async with asyncio.timeout(TIMEOUT_S):
        completion = await client.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": text}]
        )
    return completion.choices[0].message.content or ""


async def quiet(read: Any) -> None:
    """``read()`` gets nothing for ``QUIET_S``: the stalled answer sends nothing more."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(QUIET_S):
            await read()


async def test_chat_refuse_resets_the_request_until_switched_off() -> None:
    async with FakeChatServer(faults=UpstreamFaults(refuse=True)) as server:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.ClientOSError) as caught:
                async with asyncio.timeout(TIMEOUT_S):
                    await http.post(f"{server.base_url}/chat/completions", json=CHAT_BODY)
        assert caught.value.errno == errno.ECONNRESET
        async with chat_sdk(server) as client:
            with pytest.raises(openai.APIConnectionError) as sdk_caught:
                await chat_text(client)
            cause: BaseException | None = sdk_caught.value
            while cause is not None and not isinstance(cause, ConnectionResetError):
                cause = cause.__cause__ or cause.__context__
            assert cause is not None  # the SDK's "Connection error." is the reset
            server.faults.refuse = False
            assert await chat_text(client) == "hello"
        assert server.faults.applied == {"refuse": 2}
        assert len(server.requests) == 1  # a refused request is never read


@pytest.mark.parametrize("status", sorted(OPENAI_ERRORS))
async def test_chat_status_answers_with_the_api_error(status: int) -> None:
    async with FakeChatServer(faults=UpstreamFaults(status=status)) as server:
        async with aiohttp.ClientSession() as http:
            url = f"{server.base_url}/chat/completions"
            async with asyncio.timeout(TIMEOUT_S), http.post(url, json=CHAT_BODY) as response:
                body = await response.json()
        async with chat_sdk(server) as client:
            with pytest.raises(SDK_ERRORS[status]) as caught:
                await chat_text(client)
        assert server.requests == []
    assert response.status == status
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == (*OPENAI_ERRORS[status], None)
    assert caught.value.status_code == status
    assert response.headers.get("Retry-After") == ("1" if status == 429 else None)


async def test_chat_fail_next_fails_exactly_the_next_requests() -> None:
    async with FakeChatServer() as server:
        server.faults.fail_next("status", 2, status=503)
        async with chat_sdk(server) as client:
            for _ in range(2):
                with pytest.raises(openai.InternalServerError):
                    await chat_text(client)
            assert await chat_text(client) == "hello"
        server.faults.fail_next("status", 2, status=429)
        async with chat_sdk(server, max_retries=2) as client:  # the SDK's own retries get by
            assert await chat_text(client, "/say retried") == "retried"
        assert server.faults.applied == {"status": 4}
        assert len(server.requests) == 2


async def test_chat_stall_first_output_streams_headers_then_nothing() -> None:
    async with FakeChatServer(faults=UpstreamFaults(stall_first_output=True)) as server:
        stalled = applied_event(server.faults, "stall_first")
        before = asyncio.all_tasks()
        async with aiohttp.ClientSession() as http:
            url = f"{server.base_url}/chat/completions"
            body = {**CHAT_BODY, "stream": True}
            async with asyncio.timeout(TIMEOUT_S), http.post(url, json=body) as response:
                assert response.status == 200
                assert response.content_type == "text/event-stream"
                await bounded(stalled)
                await quiet(response.content.readany)
            # The client leaves the stalled stream; so does its handler.
        await settled(before)
        assert server.requests == [body]  # taken as usual


async def test_chat_stall_first_output_holds_a_whole_answer_back() -> None:
    async with FakeChatServer(faults=UpstreamFaults(stall_first_output=True)) as server:
        stalled = applied_event(server.faults, "stall_first")
        before = asyncio.all_tasks()
        async with aiohttp.ClientSession() as http:
            url = f"{server.base_url}/chat/completions"
            answer = asyncio.create_task(http.post(url, json=CHAT_BODY))
            await bounded(stalled)
            await quiet(lambda: asyncio.shield(answer))  # not even a status line
            answer.cancel()  # the client gives up
            with pytest.raises(asyncio.CancelledError):
                await answer
        await settled(before)
        server.faults.clear()
        async with chat_sdk(server) as client:
            assert await chat_text(client) == "hello"


async def test_chat_stall_mid_response_sends_n_chunks_then_nothing() -> None:
    async with FakeChatServer(FakeChatOptions(empty_deltas=False)) as server:
        stalled = applied_event(server.faults, "stall_mid")
        server.faults.fail_next("stall_mid", 1, after=3)
        before = asyncio.all_tasks()
        async with chat_sdk(server) as client:
            async with asyncio.timeout(TIMEOUT_S):
                stream = await client.chat.completions.create(stream=True, **CHAT_BODY)
                chunks = [await anext(stream) for _ in range(3)]
            await bounded(stalled)
            await quiet(lambda: anext(stream))
            await stream.close()  # the client leaves the stalled stream
            async with asyncio.timeout(TIMEOUT_S):
                again = await client.chat.completions.create(stream=True, **CHAT_BODY)
                whole = [chunk async for chunk in again]
        await settled(before)
    deltas = [chunk.choices[0].delta for chunk in chunks]
    assert [(d.role, d.content) for d in deltas] == [
        ("assistant", ""),
        (None, "one "),
        (None, "two "),
    ]
    assert "".join(c.choices[0].delta.content or "" for c in whole) == "one two three"
    assert whole[-1].choices[0].finish_reason == "stop"
    assert server.faults.applied == {"stall_mid": 1}


# The command lines, end to end -----------------------------------------------------------------


async def test_the_chat_command_line_fails_the_next_request() -> None:
    args = ("--port", "0", "--fault", "503", "--fault-count", "1")
    listening = rb"listening (http://127\.0\.0\.1:\d+/v1)\n"
    async with served("fakes.chat", *args, listening=listening) as cli:
        base_url = cli.match.group(1).decode()
        async with openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            with pytest.raises(openai.InternalServerError):
                await chat_text(client)
            assert await chat_text(client) == "hello"
        assert await cli.terminate() == 0


async def test_the_openai_command_line_refuses_the_next_connection() -> None:
    args = ("--port", "0", "--fault", "refuse", "--fault-count", "1")
    listening = rb"listening (ws://127\.0\.0\.1:\d+/v1)\n"
    async with served("fakes.openai_realtime", *args, listening=listening) as cli:
        url = cli.match.group(1).decode() + "/realtime?model=gpt-realtime"
        async with asyncio.timeout(TIMEOUT_S):
            with pytest.raises(InvalidMessage):
                async with websockets.connect(url):
                    pass
            async with websockets.connect(url) as ws:
                assert json.loads(await ws.recv())["type"] == "session.created"
        assert await cli.terminate() == 0
