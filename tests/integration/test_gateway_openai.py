"""Client ↔ gateway ↔ the OpenAI Realtime fake, over real sockets, through the official SDK.

The fake (``fakes/openai_realtime/server.py``) follows the GA protocol of OpenAI's Realtime API
reference (https://platform.openai.com/docs/api-reference/realtime) and answers with the local
model's brain: ``/tool``, ``/tools``, ``/say`` and ``You said: …``; a voice utterance of N ms is
transcribed ``audio:<N>ms``; each spoken word is 100 ms of audio. Its frame log shows exactly what
the gateway sent upstream.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from harness import (
    Fakes,
    Gateway,
    GatewayFactory,
    first,
    model_results,
    pcm_silence,
    pcm_tone,
    speak,
    types,
)

from fakes.openai_realtime.server import FakeConnection, FakeOptions, FakeRealtimeServer
from transports.openai_realtime.codec import NOT_RUN_OUTPUT

FakeFactory = Callable[..., Awaitable[FakeRealtimeServer]]
# The gateway serves on uvloop by default: the whole relay runs on both loops.
pytestmark = pytest.mark.both_loops

LONG_REPLY = " ".join(f"word{n}" for n in range(40))  # 4 s of speech


@pytest.fixture
async def fake_factory() -> AsyncIterator[FakeFactory]:
    fakes = Fakes(lambda **o: FakeRealtimeServer(FakeOptions(**o)))
    yield fakes
    await fakes.stop_all()


@pytest.fixture
async def fake(fake_factory: FakeFactory) -> FakeRealtimeServer:
    return await fake_factory()


async def openai_gateway(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, **settings: Any
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "openai",
        "openai_ws_url": fake.ws_url,
        "openai_api_key": "sk-test",
        "upstream_reconnect_backoff_s": 0.01,
        **settings,
    }
    return await gateway_factory(**options)


@pytest.fixture
async def gateway(fake: FakeRealtimeServer, gateway_factory: GatewayFactory) -> Gateway:
    # The fake is set up first so that it stops last: parked sessions must not reconnect.
    return await openai_gateway(gateway_factory, fake)


def sent_items(conn: FakeConnection) -> list[dict[str, Any]]:
    return [e["item"] for e in conn.received("conversation.item.create")]


def received_types(conn: FakeConnection) -> list[str]:
    return [event["type"] for direction, event in conn.log if direction == "in"]


# -- setup ----------------------------------------------------------------------------------------


async def test_session_setup_is_ga_with_the_registry_tools(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("voice", tools=["get_current_time", "kb_search"]) as client:
        conn = await fake.wait_connections(1)
        update = await conn.wait_for("session.update", direction="in")
        assert client.started["session_id"].startswith("sess_")
        # What the client could send to be relayed without a resample: OpenAI takes 24 kHz.
        assert client.started["audio"]["upstream_input_rate"] == 24000
    assert conn.model == "gpt-realtime"
    assert conn.headers["Authorization"] == "Bearer sk-test"
    assert "OpenAI-Beta" not in conn.headers
    session = update["session"]
    assert session["type"] == "realtime"
    assert session["output_modalities"] == ["audio"]
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    assert session["audio"]["input"]["transcription"]["model"]
    assert [t["name"] for t in session["tools"]] == ["get_current_time", "kb_search"]
    assert all("function" not in t and t["type"] == "function" for t in session["tools"])
    assert "get_current_time:" in session["instructions"]
    assert received_types(conn)[0] == "session.update"


async def test_a_fake_that_never_sends_session_created_is_a_clear_error(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    silent = await fake_factory(session_created=False)
    gateway = await openai_gateway(gateway_factory, silent, upstream_connect_timeout_s=0.5)
    async with gateway.connect() as client:
        await client.send("session.start", mode="text", event_id="s1")
        error = await client.last("error", within=5)
        ended = await client.last("session.ended", within=5)
        code = await client.wait_closed(within=5)
    assert error["code"] == "upstream_unavailable"
    assert "session.created" in error["message"]
    assert error["event_id"] == "s1"
    assert ended["reason"] == "upstream_failed"
    assert code == 1000  # docs/protocol.md 4: session.ended, then 1000 (1011: internal errors)


async def test_a_refused_key_is_a_clear_error(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    strict = await fake_factory(api_key="sk-right")
    gateway = await openai_gateway(gateway_factory, strict)
    async with gateway.connect() as client:
        await client.send("session.start", mode="text")
        error = await client.last("error")
    assert error["code"] == "upstream_unavailable"
    assert "HTTP 401" in error["message"]
    assert error["retryable"] is False


# -- turns ----------------------------------------------------------------------------------------


async def test_a_text_turn(gateway: Gateway, fake: FakeRealtimeServer) -> None:
    async with gateway.session("text") as client:
        events = await client.say("hello there")
        conn = fake.connections[0]
    done = events[-1]
    assert done["text"] == "You said: hello there"
    assert done["status"] == "completed"
    deltas = [e["delta"] for e in events if e["type"] == "text.delta"]
    assert "".join(deltas) == "You said: hello there"
    assert not client.audio
    assert sent_items(conn) == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hello there"}],
        }
    ]
    assert received_types(conn)[1:] == ["conversation.item.create", "response.create"]


async def test_a_voice_turn(gateway: Gateway, fake: FakeRealtimeServer) -> None:
    async with gateway.session(
        "voice", audio={"input_rate": 16000, "output_rate": 16000}
    ) as client:
        await speak(client, 400)
        events = await client.until_reply()
        conn = fake.connections[0]
    user = first(events, "transcript.done", role="user")
    assert user["text"].startswith("audio:")
    assert "speech.started" in types(events)
    done = events[-1]
    assert done["text"] == f"You said: {user['text']}"
    assert client.audio, "no audio reached the client"
    # The fake speaks 100 ms per word at 24 kHz; the client asked for 16 kHz.
    words = len(done["text"].split())
    total = sum(len(frame) for frame in client.audio)
    assert abs(total - words * 100 * 32) <= 32 * 40
    appends = conn.received("input_audio_buffer.append")
    assert appends
    # Batched to at least 20 ms of 24 kHz PCM16.
    assert all(len(base64.b64decode(a["audio"])) >= 960 for a in appends)


# -- tools ----------------------------------------------------------------------------------------


async def test_a_tool_round_trip(gateway: Gateway, fake: FakeRealtimeServer) -> None:
    async with gateway.session("text") as client:
        events = await client.say("/tool get_current_time {}")
        conn = fake.connections[0]
    started = first(events, "tool.started")
    finished = first(events, "tool.finished")
    assert started["name"] == finished["name"] == "get_current_time"
    assert finished["ok"] is True
    ((name, envelope),) = model_results(events[-1]["text"])
    assert name == "get_current_time"
    assert envelope["ok"] is True
    outputs = [i for i in sent_items(conn) if i["type"] == "function_call_output"]
    assert len(outputs) == 1
    assert outputs[0]["call_id"] == started["call_id"]
    assert isinstance(outputs[0]["output"], str)
    assert json.loads(outputs[0]["output"])["ok"] is True
    tail = received_types(conn)[-2:]
    assert tail == ["conversation.item.create", "response.create"]
    assert gateway.decisions("get_current_time") == [("get_current_time", "executed")]


async def test_parallel_calls_are_answered_with_one_follow_up(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("text") as client:
        events = await client.say(
            '/tools get_current_time {} ;; kb_search {"query":"medication reminders"}'
        )
        conn = fake.connections[0]
    assert sorted(e["name"] for e in events if e["type"] == "tool.finished") == [
        "get_current_time",
        "kb_search",
    ]
    assert [name for name, _ in model_results(events[-1]["text"])] == [
        "get_current_time",
        "kb_search",
    ]
    after_call = received_types(conn)[3:]  # session.update, the user item, response.create
    assert after_call == ["conversation.item.create", "conversation.item.create", "response.create"]
    assert len(conn.received("response.create")) == 2


async def test_a_confirmation_approved_by_the_client_reaches_the_model(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    args = '{"title":"Dentist","start":"2026-12-01T10:00:00+01:00"}'
    async with gateway.session("text") as client:
        await client.send("text.send", text=f"/tool calendar_create_event {args}")
        request = await client.last("confirmation.requested")
        await client.until_reply()
        await client.send(
            "confirmation.respond", confirmation_id=request["confirmation_id"], decision="approve"
        )
        resolved = await client.last("confirmation.resolved")
        reply = (await client.until_reply())[-1]
        conn = fake.connections[0]
    assert resolved["decision"] == "approved"
    assert reply["status"] == "completed"
    late = [i for i in sent_items(conn) if i.get("role") == "system"]
    assert len(late) == 1
    assert request["call_id"] in late[0]["content"][0]["text"]


async def test_a_cancelled_response_never_runs_its_call(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("text") as client:
        await client.send("text.send", text="/hangcall get_current_time {}")
        conn = fake.connections[0]
        await conn.wait_for("response.function_call_arguments.done")
        await client.send("response.cancel")
        done = await client.last("response.done")
        await conn.wait_for("conversation.item.create", count=2, direction="in")
        assert "tool.started" not in types(client.events)
        events = await client.say("hello")
    assert done["status"] == "cancelled"
    outputs = [i for i in sent_items(conn) if i["type"] == "function_call_output"]
    assert [o["output"] for o in outputs] == [NOT_RUN_OUTPUT]
    assert "tool.started" not in types(events)
    assert gateway.decisions() == []
    # The "not run" answer did not start a response of its own.
    assert len(conn.received("response.create")) == 2


# -- barge-in -------------------------------------------------------------------------------------


async def test_barge_in_truncates_to_what_the_client_played(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    paced = await fake_factory(pace=1.0)
    gateway = await openai_gateway(gateway_factory, paced)
    async with gateway.session(
        "voice", audio={"input_rate": 24000, "output_rate": 24000}
    ) as client:
        await client.send("text.send", text=f"/say {LONG_REPLY}")
        started = await client.last("response.started")
        while sum(len(f) for f in client.audio) < 48 * 400:  # 400 ms of the reply arrived
            await client.next()
        await client.send("audio.playback", response_id=started["response_id"], played_ms=200)
        await speak(client, 300, rate=24000)
        events = await client.until("response.done", response_id=started["response_id"])
        conn = paced.connections[0]
        truncated = await conn.wait_for("conversation.item.truncated")
    assert events[-1]["status"] == "interrupted"
    speech = client.timeline.index(("event", first(client.events, "speech.started")))
    assert not [kind for kind, _ in client.timeline[speech:] if kind == "audio"]
    (truncate,) = conn.received("conversation.item.truncate")
    assert truncate["audio_end_ms"] == truncated["audio_end_ms"] == 200
    assert truncate["item_id"] == truncated["item_id"]
    assert not conn.sent("error")
    # What the model remembers is what was heard: two words of 100 ms each.
    item = next(i for i in conn.items if i["id"] == truncate["item_id"])
    assert item["content"][0]["transcript"] == "word0 word1"


async def test_barge_in_cancels_when_the_server_does_not_and_clamps_the_truncate(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    stubborn = await fake_factory(pace=1.0, ignore_interrupt=True)
    gateway = await openai_gateway(gateway_factory, stubborn)
    async with gateway.session(
        "voice", audio={"input_rate": 24000, "output_rate": 24000}
    ) as client:
        await client.send("text.send", text=f"/say {LONG_REPLY}")
        started = await client.last("response.started")
        while sum(len(f) for f in client.audio) < 48 * 300:
            await client.next()
        # The client claims far more playback than it could have received.
        await client.send("audio.playback", response_id=started["response_id"], played_ms=60_000)
        await speak(client, 300, rate=24000)
        done = await client.last("response.done", response_id=started["response_id"])
        conn = stubborn.connections[0]
        truncated = await conn.wait_for("conversation.item.truncated")
    assert done["status"] == "interrupted"
    cancels = conn.received("response.cancel")
    assert len(cancels) == 1
    assert cancels[0]["response_id"] == started["response_id"]
    # The server went on speaking until the cancel; the truncate names only what the client got.
    received_ms = sum(len(f) for f in client.audio) // 48
    (truncate,) = conn.received("conversation.item.truncate")
    assert truncate["audio_end_ms"] == truncated["audio_end_ms"] == received_ms
    produced_ms = sum(
        len(base64.b64decode(e["delta"])) // 48
        for d, e in conn.log
        if d == "out" and e["type"] == "response.output_audio.delta"
    )
    assert produced_ms > received_ms
    assert not conn.sent("error")


# -- recovery -------------------------------------------------------------------------------------


async def test_session_expiry_is_recovered_with_the_context_replayed(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("text") as client:
        await client.say("remember the word pineapple")
        first_conn = fake.connections[0]
        await first_conn.expire()
        second = await fake.wait_connections(2)
        await second.wait_for("session.updated")
        events = await client.say("what was the word")
    assert first_conn.close_code == 1001
    assert types(events).count("error") == 0
    assert "session.ended" not in types(client.events)
    replayed = sent_items(second)
    assert replayed[0]["content"][0]["text"] == "remember the word pineapple"
    assert replayed[1] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "You said: remember the word pineapple"}],
    }
    assert events[-1]["text"] == "You said: what was the word"
    assert second.received("session.update")[0]["session"]["instructions"]
    assert gateway.metric("gateway_upstream_reconnects_total") == 1


async def test_an_abrupt_1011_drop_mid_reply_is_recovered(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    paced = await fake_factory(pace=1.0)
    gateway = await openai_gateway(gateway_factory, paced)
    async with gateway.session("text") as client:
        await client.send("text.send", text=f"/say {LONG_REPLY}")
        started = await client.last("response.started")
        await client.last("text.delta")
        await paced.connections[0].drop(1011)
        cut = await client.last("response.done", response_id=started["response_id"])
        again = await client.until_reply(within=15)
        second = await paced.wait_connections(2)
    assert cut["status"] == "interrupted"
    assert again[-1]["text"] == LONG_REPLY
    assert "session.ended" not in types(client.events)
    user, assistant = sent_items(second)
    assert user["content"][0]["text"] == f"/say {LONG_REPLY}"
    # The part of the reply that was shown before the drop is in the new session too.
    heard = assistant["content"][0]["text"]
    assert assistant["role"] == "assistant"
    assert heard
    assert LONG_REPLY.startswith(heard)


async def test_a_server_that_keeps_dropping_ends_the_session(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("text") as client:
        await client.send("text.send", text="/drop never finishes")
        ended = await client.last("session.ended", within=15)
        code = await client.wait_closed()
    assert ended["reason"] == "upstream_failed"
    assert "5 attempts" in ended["detail"]
    assert code == 1000
    assert len(fake.connections) == 6  # the first and five reconnects


async def test_an_upstream_that_is_gone_ends_the_session_after_bounded_attempts(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    fake = await fake_factory()
    gateway = await openai_gateway(gateway_factory, fake, upstream_reconnect_attempts=3)
    async with gateway.session("text") as client:
        await client.say("hello")
        await fake.stop()
        ended = await client.last("session.ended", within=15)
    assert ended["reason"] == "upstream_failed"
    assert "3 attempts" in ended["detail"]


async def test_two_sessions_get_two_upstream_sessions(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("text") as a, gateway.session("text", sub="bob") as b:
        replies = await asyncio.gather(a.say("from a"), b.say("from b"))
    assert [r[-1]["text"] for r in replies] == ["You said: from a", "You said: from b"]
    assert len(fake.connections) == 2


async def test_openai_base_url_is_used_when_no_websocket_url_is_set(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gateway_factory(
        provider="openai",
        openai_base_url=f"http://127.0.0.1:{fake.port}/v1",
        openai_api_key="sk-test",
    )
    async with gateway.session("text") as client:
        events = await client.say("over http base")
    assert events[-1]["text"] == "You said: over http base"
    assert fake.connections[0].model == "gpt-realtime"


async def test_a_session_model_overrides_the_default(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("text", model="gpt-realtime-mini") as client:
        await client.say("hi")
    assert fake.connections[0].model == "gpt-realtime-mini"


async def test_switching_mode_reconfigures_the_upstream(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("text") as client:
        await client.send("session.update", mode="voice")
        await client.last("session.updated")
        conn = fake.connections[0]
        update = await conn.wait_for("session.update", count=2, direction="in")
        events = await client.say("now with a voice")
    assert update["session"]["output_modalities"] == ["audio"]
    assert update["session"]["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    assert events[-1]["text"] == "You said: now with a voice"
    assert client.audio


async def test_push_to_talk_commit_gets_an_answer(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session("voice") as client:
        tone = pcm_tone(300)
        for start in range(0, len(tone), 640):
            await client.send_raw(tone[start : start + 640])
        await client.send("audio.commit")
        events = await client.until_reply()
        conn = fake.connections[0]
    assert events[-1]["text"].startswith("You said: audio:")
    assert conn.received("input_audio_buffer.commit")
    assert len(conn.received("response.create")) == 1


async def test_barge_in_after_the_whole_reply_arrived_still_truncates(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session(
        "voice", audio={"input_rate": 24000, "output_rate": 24000}
    ) as client:
        await client.send("text.send", text=f"/say {LONG_REPLY}")
        reply = await client.until_reply()
        response_id = reply[-1]["response_id"]
        # All 4 s arrived at once (faster than real time, as OpenAI sends it); the client has
        # played 200 ms of it when the user speaks.
        await client.send("audio.playback", response_id=response_id, played_ms=200)
        await speak(client, 300, rate=24000)
        await client.until_reply()  # the answer to the barge-in; the truncate came before it
        conn = fake.connections[0]
    assert "speech.started" in types(client.events)
    truncates = conn.received("conversation.item.truncate")
    assert [t["audio_end_ms"] for t in truncates] == [200]
    assert conn.sent("conversation.item.truncated")


async def test_a_reply_that_played_to_its_end_is_not_truncated(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    async with gateway.session(
        "voice", audio={"input_rate": 24000, "output_rate": 24000}
    ) as client:
        await client.send("text.send", text="/say short")
        reply = await client.until_reply()
        await client.send("audio.playback", response_id=reply[-1]["response_id"], played_ms=100)
        await speak(client, 300, rate=24000)
        await client.until_reply()
        conn = fake.connections[0]
    assert not conn.received("conversation.item.truncate")


# -- bad audio on the hot path -------------------------------------------------------------------


@pytest.mark.parametrize("frame", [b"\x01\x02\x03", b"\x00" * 961])
async def test_an_odd_audio_frame_is_invalid_audio_and_the_session_goes_on(
    gateway: Gateway, fake: FakeRealtimeServer, frame: bytes
) -> None:
    """The report: an odd-length frame on a live voice session was answered ``internal`` from
    the hot path (the resampler's ValueError). It is ``invalid_audio``, as on the event path."""
    async with gateway.session("voice", audio={"input_rate": 16000}) as client:
        await client.send_raw(pcm_tone(40))  # the hot path is live
        await client.send_raw(frame)
        error = await client.last("error")
        assert error["code"] == "invalid_audio"
        assert "even number of bytes" in error["message"]
        await client.send("ping", id="after")
        assert (await client.last("pong"))["id"] == "after"
        await speak(client, 300)
        transcript = await client.last("transcript.done", role="user")
        assert transcript["text"].startswith("audio:")
    assert types(client.events).count("error") == 1


async def test_a_client_that_switches_to_the_upstreams_rate_is_relayed_untouched(
    gateway: Gateway, fake: FakeRealtimeServer
) -> None:
    """A browser starts at 16 kHz, reads ``upstream_input_rate`` (24 kHz) and switches: its
    next frames are what the provider receives, byte for byte, and a turn still works."""
    async with gateway.session("voice", audio={"input_rate": 16000}) as client:
        assert client.started["audio"]["upstream_input_rate"] == 24000
        await client.send_raw(pcm_tone(40))  # resampled, at 16 kHz
        await client.send("session.update", audio={"input_rate": 96000}, event_id="bad")
        error = await client.last("error")
        assert (error["code"], error["event_id"]) == ("invalid_event", "bad")
        assert "audio.input_rate" in error["message"]
        await client.send("session.update", audio={"input_rate": 24000})
        updated = await client.last("session.updated")
        assert updated["audio"] == {"input_rate": 24000, "output_rate": 24000}
        utterance = pcm_tone(400, 24000) + pcm_silence(600, 24000)
        for start in range(0, len(utterance), 960):
            await client.send_raw(utterance[start : start + 960])
        transcript = await client.last("transcript.done", role="user")
        conn = fake.connections[0]
    assert transcript["text"].startswith("audio:")
    appended = b"".join(
        base64.b64decode(a["audio"]) for a in conn.received("input_audio_buffer.append")
    )
    assert utterance[:19200] in appended  # 400 ms of the tone as the client sent it
