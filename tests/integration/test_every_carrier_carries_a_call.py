"""Every carrier's call, over real sockets: the carrier's simulator (``fakes/carriers``) ↔ the
gateway's answer webhook and ``/phone/media`` ↔ the OpenAI Realtime fake.

The same suite runs on each carrier (``phone_kit.LINES``): the webhook signed and answered, the
greeting heard, a spoken turn answered, a tool approved on the keypad, a barge-in that clears
the carrier's buffer at once and cuts the model's memory at what the caller heard, a wrongly
signed webhook and a replayed or foreign stream token refused. The greeting
(``GATEWAY_PHONE_GREETING``) is the caller's first message, so each test chooses what the fake
says first: ``/say …`` for speech, ``/tool …`` for a tool call.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import pytest
from harness import Gateway, GatewayFactory
from phone_kit import LINES, SECRET, Line, until, utterance

from fakes.openai_realtime.server import FakeRealtimeServer
from gateway.audio import g711

T = TypeVar("T")
LONG = " ".join(f"word{n}" for n in range(40))  # 4 s of speech from the fake


@pytest.fixture(params=sorted(LINES))
async def line(request: pytest.FixtureRequest) -> AsyncIterator[Line]:
    async with LINES[request.param]() as opened:
        yield opened


async def phone_gateway(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, line: Line, **settings: Any
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "openai",
        "openai_ws_url": fake.ws_url,
        "openai_api_key": "sk-test",
        "phone_greeting": f"/say {LONG[:59]}",  # about a second of speech
        **line.settings(SECRET),
        **settings,
    }
    return await gateway_factory(**options)


async def within(waiting: Awaitable[T], seconds: float = 10) -> T:
    """What the fake or a simulator waits for, bounded: a missing event fails, never hangs."""
    return await asyncio.wait_for(waiting, seconds)


def call_id() -> str:
    return str(uuid.uuid4())


async def answered(gateway: Gateway, line: Line) -> str:
    status, document = await line.answer(gateway)
    assert status == 200, document
    return document


async def upstream(fake: FakeRealtimeServer) -> Any:
    """The fake's connection of the call's session, once the call has opened it."""
    await until(lambda: bool(fake.connections), 10, "the upstream connection")
    return fake.connections[0]


def reply_audio(fake: FakeRealtimeServer) -> bytes:
    conn = fake.connections[0]
    return b"".join(
        base64.b64decode(delta["delta"]) for delta in conn.sent("response.output_audio.delta")
    )


async def test_a_call_is_greeted_and_its_spoken_turn_answered(
    line: Line, fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await phone_gateway(gateway_factory, fake, line)
    async with line.call(await answered(gateway, line)) as caller:
        bytes_per_ms = caller.rate // 1000 * 2
        conn = await upstream(fake)
        await within(conn.wait_for("response.done", direction="out"))
        greeting = reply_audio(fake)
        greeting_ms = len(greeting) // (8 if line.passes_through else 48)  # µ-law, or 24 kHz
        # The whole greeting is heard (played at real time) before the caller speaks.
        await until(
            lambda: len(caller.heard_pcm()) // bytes_per_ms >= greeting_ms, 10, "the greeting"
        )
        update = conn.received("session.update")[0]["session"]["audio"]
        session = next(iter(gateway.manager.sessions.values()))
        if line.passes_through:
            # G.711 on the line: the provider's bytes reach the caller as they were sent.
            assert update["input"]["format"] == {"type": "audio/pcmu"}
            assert caller.heard_line()[: len(greeting)] == greeting  # type: ignore[attr-defined]
            assert session.profile.encoding == "pcmu"
        else:
            assert update["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
            assert session.profile.encoding == "pcm16"
            assert session.profile.input_rate == session.profile.output_rate == line.line_rate
        heard_before = len(caller.heard_pcm())
        spoken = utterance(caller.rate)
        await caller.say(spoken)
        # The caller's turn reaches the model, which answers; the answer is heard.
        await within(conn.wait_for("input_audio_buffer.speech_stopped", direction="out"))
        await until(lambda: len(conn.sent("response.done")) >= 2, 10, "the reply to the turn")
        await until(
            lambda: len(caller.heard_pcm()) - heard_before >= 200 * bytes_per_ms, 10, "the reply"
        )
        if line.passes_through:
            # The caller's µ-law reached the provider as the carrier sent it (the fake's log).
            appended = b"".join(
                base64.b64decode(e["audio"]) for e in conn.received("input_audio_buffer.append")
            )
            assert g711.ulaw_encode(spoken)[:3200] in appended
        await caller.hang_up()
        await until(lambda: not gateway.manager.sessions, 5, "the session to end")


async def test_a_tool_call_is_approved_on_the_keypad(
    line: Line, fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    arguments = json.dumps({"title": "Dentist", "start": "2030-01-15T10:00:00+00:00"})
    gateway = await phone_gateway(
        gateway_factory, fake, line, phone_greeting=f"/tool calendar_create_event {arguments}"
    )
    async with line.call(await answered(gateway, line)) as caller:
        pending = ("calendar_create_event", "confirmation_pending")
        await until(lambda: pending in gateway.decisions(), 10, "the confirmation")
        await caller.press("7")  # not an answer: ignored
        await caller.press("1")
        confirmed = ("calendar_create_event", "confirmed")
        await until(lambda: confirmed in gateway.decisions(), 10, "the approval")
        conn = await upstream(fake)
        await within(conn.wait_for("conversation.item.create", direction="in"))
        outputs = [
            e["item"]
            for e in conn.received("conversation.item.create")
            if e["item"]["type"] == "function_call_output"
        ]
        assert outputs, "the tool's result never reached the model"
        await caller.hang_up()


async def test_barge_in_clears_the_carrier_and_cuts_the_reply_at_what_was_heard(
    line: Line, fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await phone_gateway(gateway_factory, fake, line, phone_greeting=f"/say {LONG}")
    async with line.call(await answered(gateway, line)) as caller:
        bytes_per_ms = caller.rate // 1000 * 2
        await until(lambda: len(caller.heard_pcm()) >= 800 * bytes_per_ms, 10, "0.8 s heard")
        assert caller.clears() == 0
        await caller.say(utterance(caller.rate))
        await caller.wait_clear(5)
        heard_ms = len(caller.heard_pcm()) // bytes_per_ms
        conn = await upstream(fake)
        truncate = await within(conn.wait_for("conversation.item.truncate", direction="in"))
        # Cut at what the caller heard (the carrier's played position), not at what was sent:
        # about 4 s of reply were produced, and at most a frame and the pacer's lead were ahead.
        assert truncate["audio_end_ms"] <= heard_ms + 100
        assert truncate["audio_end_ms"] >= heard_ms - 500
        await within(caller.hang_up())


async def test_a_wrongly_signed_webhook_is_refused_and_starts_nothing(
    line: Line, fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await phone_gateway(gateway_factory, fake, line)
    status, body = await line.answer(gateway, signed=False)
    assert status == 403
    assert SECRET not in body
    unconfigured = await phone_gateway(gateway_factory, fake, line, **line.settings(""))
    status, body = await line.answer(unconfigured)
    assert status == 403
    assert gateway.manager.sessions == {}
    assert fake.connections == []


async def test_a_stream_token_opens_one_stream_of_its_own_call(
    line: Line, fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await phone_gateway(gateway_factory, fake, line)
    document = await answered(gateway, line)
    async with line.call(document) as caller:
        await until(lambda: len(caller.heard_pcm()) > 0, 10, "the greeting")
        await caller.hang_up()
    await until(lambda: not gateway.manager.sessions, 5, "the first call to end")
    # The same document again: the carrier replays the stream, or someone who saw it does.
    async with line.call(document) as replayed:
        assert await replayed.wait_closed(5) == 1008
    # A token minted for another call does not open this one.
    async with line.call(document, call_id()) as foreign:
        assert await foreign.wait_closed(5) == 1008
    assert len(fake.connections) == 1


async def test_a_stream_that_stops_without_a_word_ends_its_session(
    line: Line, fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await phone_gateway(gateway_factory, fake, line)
    async with line.call(await answered(gateway, line)) as caller:
        await until(lambda: len(caller.heard_pcm()) > 0, 10, "the greeting")
        session = next(iter(gateway.manager.sessions.values()))
        await caller.drop()
        await within(session.ended.wait())
        assert session.end_reason is not None
        assert session.end_reason.value == "client"
    await until(lambda: not gateway.manager.sessions, 5, "the session to be forgotten")
