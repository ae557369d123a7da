"""A phone call in G.711 A-law ("pcma", as a carrier such as Telnyx sends it) on OpenAI Realtime,
which takes A-law itself: the caller's bytes reach the provider untouched and the provider's
reach the caller untouched, as a Twilio call's µ-law does (``test_gateway_twilio``).

Real sockets between the gateway and the OpenAI Realtime fake, whose frame log shows what it
got. No client edge opens A-law sessions yet, so the test plays the phone edge's part: it starts
the session through the manager as the Twilio bridge does, with an output that records what the
caller would hear (``session_kit.RecordingOutbound``).
"""

from __future__ import annotations

import base64

from harness import GatewayFactory, pcm_silence, pcm_tone
from session_kit import RecordingOutbound

from fakes.openai_realtime.server import FakeRealtimeServer
from gateway.audio import g711
from gateway.protocol import EndReason
from gateway.protocol.client_events import AudioFormat, BinaryAudio, Mode, SessionStart, TextSend
from gateway.session import SessionUser

FRAME = 160  # 20 ms of 8 kHz G.711, as carriers send it


async def test_a_law_reaches_the_fake_untouched_and_its_reply_reaches_the_caller_as_a_law(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gateway_factory(
        provider="openai", openai_ws_url=fake.ws_url, openai_api_key="sk-test"
    )
    caller = RecordingOutbound()
    start = SessionStart(
        mode=Mode.VOICE,
        provider="openai",
        audio=AudioFormat(input_rate=8000, output_rate=8000, encoding="pcma"),
    )
    session = await gateway.manager.start(start, SessionUser(user_id="caller"), caller)
    try:
        assert session.profile.encoding == "pcma"
        assert session.transport.capabilities.encoding == "pcma"
        conn = await fake.wait_connections(1)
        update = (await conn.wait_for("session.update", direction="in"))["session"]["audio"]
        assert update["input"]["format"] == update["output"]["format"] == {"type": "audio/pcma"}

        # The provider's reply: its A-law deltas are what the caller gets, byte for byte.
        await session.on_client_event(TextSend(text="/say Hello caller"))
        await caller.wait_for("response.done")
        produced = b"".join(
            base64.b64decode(delta["delta"]) for delta in conn.sent("response.output_audio.delta")
        )
        heard = b"".join(caller.audio_frames)
        assert len(heard) >= 10 * FRAME  # 200 ms at least, one byte a sample
        assert heard == produced
        loudest = max(abs(s) for s in memoryview(g711.alaw_decode(heard)).cast("h"))
        assert loudest > 1000, "speech, not A-law silence"

        # The caller speaks: the fake receives the very A-law bytes the caller sent.
        spoken = g711.alaw_encode(pcm_tone(400, rate=8000) + pcm_silence(600, rate=8000))
        for offset in range(0, len(spoken), FRAME):
            await session.on_client_event(BinaryAudio(pcm=spoken[offset : offset + FRAME]))
        appends = 0
        appended = b""
        while spoken[:3200] not in appended:  # 400 ms of the tone, the rest may still be held
            appends += 1
            await conn.wait_for("input_audio_buffer.append", count=appends, direction="in")
            appended = b"".join(
                base64.b64decode(e["audio"]) for e in conn.received("input_audio_buffer.append")
            )
    finally:
        await session.end(EndReason.CLIENT, "the call is over")
        await gateway.manager.forget(session)
