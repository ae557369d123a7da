"""The Twilio Media Streams bridge under faults: each test showed a bug found in a review and
failed before its fix.

Real sockets: the simulated Twilio client of ``test_gateway_twilio`` ↔ the gateway ↔ the OpenAI
Realtime fake. Faults are injected through the public transport factory (``DelegatingTransport``).
Monkeypatched, and only in the tests that say so: the play-out limit (to keep a test short) and
a pass-through wrapper around the public ``play_out`` (to know when it started); logs are read
with structlog's ``capture_logs``. The second half drives the ``PhoneBridge`` of a Twilio call
alone, without sockets.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
import orjson
import pytest
from harness import DelegatingTransport, GatewayFactory, pcm_silence, pcm_tone
from structlog.testing import capture_logs
from test_gateway_twilio import AUTH_TOKEN, CALL_SID, call, twilio_gateway, twilio_rest

from fakes.openai_realtime.server import FakeRealtimeServer
from gateway.config import Settings
from gateway.edges.phone.bridge import PhoneBridge
from gateway.edges.phone.routes import PLAY_OUT_S
from gateway.edges.phone.wire import Digit, Played
from gateway.edges.twilio.signature import twilio_signature
from gateway.edges.twilio.wire import TWILIO_LINE, TwilioSpeaker
from gateway.protocol import (
    EndReason,
    ResponseDone,
    ResponseStarted,
    ResponseStatus,
    ServerEvent,
    SessionEnded,
)
from gateway.protocol.client_events import SessionStart
from gateway.providers import make_transport
from gateway.session.client_output import ClientOutput
from transports.base import ToolResult, Transport

STOP = {"accountSid": "AC0123", "callSid": CALL_SID}


async def within(awaitable: Awaitable[Any], seconds: float) -> bool:
    """Whether ``awaitable`` finishes within ``seconds`` (it is cancelled otherwise)."""
    try:
        await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        return False
    return True


class HeldToolResults(DelegatingTransport):
    """Tool results reach the model only once the test says so: the tool batch stays running,
    so the session holds the tool response's ``response.done`` back meanwhile."""

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        self.holding.set()
        await self.release.wait()
        await super().send_tool_results(results)


class CrashOnText(DelegatingTransport):
    """An upstream whose ``send_text`` fails unexpectedly (as in test_gateway_errors)."""

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)
        self.crashed = asyncio.Event()

    async def send_text(self, text: str) -> None:
        self.crashed.set()
        raise RuntimeError("injected transport bug")


class CrashOnFirstAudio(DelegatingTransport):
    """An upstream whose first ``send_audio`` fails unexpectedly, then works."""

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)
        self.crashed = False

    async def send_audio(self, pcm: bytes) -> None:
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("injected transport bug")
        await super().send_audio(pcm)


def recording(kind: type[DelegatingTransport], made: list[Any]) -> Any:
    def factory(provider: str, settings: Settings) -> Transport:
        transport = kind(make_transport(provider, settings))
        made.append(transport)
        return transport

    return factory


# -- audio attributed to the wrong response --------------------------------------------------------


async def test_audio_of_a_reply_is_marked_with_its_own_response_id_while_a_tool_runs(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    """The greeting makes a tool-only response R1 whose ``response.done`` the session holds
    until the tool batch has reported (here: until the test releases the results). The caller
    speaks meanwhile and the model answers with R2. R2's audio must be marked (and reported
    in ``audio.playback``) as R2's; the bridge gives it to R1, the head of its deque."""
    made: list[HeldToolResults] = []
    gateway = await twilio_gateway(
        gateway_factory,
        fake,
        transports=recording(HeldToolResults, made),
        twilio_greeting="/tool get_current_time {}",
    )
    client = await call(gateway)
    try:
        conn = await fake.wait_connections(1)
        await asyncio.wait_for(made[0].holding.wait(), 5)  # R1's done is held from here on
        tool_response = (await conn.wait_for("response.done"))["response"]["id"]
        await client.speak(pcm_tone(400, rate=8000) + pcm_silence(600, rate=8000))
        await conn.wait_for("response.output_audio.delta")
        # R2's first mark (only the first: with this bug R2's last frame and mark stay held
        # in R1's open response until R1's done, so a later one may never come).
        mark = (await client.until("mark"))["mark"]["name"]
        spoken = {e["response_id"] for e in conn.sent("response.output_audio.delta")}
        assert tool_response not in spoken
        marked = mark.rsplit(":", 2)[0]
        assert marked in spoken, f"mark {mark!r} names {marked}; the audio came from {spoken}"
    finally:
        made[0].release.set()
        await client.send("stop", stop=STOP)


# -- a call that outlives its stream ---------------------------------------------------------------


async def test_a_stop_during_the_goodbye_ends_the_play_out_at_once(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """END_VOICE_SESSION: the goodbye plays out until its last mark is echoed (at most
    ``PLAY_OUT_S``). If the caller hangs up meanwhile (``stop``, socket closed), no echo
    can ever come: the play-out must end there, not at the limit (30 s in production, during
    which the ended session still counts against ``max_sessions`` and drain)."""
    monkeypatch.setitem(PLAY_OUT_S, EndReason.INTENT.value, 4.0)
    # Instrumentation only (the original runs unchanged): when the handler starts playing out.
    playing_out = asyncio.Event()
    play_out = PhoneBridge.play_out

    async def signalled_play_out(self: PhoneBridge, limit_s: float) -> None:
        playing_out.set()
        await play_out(self, limit_s)

    monkeypatch.setattr(PhoneBridge, "play_out", signalled_play_out)
    async with twilio_rest() as rest:
        gateway = await twilio_gateway(
            gateway_factory,
            fake,
            twilio_greeting="/tool end_voice_session {}",
            twilio_account_sid="AC0123",
            twilio_api_base=rest.base_url,
        )
        client = await call(gateway)
        client.echo_marks = False  # the caller's phone never confirms: it is about to hang up
        await client.until("media")
        session = next(iter(gateway.manager.sessions.values()))
        await asyncio.wait_for(playing_out.wait(), 5)
        assert session.end_reason is EndReason.INTENT
        await client.send("stop", stop=STOP)  # the caller hung up: Twilio stops the stream
        # (Twilio then closes the socket too; not awaited here: the close handshake waits for
        # the handler, which is the thing under test.)
        assert await within(rest.hung_up.wait(), 1.5), "the handler was still waiting for echoes"
        assert gateway.manager.sessions == {}


# -- exceptions ------------------------------------------------------------------------------------


async def test_a_failure_sending_the_greeting_does_not_leak_the_session(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    """``bridge.open`` starts the session, then sends the greeting. If that raises, ``_serve``
    never learns the session (its local is still None), so it is neither ended nor forgotten:
    its upstream stays open and it stays in ``manager.sessions`` for good."""
    made: list[CrashOnText] = []
    gateway = await twilio_gateway(
        gateway_factory, fake, transports=recording(CrashOnText, made), twilio_greeting="/say hi"
    )
    client = await call(gateway)
    conn = await fake.wait_connections(1)
    await asyncio.wait_for(made[0].crashed.wait(), 5)
    # Whether the gateway goes on without a greeting or gives up, the call ends here.
    await client.send("stop", stop=STOP)
    while await client.next() is not None:
        pass
    assert gateway.manager.sessions == {}
    assert await within(conn.closed.wait(), 2), "the upstream connection was left open"


async def test_an_internal_error_on_one_twilio_event_does_not_end_the_call(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    """The session socket turns an exception while handling a client event into an
    ``internal`` error and goes on (test_gateway_errors). The Twilio reader has no such guard:
    the exception ends ``_read`` (unretrieved), ``_serve`` ends the session as if the caller
    had gone, and the call drops."""
    gateway = await twilio_gateway(
        gateway_factory, fake, transports=recording(CrashOnFirstAudio, []), twilio_greeting=""
    )
    client = await call(gateway)
    await fake.wait_connections(1)
    await client.speak(pcm_tone(400, rate=8000) + pcm_silence(600, rate=8000))
    await client.until("media")  # the answer to the caller: the call went on
    await client.send("stop", stop=STOP)


async def test_a_key_pressed_while_the_last_words_play_out_reaches_no_ended_session(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    """Found by the soak (no traceback in any log): a drain ended the call's session while a
    confirmation was pending, and the stream stayed open to play the last words out; the
    caller pressed 1, the bridge handed it to the ended session, whose approval failed
    (``Fenced``: the session's record is ended) and ``phone_event_failed`` logged a
    traceback. Once the session has ended, the caller's keys, audio and mark echoes only serve
    the play-out."""
    arguments = orjson.dumps({"title": "Dentist", "start": "2030-01-15T10:00:00+00:00"}).decode()
    gateway = await twilio_gateway(
        gateway_factory,
        fake,
        twilio_greeting=f"/tool calendar_create_event {arguments}",
        drain_grace_s=0.2,
    )
    client = await call(gateway)
    session = await _only_session(gateway)
    while ("calendar_create_event", "confirmation_pending") not in gateway.decisions():
        await client.next(within=5)
    client.echo_marks = False  # the last words are still playing: the stream stays open
    with capture_logs() as logged:
        draining = asyncio.create_task(gateway.server.drain())
        await asyncio.wait_for(session.ended.wait(), 5)
        await client.send("dtmf", dtmf={"track": "inbound_track", "digit": "1"})
        await client.send("stop", stop=STOP)
        while await client.next(within=10) is not None:
            pass
        await draining
    assert [e for e in logged if e.get("log_level") == "error"] == []
    assert ("calendar_create_event", "confirmed") not in gateway.decisions()


async def _only_session(gateway: Any) -> Any:
    for _ in range(100):
        if gateway.manager.sessions:
            return next(iter(gateway.manager.sessions.values()))
        await asyncio.sleep(0.02)
    raise AssertionError("no session started")


# -- the webhook -----------------------------------------------------------------------------------


async def test_a_draining_gateway_refuses_the_voice_webhook(
    fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    """While draining, ``/twilio/media`` answers 503 (``admit``), but ``/twilio/voice`` still
    hands Twilio TwiML pointing at it: the caller gets a dead call instead of Twilio's
    fallback URL (which a non-2xx answer to the webhook would trigger)."""
    gateway = await twilio_gateway(gateway_factory, fake, public_url="https://gw.example.com")
    gateway.server.admission.draining = True
    form = {"CallSid": CALL_SID, "From": "+15550001111", "To": "+15552223333"}
    signature = twilio_signature(AUTH_TOKEN, "https://gw.example.com/twilio/voice", form)
    async with gateway.http.post(
        f"{gateway.url}/twilio/voice", data=form, headers={"X-Twilio-Signature": signature}
    ) as response:
        assert response.status == 503, await response.text()
    # The stream it would point at is refused indeed.
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await gateway.http.ws_connect(f"{gateway.url}/twilio/media")


# ==================================================================================================
# The bridge alone (no sockets): ``PhoneBridge`` talks to a recording ``Wire`` (what it would send
# Twilio) and a stub session; the session's output goes through the bridge's own ``Outbound``, as
# ``Session.emit`` sends it. (Here rather than in tests/unit/twilio: two test
# modules of the same basename cannot be collected in one run without __init__.py files.)
# ==================================================================================================

BRIDGE_SID = "MZreview"
FRAME = 160  # 20 ms of µ-law at 8 kHz (the session speaks µ-law to the bridge): one frame
FRAME_S = 0.020


class Wire:
    """What the bridge sends Twilio. Marks can be held in flight (a congested socket)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.hold_marks = False
        self.holding = asyncio.Event()  # a mark send is in flight, held
        self.release = asyncio.Event()
        self._changed = asyncio.Condition()

    async def send(self, text: str | bytes) -> None:
        message: dict[str, Any] = orjson.loads(text)
        if message["event"] == "mark" and self.hold_marks:
            self.holding.set()
            await self.release.wait()
        self.sent.append(message)
        async with self._changed:
            self._changed.notify_all()

    def count(self, event: str) -> int:
        return sum(1 for m in self.sent if m["event"] == event)

    def marks(self) -> list[str]:
        return [m["mark"]["name"] for m in self.sent if m["event"] == "mark"]

    async def until(self, done: Callable[[], bool]) -> None:
        async with self._changed:
            await self._changed.wait_for(done)


class StubSession:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.ended = asyncio.Event()

    async def on_client_event(self, event: Any) -> None:
        self.events.append(event)


def twilio_bridge(wire: Wire, clock: Callable[[], float] | None = None) -> PhoneBridge:
    return PhoneBridge(
        wire.send,
        TwilioSpeaker(BRIDGE_SID),
        inbound=TWILIO_LINE,
        greeting=None,
        max_audio_frames=200,
        clock=clock,
    )


async def open_bridge(wire: Wire) -> tuple[PhoneBridge, StubSession]:
    session = StubSession()

    async def start_session(start: SessionStart, outbound: ClientOutput) -> Any:
        return session

    bridge = twilio_bridge(wire)
    await bridge.open(start_session, None)
    return bridge, session


def emit(bridge: PhoneBridge, event: ServerEvent) -> None:
    """A session event, queued as ``Session.emit`` queues it (a response's end after audio)."""
    ordered = isinstance(event, ResponseDone | SessionEnded)
    bridge.outbound.event(event, after_audio=ordered)


def started(response_id: str) -> ServerEvent:
    return ResponseStarted(response_id=response_id)


def done(response_id: str) -> ServerEvent:
    return ResponseDone(response_id=response_id, status=ResponseStatus.COMPLETED, text="")


async def written(bridge: PhoneBridge, events: int, audio: int) -> None:
    """Yield to the loop until the bridge's writer has handled that many events and chunks."""
    out = bridge.outbound
    for _ in range(10_000):
        if out.sent_events >= events and out.sent_audio >= audio:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"the writer handled {out.sent_events} events, {out.sent_audio} audio")


# -- the pacer -------------------------------------------------------------------------------------


async def test_a_live_reply_is_sent_the_moment_each_frame_exists() -> None:
    """The caller listening live: audio arriving at real time leaves as it arrives. The clock
    never moves while the test waits, so a frame that had to wait for the pacer's timeline would
    never be sent; the only holding back is a frame's own 160 bytes."""
    wire = Wire()
    now = [0.0]
    session = StubSession()

    async def start_session(start: SessionStart, outbound: ClientOutput) -> Any:
        return session

    bridge = twilio_bridge(wire, clock=lambda: now[0])
    await bridge.open(start_session, None)
    try:
        emit(bridge, started("r1"))
        for n in range(1, 51):
            bridge.outbound.audio(bytes([n]) * (FRAME // 2))
            await written(bridge, 1, 2 * n - 1)
            assert wire.count("media") == n - 1  # half a frame: nothing to send yet
            bridge.outbound.audio(bytes([n]) * (FRAME // 2))
            await asyncio.wait_for(wire.until(lambda n=n: wire.count("media") == n), 2)
            now[0] += FRAME_S  # the next 20 ms arrive 20 ms later, as from a live model
        payloads = [m["media"]["payload"] for m in wire.sent if m["event"] == "media"]
        assert [base64.b64decode(p) for p in payloads] == [bytes([n]) * FRAME for n in range(1, 51)]
    finally:
        await bridge.close()


async def test_audio_queued_while_a_last_mark_is_in_flight_is_still_sent() -> None:
    """``_pace``'s idle branch sends a reply's last mark, then ``_wake.clear()`` and waits. If the
    send yields (a congested socket) and the writer queues the next reply meanwhile, that wake
    is lost: the next reply sits in the tracker until some later event wakes the pacer (and if
    none comes, e.g. a goodbye, ``play_out`` waits its full limit)."""
    wire = Wire()
    bridge, _ = await open_bridge(wire)
    try:
        emit(bridge, started("r1"))
        bridge.outbound.audio(b"\x10" * FRAME)
        await asyncio.wait_for(wire.until(lambda: wire.count("media") == 1), 2)
        wire.hold_marks = True
        emit(bridge, done("r1"))  # r1's last mark goes out from the pacer's idle branch: held
        await asyncio.wait_for(wire.holding.wait(), 2)
        emit(bridge, started("r2"))
        bridge.outbound.audio(b"\x20" * FRAME)
        emit(bridge, done("r2"))
        await written(bridge, events=4, audio=2)
        wire.release.set()
        sent = await within(wire.until(lambda: wire.count("media") == 2), 1.0)
        assert sent, f"r2's frame was never sent; the wire has {wire.count('media')} frame(s)"
    finally:
        await bridge.close()


async def test_play_out_waits_for_a_replys_padded_last_frame() -> None:
    """Latent (the session's resampler tail usually clears the flag first): every whole frame
    has been sent and echoed, so ``_played_all`` is set while the reply's last partial frame is
    still held by the tracker; ``response.done`` then queues it (and its mark) but leaves the
    flag set, so ``play_out`` returns before that frame has even been sent."""
    wire = Wire()
    bridge, _ = await open_bridge(wire)
    try:
        emit(bridge, started("r1"))
        bridge.outbound.audio(b"\x10" * (5 * FRAME + FRAME // 2))
        await asyncio.wait_for(wire.until(lambda: wire.count("mark") == 1), 2)
        await bridge.on_carrier(Played(wire.marks()[0]))  # Twilio played 100 ms
        emit(bridge, done("r1"))
        await written(bridge, events=2, audio=1)
        returned = await within(bridge.play_out(30.0), 0.2)
        assert not returned, "play_out returned before the last frame's mark was echoed"
    finally:
        await bridge.close()


# -- logs ------------------------------------------------------------------------------------------


async def test_ignored_dtmf_digits_do_not_reach_the_logs() -> None:
    bridge, session = await open_bridge(Wire())
    try:
        with capture_logs() as logged:
            for digit in "4929":  # no confirmation pending: every key is ignored
                await bridge.on_carrier(Digit(digit))
    finally:
        await bridge.close()
    assert session.events == []
    values = {str(value) for entry in logged for value in entry.values()}
    assert not values & set("4929"), f"logged: {logged}"
