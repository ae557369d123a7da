"""The OpenAI Realtime fake's fault modes over real sockets, through the official SDK: a refused
upgrade, an HTTP error with the API's body, a response that never starts, one that stops after N
deltas; a stalled connection the client closes leaves nothing running."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import pytest
import websockets
from fault_kit import (
    OPENAI_ERRORS,
    Peer,
    applied_event,
    bounded,
    closed,
    settled,
)
from openai.types.realtime import SessionCreatedEvent
from websockets.exceptions import InvalidMessage, InvalidStatus

from fakes.faults import UpstreamFaults
from fakes.openai_realtime.server import FakeRealtimeServer
from transports.local.tones import silence, tone

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
