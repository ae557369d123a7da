"""The fake OpenAI Realtime server over a raw ``websockets`` client: event order, ids, errors,
closes and faults, frame by frame.

No sleeps: the client reads events in order under a timeout, and waits on the fake with
``FakeConnection.wait_for``. The only timed waits are where *nothing* must arrive.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidStatus

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from transports.local.tones import silence

TIMEOUT_S = 5
WEATHER = '/tool get_weather {"city":"Paris"}'
LONG = "/say " + " ".join(f"word{n}" for n in range(30))  # 3 s of speech


class Peer:
    """A raw client of the fake; reads events in order."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []

    async def send(self, **event: Any) -> None:
        await self.ws.send(json.dumps(event))

    async def say(self, text: str, **extra: Any) -> None:
        content = [{"type": "input_text", "text": text}]
        item = {"type": "message", "role": "user", "content": content}
        await self.send(type="conversation.item.create", item=item, **extra)

    async def recv(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            event: dict[str, Any] = json.loads(await self.ws.recv())
        self.events.append(event)
        return event

    async def until(self, type_: str) -> list[dict[str, Any]]:
        """Events up to and including the next one of that type."""
        seen = [await self.recv()]
        while seen[-1]["type"] != type_:
            seen.append(await self.recv())
        return seen

    async def until_closed(self) -> tuple[list[dict[str, Any]], ConnectionClosed]:
        seen: list[dict[str, Any]] = []
        try:
            while True:
                seen.append(await self.recv())
        except ConnectionClosed as closed:
            return seen, closed


@asynccontextmanager
async def connect(
    server: FakeRealtimeServer,
    *,
    created: bool = True,
    headers: dict[str, str] | None = None,
    **options: Any,
) -> AsyncIterator[Peer]:
    url = f"{server.ws_url}/realtime?model=gpt-realtime"
    async with websockets.connect(
        url, max_size=None, additional_headers=headers or {}, **options
    ) as ws:
        peer = Peer(ws)
        if created:
            assert (await peer.recv())["type"] == "session.created"
        yield peer


@pytest.fixture
async def server() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer() as fake:
        yield fake


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def without(events: list[dict[str, Any]], *dropped: str) -> list[str]:
    return [event["type"] for event in events if event["type"] not in dropped]


# -- event order and ids -------------------------------------------------------------------


async def test_an_audio_response_follows_6_1_with_consistent_ids(
    server: FakeRealtimeServer,
) -> None:
    async with connect(server) as peer:
        await peer.say("/say Hello there")
        await peer.send(type="response.create")
        events = await peer.until("rate_limits.updated")
        fake = server.connections[0]
    assert types(events) == [
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        *(["response.output_audio_transcript.delta"] + ["response.output_audio.delta"] * 5) * 2,
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "rate_limits.updated",
    ]
    user_id = events[0]["item"]["id"]
    response_id = events[2]["response"]["id"]
    item = events[3]["item"]
    assert response_id.startswith("resp_")
    assert item["id"].startswith("item_")
    assert (item["role"], item["status"], item["content"]) == ("assistant", "in_progress", [])
    assert events[4]["previous_item_id"] == user_id
    for event in events[3:-2]:
        if event["type"].startswith("response."):
            assert event["response_id"] == response_id
            assert event["output_index"] == 0
        if "item_id" in event:
            assert event["item_id"] == item["id"]
        if "content_index" in event:
            assert event["content_index"] == 0
    audio = [e for e in events if e["type"] == "response.output_audio.delta"]
    assert {len(base64.b64decode(e["delta"])) for e in audio} == {960}  # 20 ms of PCM16 24 kHz
    words = [e["delta"] for e in events if e["type"] == "response.output_audio_transcript.delta"]
    assert words == ["Hello", " there"]
    done = events[-2]["response"]
    assert (done["id"], done["status"], done["status_details"]) == (response_id, "completed", None)
    assert done["conversation_id"].startswith("conv_")
    assert done["output"] == [
        {
            **item,
            "status": "completed",
            "content": [{"type": "output_audio", "transcript": "Hello there"}],
        }
    ]
    assert done["usage"]["output_token_details"]["audio_tokens"] > 0
    ids = [event["event_id"] for event in peer.events]
    assert len(set(ids)) == len(ids)
    assert all(event_id.startswith("event_") for event_id in ids)
    assert [event for direction, event in fake.log if direction == "out"] == peer.events


async def test_a_function_call_follows_6_3_and_waits_for_its_output(
    server: FakeRealtimeServer,
) -> None:
    async with connect(server) as peer:
        await peer.say(WEATHER)
        await peer.send(type="response.create")
        events = await peer.until("rate_limits.updated")
        arguments = '{"city":"Paris"}'
        assert types(events) == [
            "conversation.item.added",
            "conversation.item.done",
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            *["response.function_call_arguments.delta"] * 6,  # 16 characters, 3 at a time
            "response.function_call_arguments.done",
            "conversation.item.done",
            "response.output_item.done",
            "response.done",
            "rate_limits.updated",
        ]
        added, deltas, done = events[3], events[5:11], events[11]
        call = added["item"]
        assert (call["type"], call["name"], call["call_id"], call["arguments"]) == (
            "function_call",
            "get_weather",
            "call_1",
            "",
        )
        assert "".join(d["delta"] for d in deltas) == arguments
        assert {d["call_id"] for d in deltas} == {"call_1"}
        assert (done["name"], done["arguments"], done["item_id"]) == (
            "get_weather",
            arguments,
            call["id"],
        )
        assert events[12]["previous_item_id"] == events[0]["item"]["id"]
        assert events[13]["item"]["status"] == "completed"
        assert events[14]["response"]["output"][0]["arguments"] == arguments
        # Adding the output starts nothing by itself.
        output = {"type": "function_call_output", "call_id": "call_1", "output": '{"temp_c":21}'}
        await peer.send(type="conversation.item.create", item=output)
        added_output = await peer.until("conversation.item.done")
        await peer.send(type="response.create", event_id="evt_follow")
        answer = await peer.until("response.done")
    assert types(added_output) == ["conversation.item.added", "conversation.item.done"]
    assert added_output[0]["previous_item_id"] == call["id"]
    assert answer[0]["type"] == "response.created"
    transcript = answer[-1]["response"]["output"][0]["content"][0]["transcript"]
    assert transcript == 'Tool results: get_weather={"temp_c":21}'


async def test_parallel_calls_are_items_at_increasing_output_indexes(
    server: FakeRealtimeServer,
) -> None:
    async with connect(server) as peer:
        await peer.say("/tools a {} ;; b {}")
        await peer.send(type="response.create")
        events = await peer.until("response.done")
        for call_id in ("call_1", "call_2"):
            item = {"type": "function_call_output", "call_id": call_id, "output": "{}"}
            await peer.send(type="conversation.item.create", item=item)
        await peer.send(type="response.create")
        answer = await peer.until("response.done")
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [(e["output_index"], e["item"]["call_id"]) for e in added] == [
        (0, "call_1"),
        (1, "call_2"),
    ]
    assert [i["call_id"] for i in events[-1]["response"]["output"]] == ["call_1", "call_2"]
    output = answer[-1]["response"]["output"][0]["content"][0]["transcript"]
    assert output == "Tool results: a={}; b={}"


# -- one response at a time, cancel ---------------------------------------------------------


async def test_one_active_response_and_both_cancel_cases(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        await peer.say("/hang")
        await peer.send(type="response.create")
        created = (await peer.until("response.created"))[-1]
        await peer.send(type="response.create", event_id="evt_second")
        error = (await peer.until("error"))[-1]["error"]
        await peer.send(type="response.cancel", event_id="evt_cancel")
        cancelled = await peer.until("rate_limits.updated")
        await peer.send(type="response.cancel", event_id="evt_again")
        again = (await peer.until("error"))[-1]["error"]
    response_id = created["response"]["id"]
    assert error == {
        "type": "invalid_request_error",
        "code": "conversation_already_has_active_response",
        "message": f"Conversation already has an active response in progress: {response_id}. "
        "Wait until the response is finished before creating a new one.",
        "param": None,
        "event_id": "evt_second",
    }
    assert types(cancelled) == ["response.done", "rate_limits.updated"]
    done = cancelled[0]["response"]
    assert (done["id"], done["status"], done["output"]) == (response_id, "cancelled", [])
    assert done["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    assert (again["code"], again["message"], again["event_id"]) == (
        "response_cancel_not_active",
        "Cancellation failed: no active response found",
        "evt_again",
    )
    assert types(peer.events).count("response.created") == 1


async def test_a_cancel_mid_speech_closes_the_open_item() -> None:
    async with FakeRealtimeServer(FakeOptions(pace=1.0)) as server, connect(server) as peer:
        await peer.say(LONG)
        await peer.send(type="response.create")
        await peer.until("response.output_audio.delta")
        await peer.send(type="response.cancel")
        events = await peer.until("rate_limits.updated")
    closing = without(
        events, "response.output_audio.delta", "response.output_audio_transcript.delta"
    )
    assert closing == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "rate_limits.updated",
    ]
    done = events[-2]["response"]
    assert done["status"] == "cancelled"
    assert done["status_details"]["reason"] == "client_cancelled"
    (item,) = done["output"]
    assert item["status"] == "incomplete"
    assert item["content"][0]["transcript"].startswith("word0")
    assert len(item["content"][0]["transcript"].split()) < 30


# -- truncate -------------------------------------------------------------------------------


async def test_truncate_valid_too_long_and_not_audio(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        await peer.say("/say one two three")
        user_id = (await peer.until("conversation.item.done"))[-1]["item"]["id"]
        await peer.send(type="response.create")
        item_id = (await peer.until("response.done"))[-1]["response"]["output"][0]["id"]
        await peer.send(
            type="conversation.item.truncate",
            item_id=item_id,
            content_index=0,
            audio_end_ms=400,
            event_id="t1",
        )
        too_long = (await peer.until("error"))[-1]["error"]
        await peer.send(
            type="conversation.item.truncate", item_id=user_id, content_index=0, audio_end_ms=10
        )
        not_audio = (await peer.until("error"))[-1]["error"]
        await peer.send(
            type="conversation.item.truncate", item_id=item_id, content_index=0, audio_end_ms=150
        )
        truncated = (await peer.until("conversation.item.truncated"))[-1]
        await peer.send(type="conversation.item.retrieve", item_id=item_id)
        retrieved = (await peer.until("conversation.item.retrieved"))[-1]["item"]
        fake = server.connections[0]
    assert (too_long["message"], too_long["event_id"]) == (
        "Audio content of 300ms is already shorter than 400ms",
        "t1",
    )
    assert not_audio["message"] == "Only model output audio messages can be truncated"
    assert {k: truncated[k] for k in ("item_id", "content_index", "audio_end_ms")} == {
        "item_id": item_id,
        "content_index": 0,
        "audio_end_ms": 150,
    }
    assert fake.items[-1]["content"][0]["transcript"] == "one two"
    assert retrieved["content"][0]["transcript"] == "one two"
    assert len(base64.b64decode(retrieved["content"][0]["audio"])) == 150 * 48


async def test_delete_and_retrieve_items(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        await peer.say("hello")
        item_id = (await peer.until("conversation.item.done"))[-1]["item"]["id"]
        await peer.send(type="conversation.item.retrieve", item_id=item_id)
        retrieved = (await peer.until("conversation.item.retrieved"))[-1]
        await peer.send(type="conversation.item.delete", item_id=item_id)
        deleted = (await peer.until("conversation.item.deleted"))[-1]
        await peer.send(type="conversation.item.delete", item_id=item_id, event_id="d2")
        error = (await peer.until("error"))[-1]["error"]
        fake = server.connections[0]
    assert retrieved["item"]["content"] == [{"type": "input_text", "text": "hello"}]
    assert deleted["item_id"] == item_id
    assert (error["code"], error["param"], error["event_id"]) == ("invalid_value", "item_id", "d2")
    assert fake.items == []


# -- input errors and validation ------------------------------------------------------------


async def test_input_buffer_errors(server: FakeRealtimeServer) -> None:
    manual = {"type": "realtime", "audio": {"input": {"turn_detection": None}}}
    async with connect(server) as peer:
        await peer.send(type="session.update", session=manual)
        await peer.until("session.updated")
        await peer.send(type="input_audio_buffer.append", audio="!!!", event_id="a1")
        bad = (await peer.until("error"))[-1]["error"]
        await peer.send(type="input_audio_buffer.commit", event_id="c1")
        empty = (await peer.until("error"))[-1]["error"]
        audio = base64.b64encode(silence(120, 24000)).decode()
        await peer.send(type="input_audio_buffer.append", audio=audio)
        await peer.send(type="input_audio_buffer.commit")
        committed = await peer.until("conversation.item.done")
        await peer.send(type="input_audio_buffer.clear")
        cleared = await peer.until("input_audio_buffer.cleared")
    assert (bad["code"], bad["param"], bad["event_id"]) == ("invalid_value", "audio", "a1")
    assert bad["message"].startswith("Invalid 'audio'. Expected base64-encoded audio bytes")
    assert empty == {
        "type": "invalid_request_error",
        "code": "input_audio_buffer_commit_empty",
        "message": "Error committing input audio buffer: buffer too small. Expected at least "
        "100ms of audio, but buffer only has 0.00ms of audio.",
        "param": None,
        "event_id": "c1",
    }
    assert types(committed) == [
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
    ]
    assert committed[1]["item"]["content"] == [{"type": "input_audio", "transcript": None}]
    assert types(cleared) == ["input_audio_buffer.cleared"]  # a manual commit started nothing


async def test_session_update_errors_echo_the_event_id(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        await peer.send(type="session.update", session={"instructions": "x"}, event_id="u1")
        missing = (await peer.until("error"))[-1]["error"]
        bad_modalities = {"type": "realtime", "output_modalities": ["text", "audio"]}
        await peer.send(type="session.update", session=bad_modalities, event_id="u2")
        modalities = (await peer.until("error"))[-1]["error"]
        await peer.send(
            type="session.update",
            session={"type": "realtime", "audio": {"output": {"voice": "cedar"}}},
        )
        updated = (await peer.until("session.updated"))[-1]["session"]
        await peer.say("/say hi")
        await peer.send(type="response.create")
        await peer.until("response.done")
        await peer.send(
            type="session.update",
            session={"type": "realtime", "audio": {"output": {"voice": "marin"}}},
            event_id="u3",
        )
        voice = (await peer.until("error"))[-1]["error"]
        fake = server.connections[0]
    assert missing == {
        "type": "invalid_request_error",
        "code": "missing_required_parameter",
        "message": "Missing required parameter: 'session.type'.",
        "param": "session.type",
        "event_id": "u1",
    }
    assert (modalities["code"], modalities["event_id"]) == ("invalid_value", "u2")
    assert updated["audio"]["output"]["voice"] == "cedar"
    assert updated["audio"]["input"]["turn_detection"]["type"] == "server_vad"  # untouched
    assert (voice["code"], voice["event_id"]) == ("cannot_update_voice", "u3")
    assert fake.session["audio"]["output"]["voice"] == "cedar"


async def test_tool_output_errors(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        unknown = {"type": "function_call_output", "call_id": "call_77", "output": "{}"}
        await peer.send(type="conversation.item.create", item=unknown, event_id="o1")
        not_found = (await peer.until("error"))[-1]["error"]
        await peer.say(WEATHER)
        await peer.send(type="response.create")
        await peer.until("response.done")
        as_object = {"type": "function_call_output", "call_id": "call_1", "output": {"t": 1}}
        await peer.send(type="conversation.item.create", item=as_object, event_id="o2")
        wrong_type = (await peer.until("error"))[-1]["error"]
    assert not_found == {
        "type": "invalid_request_error",
        "code": "invalid_tool_call_id",
        "message": "Tool call ID 'call_77' not found in conversation.",
        "param": "item.call_id",
        "event_id": "o1",
    }
    assert (wrong_type["code"], wrong_type["param"], wrong_type["event_id"]) == (
        "invalid_type",
        "item.output",
        "o2",
    )


async def test_bad_frames_leave_the_session_open(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        await peer.ws.send("this is not json")
        error = (await peer.until("error"))[-1]["error"]
        binary = json.dumps({"type": "session.update", "session": {"type": "realtime"}}).encode()
        await peer.ws.send(binary)
        updated = await peer.until("session.updated")
        big = base64.b64encode(silence(25_000, 24000)).decode()  # 1.2 MB of audio, 1.6 MB frame
        await peer.send(type="input_audio_buffer.append", audio=big)
        await peer.send(type="input_audio_buffer.clear")
        cleared = await peer.until("input_audio_buffer.cleared")
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_json"
    assert types(updated) == ["session.updated"]
    assert types(cleared) == ["input_audio_buffer.cleared"]


# -- handshake, faults and closes ----------------------------------------------------------


async def test_the_upgrade_selects_realtime_and_keeps_the_headers(
    server: FakeRealtimeServer,
) -> None:
    async with connect(server, subprotocols=["realtime"], headers={"X-Trace": "1"}) as peer:
        assert peer.ws.subprotocol == "realtime"
        extensions = [extension.name for extension in peer.ws.protocol.extensions]
        assert extensions == ["permessage-deflate"]
        pong = await peer.ws.ping()
        async with asyncio.timeout(TIMEOUT_S):
            await pong
        fake = await server.wait_connections(1)
    assert fake.headers["X-Trace"] == "1"
    assert fake.model == "gpt-realtime"
    created = peer.events[0]["session"]
    assert created["model"] == "gpt-realtime"
    assert created["expires_at"] == pytest.approx(time.time() + 3600, abs=5)


async def test_keys_by_header_or_browser_subprotocol() -> None:
    async with FakeRealtimeServer(FakeOptions(api_key="sk-right")) as server:
        browser = ["realtime", "openai-insecure-api-key.sk-right"]
        async with connect(server, subprotocols=browser) as peer:
            assert peer.ws.subprotocol == "realtime"
        async with connect(server, headers={"Authorization": "Bearer sk-right"}):
            pass
        with pytest.raises(InvalidStatus) as caught:
            async with connect(server, headers={"Authorization": "Bearer sk-wrong"}):
                pass
    assert caught.value.response.status_code == 401
    assert json.loads(caught.value.response.body)["error"]["code"] == "invalid_api_key"


async def test_only_the_realtime_path_upgrades(server: FakeRealtimeServer) -> None:
    with pytest.raises(InvalidStatus) as caught:
        async with websockets.connect(f"ws://127.0.0.1:{server.port}/v1/other"):
            pass
    assert caught.value.response.status_code == 404
    async with websockets.connect(f"ws://127.0.0.1:{server.port}/custom/realtime") as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"


async def test_the_session_expires_with_an_error_then_1001() -> None:
    async with FakeRealtimeServer(FakeOptions(max_duration_s=0.3)) as server:
        async with connect(server) as peer:
            events, closed = await peer.until_closed()
        fake = server.connections[0]
    message = "Your session hit the maximum duration of 0.005 minutes."
    assert types(events) == ["error"]
    assert events[0]["error"]["code"] == "session_expired"
    assert events[0]["error"]["message"] == message
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1001, message)
    assert fake.close_code == 1001


async def test_expire_and_directives_close_the_socket(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        fake = await server.wait_connections(1)
        await fake.expire()
        events, closed = await peer.until_closed()
    assert [e["error"]["code"] for e in events] == ["session_expired"]
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1001
    async with connect(server) as peer:
        await peer.say("/expire")
        await peer.send(type="response.create")
        events, closed = await peer.until_closed()
    assert without(events, "conversation.item.added", "conversation.item.done") == ["error"]
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1001


async def test_drop_closes_with_1011_after_two_deltas(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        await peer.say("/drop Hello there friend")
        await peer.send(type="response.create")
        events, closed = await peer.until_closed()
    assert types(events).count("response.output_audio.delta") == 2
    assert "response.done" not in types(events)
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1011
    assert server.connections[0].close_code == 1011


async def test_fail_closes_at_once_with_1011(server: FakeRealtimeServer) -> None:
    async with connect(server) as peer:
        await peer.say("/fail")
        await peer.send(type="response.create")
        events, closed = await peer.until_closed()
    assert types(events) == ["conversation.item.added", "conversation.item.done"]
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1011


async def test_the_beta_header_is_refused_with_4000(server: FakeRealtimeServer) -> None:
    async with connect(server, created=False, headers={"OpenAI-Beta": "realtime=v1"}) as peer:
        events, closed = await peer.until_closed()
    assert types(events) == ["error"]
    assert events[0]["error"]["code"] == "beta_api_shape_disabled"
    assert closed.rcvd is not None
    assert closed.rcvd.code == 4000


async def test_a_fake_that_never_greets() -> None:
    silent = FakeRealtimeServer(FakeOptions(session_created=False))
    async with silent as server, connect(server, created=False) as peer:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):  # nothing may arrive: a timed wait is the test
                await peer.ws.recv()
        await peer.send(type="session.update", session={"type": "realtime"})
        answered = await peer.recv()
    assert answered["type"] == "session.updated"  # no greeting, but the session works


async def test_a_delayed_greeting() -> None:
    async with FakeRealtimeServer(FakeOptions(created_delay_s=0.15)) as server:
        started = time.monotonic()
        async with connect(server):
            waited = time.monotonic() - started
    assert waited >= 0.15


async def test_stop_closes_every_connection_with_1001() -> None:
    server = FakeRealtimeServer()
    await server.start()
    try:
        async with connect(server) as first, connect(server) as second:
            fake = await server.wait_connections(2)
            await server.stop()
            closes = [await first.until_closed(), await second.until_closed()]
    finally:
        await server.stop()
    assert [closed.rcvd.code for _, closed in closes if closed.rcvd is not None] == [1001, 1001]
    assert fake.closed.is_set()
    assert [c.close_code for c in server.connections] == [1001, 1001]
