"""Telnyx's own ways, over real sockets (its Call Control and media simulators ↔ the gateway ↔
the OpenAI Realtime fake): media frames that arrive out of order reach the model in the order
they were spoken, and a line in A-law (``GATEWAY_TELNYX_CODEC=PCMA``) passes through to OpenAI
untouched (``audio/pcma``), as µ-law does."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, pcm_silence
from phone_kit import TELNYX_API_KEY, until

from fakes.carriers.telnyx import TelnyxCall
from fakes.carriers.telnyx_api import FakeTelnyxApi
from fakes.carriers.telnyx_calls import CallScript
from fakes.carriers.telnyx_media import OutOfOrder, StreamOptions
from fakes.openai_realtime.server import FakeRealtimeServer
from gateway.audio import g711

GREETING = "/say " + " ".join(f"word{n}" for n in range(10))


@pytest.fixture
async def api() -> AsyncIterator[FakeTelnyxApi]:
    async with FakeTelnyxApi(api_key=TELNYX_API_KEY) as fake_api:
        yield fake_api


async def telnyx_gateway(
    factory: GatewayFactory, fake: FakeRealtimeServer, api: FakeTelnyxApi, **settings: Any
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "openai",
        "openai_ws_url": fake.ws_url,
        "openai_api_key": "sk-test",
        "phone_greeting": GREETING,
        "telnyx_public_key": api.public_key,
        "telnyx_api_key": TELNYX_API_KEY,
        "telnyx_api_base": api.base_url,
    }
    return await factory(**(options | settings))


async def ring(gateway: Gateway, api: FakeTelnyxApi, script: CallScript) -> TelnyxCall:
    call = await api.ring(webhook_url=f"{gateway.url}/telnyx/events", script=script)
    return await api.wait_for_stream(call.call_control_id, timeout=10)


def appended(fake: FakeRealtimeServer) -> bytes:
    conn = fake.connections[0]
    return b"".join(
        base64.b64decode(e["audio"]) for e in conn.received("input_audio_buffer.append")
    )


def numbered_frames(count: int) -> bytes:
    """``count`` 20 ms frames of 8 kHz PCM, each a different level: their order is audible."""
    frames = [int(200 + 150 * n).to_bytes(2, "little", signed=True) * 160 for n in range(count)]
    return b"".join(frames)


async def test_frames_out_of_order_reach_the_model_in_the_order_spoken(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory, api: FakeTelnyxApi
) -> None:
    gateway = await telnyx_gateway(gateway_factory, fake, api, phone_greeting="")
    shuffled = StreamOptions(realtime=False, out_of_order=OutOfOrder(window=3, seed=7))
    stream = await ring(gateway, api, CallScript(stream=shuffled))
    speech = numbered_frames(40)
    await stream.speak(speech)
    await stream.speak(pcm_silence(200, rate=8000))
    sent = g711.ulaw_encode(speech)
    await until(lambda: bool(fake.connections) and sent in appended(fake), 10, "all 40 frames")
    # Every frame reached the model once, in the order spoken (µ-law passes through as it is).
    assert appended(fake).count(sent[:160]) == 1
    sent_order = [m for m in stream.sent if m.get("event") == "media"]
    chunks = [int(m["media"]["chunk"]) for m in sent_order]
    assert chunks != sorted(chunks), "the simulator sent the frames in order: no fault"
    await stream.hang_up()


async def test_an_a_law_line_passes_through_to_openai_untouched(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory, api: FakeTelnyxApi
) -> None:
    gateway = await telnyx_gateway(gateway_factory, fake, api, telnyx_codec="PCMA")
    stream = await ring(gateway, api, CallScript(call_codec="PCMA"))
    await until(lambda: bool(fake.connections), 10, "the upstream")
    conn = fake.connections[0]
    await asyncio.wait_for(conn.wait_for("response.done", direction="out"), 10)
    update = conn.received("session.update")[0]["session"]["audio"]
    assert update["input"]["format"] == update["output"]["format"] == {"type": "audio/pcma"}
    produced = b"".join(
        base64.b64decode(d["delta"]) for d in conn.sent("response.output_audio.delta")
    )
    await until(lambda: len(stream.heard()) >= len(produced), 10, "the greeting played")
    assert stream.heard()[: len(produced)] == produced  # A-law, byte for byte
    speech = numbered_frames(10)
    await stream.speak(speech)
    sent = g711.alaw_encode(speech)
    await until(lambda: sent in appended(fake), 10, "the caller's A-law at the model")
    session = next(iter(gateway.manager.sessions.values()))
    assert session.profile.encoding == "pcma"
    await stream.hang_up()
