"""A simulated Twilio Media Streams client (real socket) ↔ gateway ↔ the OpenAI Realtime fake.

The client speaks Twilio's protocol exactly: ``connected`` and ``start`` (the token in
``customParameters``), base64 µ-law 8 kHz ``media``, ``mark`` echoes, ``dtmf`` and ``stop``. The
greeting (``GATEWAY_TWILIO_GREETING``) is the caller's first message, so the tests choose what
the fake says first: ``/say …`` for speech, ``/tool …`` for a tool call.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from harness import Gateway, GatewayFactory, pcm_silence, pcm_tone, registry_with_variant

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeRealtimeServer
from gateway.audio import g711
from gateway.edges.twilio.signature import twilio_signature
from gateway.protocol import EndReason

LONG = " ".join(f"word{n}" for n in range(40))  # 4 s of speech from the fake
STREAM_SID = "MZ0123456789abcdef0123456789abcdef"
CALL_SID = "CA0123456789abcdef0123456789abcdef"
AUTH_TOKEN = "twilio-auth-token-for-tests"


@dataclass
class TwilioClient:
    """What Twilio does on a call's stream, and what it received."""

    ws: aiohttp.ClientWebSocketResponse
    received: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    echo_marks: bool = True
    echoed: list[str] = field(default_factory=list)
    chunks: int = 0

    async def send(self, event: str, **body: Any) -> None:
        await self.ws.send_str(json.dumps({"event": event, "streamSid": STREAM_SID, **body}))

    async def begin(self, call_token: str) -> None:
        await self.ws.send_str(
            json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        )
        await self.send(
            "start",
            sequenceNumber="1",
            start={
                "accountSid": "AC0123",
                "streamSid": STREAM_SID,
                "callSid": CALL_SID,
                "tracks": ["inbound"],
                "customParameters": {"token": call_token},
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            },
        )

    async def speak(self, pcm: bytes) -> None:
        """Caller audio, in Twilio's 20 ms µ-law frames, numbered as Twilio numbers them."""
        ulaw = g711.ulaw_encode(pcm)
        for offset in range(0, len(ulaw), 160):
            self.chunks += 1
            media = {
                "track": "inbound",
                "chunk": str(self.chunks),
                "timestamp": str(self.chunks * 20),
                "payload": base64.b64encode(ulaw[offset : offset + 160]).decode(),
            }
            await self.send("media", sequenceNumber=str(self.chunks + 1), media=media)

    async def next(self, within: float = 5.0) -> dict[str, Any] | None:
        """The next message (marks echoed as Twilio does once played), None when closed."""
        msg = await self.ws.receive(timeout=within)
        if msg.type != aiohttp.WSMsgType.TEXT:
            return None
        event: dict[str, Any] = json.loads(msg.data)
        self.received.append((time.monotonic(), event))
        if event["event"] == "mark" and self.echo_marks:
            self.echoed.append(event["mark"]["name"])
            await self.send("mark", mark=event["mark"])
        return event

    async def until(self, kind: str, within: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while True:
            event = await self.next(max(deadline - time.monotonic(), 0.01))
            assert event is not None, f"stream closed while waiting for {kind}"
            if event["event"] == kind:
                return event

    def media(self) -> list[bytes]:
        return [
            base64.b64decode(e["media"]["payload"])
            for _, e in self.received
            if e["event"] == "media"
        ]


@dataclass
class TwilioRest:
    """A stand-in for Twilio's REST API: the calls it was asked to hang up."""

    base_url: str
    # (path, form fields, Authorization header) per request
    hangups: list[tuple[str, dict[str, str], str]] = field(default_factory=list)
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)


@asynccontextmanager
async def twilio_rest() -> AsyncIterator[TwilioRest]:
    rest = TwilioRest("")

    async def calls_api(request: web.Request) -> web.Response:
        form = {key: str(value) for key, value in (await request.post()).items()}
        rest.hangups.append((request.path, form, request.headers.get("Authorization", "")))
        rest.hung_up.set()
        return web.json_response({"status": "completed"})

    api = web.Application()
    api.router.add_post("/2010-04-01/Accounts/{sid}/Calls/{call}.json", calls_api)
    runner = web.AppRunner(api)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    rest.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield rest
    finally:
        await runner.cleanup()


async def twilio_gateway(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, **settings: Any
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "openai",
        "openai_ws_url": fake.ws_url,
        "openai_api_key": "sk-test",
        "twilio_auth_token": AUTH_TOKEN,
        "twilio_greeting": "/say Hello caller",
        **settings,
    }
    return await gateway_factory(**options)


async def call(gateway: Gateway, call_token: str | None = None) -> TwilioClient:
    ws = await gateway.http.ws_connect(f"{gateway.url}/twilio/media")
    client = TwilioClient(ws)
    if call_token is None:  # what the webhook would hand Twilio for this call
        call_token = gateway.server.admission.stream_token(CALL_SID)
    await client.begin(call_token)
    return client


# -- the webhook -----------------------------------------------------------------------------------


async def test_the_voice_webhook_checks_the_signature_and_answers_twiml(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await twilio_gateway(gateway_factory, fake, public_url="https://gw.example.com")
    form = {"CallSid": CALL_SID, "From": "+15550001111", "To": "+15552223333"}
    url = "https://gw.example.com/twilio/voice"
    good = twilio_signature(AUTH_TOKEN, url, form)
    async with gateway.http.post(
        f"{gateway.url}/twilio/voice", data=form, headers={"X-Twilio-Signature": good}
    ) as response:
        assert response.status == 200
        assert response.content_type == "text/xml"
        twiml = ET.fromstring(await response.text())
    stream = twiml.find("./Connect/Stream")
    assert stream is not None
    assert stream.get("url") == "wss://gw.example.com/twilio/media"
    parameter = stream.find("Parameter")
    assert parameter is not None
    assert parameter.get("name") == "token"
    call_token = parameter.get("value")
    assert call_token
    # When the stream ends from the gateway's side, Twilio goes on to say the farewell.
    assert [(v.tag, v.text) for v in twiml][1:] == [
        ("Say", "Sorry, this call has to end now. Please call again.")
    ]
    # The token it handed out opens the stream.
    client = await call(gateway, call_token)
    await client.until("media")
    await client.send("stop", stop={"accountSid": "AC0123", "callSid": CALL_SID})
    for tampered in ({**form, "From": "+15559999999"}, form):
        signature = "bad" if tampered is form else good
        async with gateway.http.post(
            f"{gateway.url}/twilio/voice", data=tampered, headers={"X-Twilio-Signature": signature}
        ) as response:
            assert response.status == 403


async def test_without_a_twilio_auth_token_the_webhook_is_refused(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await twilio_gateway(gateway_factory, fake, twilio_auth_token=None)
    async with gateway.http.post(f"{gateway.url}/twilio/voice", data={"CallSid": "CA1"}) as r:
        assert r.status == 403
        assert "TWILIO_AUTH_TOKEN" in await r.text()


# -- the media stream ------------------------------------------------------------------------------


async def test_greeting_arrives_as_paced_160_byte_frames_with_marks(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await twilio_gateway(gateway_factory, fake, twilio_greeting=f"/say {LONG[:59]}")
    client = await call(gateway)
    session_update = None
    while True:
        event = await client.next()
        assert event is not None
        if event["event"] == "mark" and len(client.media()) >= 50:
            conn = fake.connections[0]
            session_update = conn.received("session.update")[0]
            break
    frames = client.media()
    assert all(len(frame) == 160 for frame in frames)
    times = [t for t, e in client.received if e["event"] == "media"]
    # Paced at real time (a little ahead at first), not as fast as the fake produced it.
    assert times[-1] - times[0] >= (len(frames) - 5) * 0.020 * 0.8
    marks = [e["mark"]["name"] for _, e in client.received if e["event"] == "mark"]
    assert len(marks) >= len(frames) // 5 - 1
    assert len(set(marks)) == len(marks)
    # G.711 µ-law end to end: the provider's bytes reach the caller as they were sent.
    audio = session_update["session"]["audio"]
    assert audio["input"]["format"] == audio["output"]["format"] == {"type": "audio/pcmu"}
    produced = b"".join(
        base64.b64decode(delta["delta"]) for delta in conn.sent("response.output_audio.delta")
    )
    played = b"".join(frames)
    assert len(played) >= 50 * 160
    assert played == produced[: len(played)]
    session = next(iter(gateway.manager.sessions.values()))
    assert session.profile.input_rate == session.profile.output_rate == 8000
    assert session.profile.encoding == "pcmu"


async def test_barge_in_clears_twilio_and_truncates_at_the_echoed_mark(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await twilio_gateway(gateway_factory, fake, twilio_greeting=f"/say {LONG}")
    client = await call(gateway)
    # Twilio plays 0.5 s, then its echoes lag (the caller's network): marks stop coming back.
    while len(client.media()) < 25:
        await client.next()
    client.echo_marks = False
    while len(client.media()) < 50:
        await client.next()
    last_echo = client.echoed[-1]
    await client.speak(pcm_tone(400, rate=8000) + pcm_silence(600, rate=8000))
    clear = await client.until("clear", within=5)
    cleared_at = time.monotonic()
    assert clear == {"event": "clear", "streamSid": STREAM_SID}
    conn = fake.connections[0]
    truncate = await conn.wait_for("conversation.item.truncate", direction="in")
    # At most 200 ms of the interrupted reply may follow the clear.
    late = [e for t, e in client.received if e["event"] == "media" and t > cleared_at]
    while True:
        try:
            event = await client.next(within=0.3)
        except TimeoutError:
            break
        if event is None or event["event"] != "media":
            break
        late.append(event)
    assert len(late) <= 10
    heard_ms = int(last_echo.split(":")[1])
    assert abs(truncate["audio_end_ms"] - heard_ms) <= 100
    assert truncate["audio_end_ms"] < 900  # not the wall clock (about 1 s had been sent)
    # The caller's µ-law reached the provider as Twilio sent it: no decoding, no resampling.
    spoken = g711.ulaw_encode(pcm_tone(400, rate=8000) + pcm_silence(600, rate=8000))
    appended = b"".join(
        base64.b64decode(e["audio"]) for e in conn.received("input_audio_buffer.append")
    )
    assert spoken[:3200] in appended


async def test_dtmf_1_approves_the_pending_confirmation(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    arguments = json.dumps({"title": "Dentist", "start": "2030-01-15T10:00:00+00:00"})
    gateway = await twilio_gateway(
        gateway_factory, fake, twilio_greeting=f"/tool calendar_create_event {arguments}"
    )
    client = await call(gateway)
    await client.until("mark")  # the model's answer (confirmation required) is playing
    deadline = time.monotonic() + 5
    while ("calendar_create_event", "confirmation_pending") not in gateway.decisions():
        assert time.monotonic() < deadline
        await client.next(within=1)
    await client.send("dtmf", dtmf={"track": "inbound_track", "digit": "1"})
    while ("calendar_create_event", "confirmed") not in gateway.decisions():
        assert time.monotonic() < deadline
        await client.next(within=1)
    await client.send("stop", stop={"accountSid": "AC0123", "callSid": CALL_SID})


async def test_stop_ends_the_session_and_closes_the_stream(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await twilio_gateway(gateway_factory, fake)
    client = await call(gateway)
    await client.until("media")
    session = next(iter(gateway.manager.sessions.values()))
    await client.send("stop", stop={"accountSid": "AC0123", "callSid": CALL_SID})
    while await client.next() is not None:
        pass
    assert client.ws.closed
    assert session.ended.is_set()
    assert session.end_reason is not None
    assert session.end_reason.value == "client"
    assert gateway.manager.sessions == {}


async def test_a_bad_token_closes_the_stream_without_a_session(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await twilio_gateway(gateway_factory, fake)
    client = await call(gateway, "not-a-token")
    assert await client.next() is None
    assert client.ws.close_code == 1008
    assert gateway.manager.sessions == {}
    assert fake.connections == []


async def test_end_voice_session_plays_the_goodbye_then_hangs_up(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    async with twilio_rest() as rest:
        gateway = await twilio_gateway(
            gateway_factory,
            fake,
            twilio_greeting="/tool end_voice_session {}",
            twilio_account_sid="AC0123",
            twilio_api_base=rest.base_url,
        )
        client = await call(gateway)
        while await client.next() is not None:
            pass
    assert client.media()  # the reply after the tool played before the stream closed
    assert rest.hangups == [
        (
            f"/2010-04-01/Accounts/AC0123/Calls/{CALL_SID}.json",
            {"Status": "completed"},
            aiohttp.encode_basic_auth("AC0123", AUTH_TOKEN),
        )
    ]


async def test_without_a_farewell_the_twiml_ends_with_the_stream(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await twilio_gateway(
        gateway_factory, fake, twilio_farewell="", auth="none", twilio_auth_token=None
    )
    async with gateway.http.post(f"{gateway.url}/twilio/voice", data={"CallSid": CALL_SID}) as r:
        twiml = ET.fromstring(await r.text())
    assert [v.tag for v in twiml] == ["Connect"]


async def test_a_call_goes_on_through_the_drain_grace_then_its_stream_ends(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    """A phone call cannot move to another node (its media stream is Twilio's): on SIGTERM it
    is served until GATEWAY_DRAIN_GRACE_S, then its session ends (``shutdown``) and the stream
    closes, which makes Twilio say the TwiML's farewell."""
    gateway = await twilio_gateway(gateway_factory, fake, drain_grace_s=1.5)
    client = await call(gateway)
    await client.until("mark")  # the greeting played
    session = next(iter(gateway.manager.sessions.values()))
    loop = asyncio.get_running_loop()
    began = loop.time()
    draining = asyncio.create_task(gateway.server.drain())
    heard_before = len(client.media())
    await client.speak(pcm_tone(400, rate=8000) + pcm_silence(600, rate=8000))
    while await client.next(within=10) is not None:
        pass
    closed_after = loop.time() - began
    await draining
    assert len(client.media()) > heard_before  # answered while the node drained
    assert 1.5 <= closed_after < 1.5 + 5 + 2  # the grace, at most the last sentence, margin
    assert session.end_reason is EndReason.SHUTDOWN
    assert gateway.manager.sessions == {}


async def test_a_caller_hears_a_holding_line_within_200_ms_of_the_soft_limit(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    """The greeting asks for a 1.5 s tool call: past the voice soft limit (800 ms) the caller
    hears the model's holding line, within 200 ms more, counted from the handler's own start
    (its result carries it) to the first media frame Twilio receives after it."""
    registry = await asyncio.to_thread(
        registry_with_variant, tmp_path, "sleepy", "slow_lookup", timeoutMs=5000
    )
    gateway = await twilio_gateway(
        gateway_factory, fake, registry=registry, twilio_greeting='/tool slow_lookup {"ms":1500}'
    )
    client = await call(gateway)
    outputs: list[dict[str, Any]] = []
    while not outputs:
        event = await client.next()
        assert event is not None
        conn = fake.connections[0]
        outputs = [
            e["item"]
            for e in conn.received("conversation.item.create")
            if e["item"].get("type") == "function_call_output"
        ]
    handler_started = json.loads(outputs[0]["output"])["data"]["started"]
    heard = [at for at, e in client.received if e["event"] == "media" and at > handler_started]
    assert heard, "nothing was played while the tool ran"
    assert 0.75 <= heard[0] - handler_started <= 0.8 + 0.2, heard[0] - handler_started
    await client.send("stop", stop={"accountSid": "AC0123", "callSid": CALL_SID})


async def test_a_call_on_gemini_is_decoded_and_resampled_by_the_session(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    """Gemini Live takes 16 kHz PCM16 and answers at 24 kHz: the session converts µ-law both
    ways, and the caller still gets 160-byte frames of a reply that is not silence."""
    async with FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs") as gemini:
        gateway = await gateway_factory(
            provider="gemini",
            gemini_base_url=gemini.base_url,
            gemini_ca_file=gemini.ca_file,
            gemini_api_key="test-key",
            twilio_auth_token=AUTH_TOKEN,
            twilio_greeting="",
        )
        client = await call(gateway)
        await client.speak(pcm_tone(600, rate=8000) + pcm_silence(800, rate=8000))
        await client.until("media", within=10)
        while len(client.media()) < 10:
            await client.next()
        conn = gemini.connections[0]
        chunks = [
            chunk
            for message in conn.received("realtimeInput")
            for chunk in [message["realtimeInput"].get("audio")]
            if chunk is not None
        ]
    assert {chunk["mimeType"] for chunk in chunks} == {"audio/pcm;rate=16000"}
    sent_ms = sum(len(base64.b64decode(c["data"])) for c in chunks) / 32
    assert 1200 <= sent_ms <= 1400  # 1.4 s spoken at 8 kHz, all of it at 16 kHz (± a block)
    frames = client.media()
    assert all(len(frame) == 160 for frame in frames)
    loudest = max(max(abs(s) for s in memoryview(g711.ulaw_decode(f)).cast("h")) for f in frames)
    assert loudest > 1000
    session = next(iter(gateway.manager.sessions.values()))
    assert session.profile.encoding == "pcmu"
    assert session.transport.capabilities.encoding == "pcm16"
