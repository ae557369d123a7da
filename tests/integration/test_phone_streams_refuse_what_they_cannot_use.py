"""Bad input on a phone stream, over real sockets: each a clear refusal, nothing else harmed.

A stream no carrier claims is closed (1008) with the reason, before any session exists; one
that says nothing is closed when the start timeout runs out. On a call in progress, a malformed
frame, an unknown event or audio of the wrong length is dropped with a log line, and the call
goes on: the caller's next turn is still answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from harness import Gateway, GatewayFactory
from phone_kit import LINES, SECRET, Line, until, utterance
from structlog.testing import capture_logs

from fakes.openai_realtime.server import FakeRealtimeServer


async def gateway_for(
    factory: GatewayFactory, fake: FakeRealtimeServer, **settings: Any
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "openai",
        "openai_ws_url": fake.ws_url,
        "openai_api_key": "sk-test",
        "phone_greeting": "",
        "session_start_timeout_s": 1.0,
    }
    return await factory(**(options | settings))


async def closed_with(ws: aiohttp.ClientWebSocketResponse) -> tuple[int | None, str]:
    message = await asyncio.wait_for(ws.receive(), 5)
    assert message.type == aiohttp.WSMsgType.CLOSE, message
    return ws.close_code, str(message.extra or "")


@pytest.mark.parametrize(
    "first",
    [
        ['{"event":"connected"}', "not json", "[1,2]", '{"event":"hello"}'],
        [b"\x00\x01" * 320],
        ['{"event":"start","start":{"callSid":"CA1"}}'] * 4,  # Twilio's name, not its shape
    ],
    ids=["junk", "binary audio first", "a start no carrier writes"],
)
async def test_a_stream_no_carrier_claims_is_closed_with_the_reason(
    first: list[str | bytes], fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gateway_for(gateway_factory, fake)
    async with gateway.http.ws_connect(f"{gateway.url}/phone/media") as ws:
        for message in first:
            await (ws.send_bytes(message) if isinstance(message, bytes) else ws.send_str(message))
        code, reason = await closed_with(ws)
    assert code == 1008
    assert "no carrier" in reason or "no start" in reason
    assert gateway.manager.sessions == {}
    assert fake.connections == []


async def test_a_silent_stream_is_closed_when_the_start_timeout_runs_out(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gateway_for(gateway_factory, fake)
    async with gateway.http.ws_connect(f"{gateway.url}/phone/media") as ws:
        code, reason = await closed_with(ws)
    assert code == 1008
    assert "no start in time" in reason


@pytest.fixture(params=["exotel", "vonage", "plivo"])
async def line(request: pytest.FixtureRequest) -> AsyncIterator[Line]:
    async with LINES[request.param]() as opened:
        yield opened


MALFORMED: dict[str, list[str | bytes]] = {
    # Not JSON, not an object, a known event missing its fields, an event nobody knows,
    # audio that is not base64, half a sample of PCM.
    "exotel": [
        "not json",
        "[1]",
        '{"event":"media","stream_sid":"MZ1"}',
        '{"event":"surprise"}',
        '{"event":"media","stream_sid":"MZ1","media":{"chunk":"1","timestamp":"0","payload":"@@@"}}',
        '{"event":"media","stream_sid":"MZ1","media":{"chunk":"1","timestamp":"0","payload":"AAEC"}}',
    ],
    "vonage": [
        "not json",
        "[1]",
        '{"event":"websocket:dtmf"}',
        '{"event":"surprise"}',
        b"\x01\x02\x03",
    ],
    "plivo": [
        "not json",
        "[1]",
        '{"event":"media"}',
        '{"event":"surprise"}',
        '{"event":"media","media":{"payload":"@@@","track":"inbound","timestamp":"0","chunk":"1"}}',
    ],
}


async def test_a_malformed_frame_is_dropped_with_a_log_line_and_the_call_goes_on(
    line: Line, fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gateway_for(gateway_factory, fake, **line.settings(SECRET))
    status, document = await line.answer(gateway)
    assert status == 200
    async with line.call(document) as caller:
        await until(lambda: bool(gateway.manager.sessions), 10, "the call's session")
        with capture_logs() as logged:
            for message in MALFORMED[line.name]:
                await caller.send_raw(message)
            await caller.say(utterance(caller.rate))
            await until(lambda: bool(fake.connections), 10, "the upstream")
            conn = fake.connections[0]
            await asyncio.wait_for(conn.wait_for("response.done", direction="out"), 10)
        events = [entry["event"] for entry in logged]
        dropped = ("phone_bad_message", "phone_audio_ignored", "phone_event_unknown")
        assert sum(event in dropped for event in events) == len(MALFORMED[line.name]), events
        assert "phone_event_failed" not in events
        assert "phone_decode_failed" not in events
        assert len(gateway.manager.sessions) == 1  # still on the call
        await caller.hang_up()
