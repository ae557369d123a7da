"""A phone call (Twilio Media Streams, µ-law 8 kHz) on a model alias of OpenAI Realtime, which
takes µ-law as it is, then Gemini Live, which does not: when OpenAI is lost mid-greeting the
call goes on on Gemini. Twilio is told to drop what it buffered of the cut reply (``clear``), the
µ-law passthrough ends there, and the caller hears Gemini, decoded and resampled from then on."""

from __future__ import annotations

import json
from pathlib import Path

from harness import GatewayFactory, pcm_silence, pcm_tone
from test_gateway_twilio import AUTH_TOKEN, LONG, call

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.audio import g711

GEMINI_VOICE = "gemini-2.5-flash-native-audio-preview-09-2025"


async def test_a_call_whose_provider_is_lost_mid_greeting_goes_on_on_the_next(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    models = tmp_path / "models.json"
    targets = [
        {"provider": "openai", "model": "gpt-realtime"},
        {"provider": "gemini", "model": GEMINI_VOICE},
    ]
    models.write_text(json.dumps({"models": {"phone": {"targets": targets}}}))
    async with (
        FakeRealtimeServer(FakeOptions(pace=1.0)) as openai,
        FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs") as gemini,
    ):
        gateway = await gateway_factory(
            models=models,
            openai_ws_url=openai.ws_url,
            openai_api_key="sk-test",
            gemini_base_url=gemini.base_url,
            gemini_ca_file=gemini.ca_file,
            gemini_api_key="test-key",
            twilio_auth_token=AUTH_TOKEN,
            twilio_greeting=f"/say {LONG}",
            upstream_reconnect_backoff_s=0.01,
        )
        client = await call(gateway)
        while len(client.media()) < 25:  # half a second of the greeting, from OpenAI as µ-law
            assert await client.next() is not None
        conn = await openai.wait_connections(1)
        update = conn.received("session.update")[0]["session"]["audio"]
        assert update["input"]["format"] == {"type": "audio/pcmu"}
        await openai.stop()
        cleared = await client.until("clear", within=10)
        before = len(client.media())
        session = next(iter(gateway.manager.sessions.values()))
        assert session.profile.provider == "gemini"
        # The caller hears the fallback: Gemini says the greeting again, as µ-law frames.
        while len(client.media()) < before + 50:
            assert await client.next() is not None
        after = b"".join(client.media()[before:])
        assert all(len(frame) == 160 for frame in client.media())
        loud = sum(abs(s) for s in memoryview(g711.ulaw_decode(after)).cast("h")) / len(after)
        assert loud > 500, "the fallback's speech, not silence"
        # The caller speaks: Gemini hears µ-law decoded and resampled to 16 kHz.
        await client.speak(pcm_tone(400, 8000) + pcm_silence(700, 8000))
        gemini_conn = await gemini.wait_connections(1)
        await gemini_conn.wait_for("realtimeInput", direction="in", timeout=10)
        chunks = [
            chunk
            for message in gemini_conn.received("realtimeInput")
            for chunk in [message["realtimeInput"].get("audio")]
            if chunk is not None
        ]
        assert {chunk["mimeType"] for chunk in chunks} == {"audio/pcm;rate=16000"}
        assert cleared["streamSid"]
        await client.send("stop", stop={"accountSid": "AC0123", "callSid": "CA1"})
