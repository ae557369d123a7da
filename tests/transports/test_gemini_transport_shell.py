"""GeminiLiveTransport's shell against a scripted stand-in for google-genai.

The stand-in (``FakeGenai``) is injected through the constructor (``client=``): each
``client.aio.live.connect(model=…, config=…)`` yields a session whose ``_ws`` is a ``FakeWS``
fed by the test, so every interleaving is exact. ``FakeWS`` behaves like websockets 15 where it
matters: messages already received are still delivered after our own ``close()`` starts (the
closing handshake), a closed socket raises ``ConnectionClosed`` on ``recv`` and ``send``.
Each test pins a race a review found.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson
from google.genai import types
from transport_kit import Running
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK
from websockets.frames import Close

from transports import events as ev
from transports.base import ToolDeclaration, ToolResult, TransportError, UpstreamConfig
from transports.gemini_live.transport import GeminiLiveTransport, GeminiOptions

VOICE_MODEL = "gemini-2.5-flash-native-audio-preview-09-2025"
TEXT_MODEL = "gemini-live-2.5-flash-preview"

WEATHER = ToolDeclaration(
    "get_weather",
    "Weather for a city.",
    {
        "gemini": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    },
)


class FakeWS:
    """The raw connection the shell uses (``session._ws``)."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
        self.frames: list[dict[str, Any]] = []
        self.closed = False
        self.closing = asyncio.Event()
        self.hold_close: asyncio.Event | None = None  # set: close() waits for the peer
        self.fail_sends = False  # the socket is dead, the reader has not noticed yet
        self.delivered = 0
        self.changed = asyncio.Condition()

    # -- the test's side ---------------------------------------------------------------------

    def push(self, *messages: dict[str, Any] | bytes) -> None:
        for m in messages:
            self.inbox.put_nowait(m if isinstance(m, bytes) else orjson.dumps(m))

    def drop(self, code: int = 1011) -> None:
        self.closed = True
        self.inbox.put_nowait(ConnectionClosedError(Close(code, "fault"), None))

    def received(self, key: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if key in f]

    def audio_bytes(self) -> int:
        return sum(
            len(base64.b64decode(f["realtimeInput"]["audio"]["data"]))
            for f in self.received("realtimeInput")
            if "audio" in f["realtimeInput"]
        )

    async def wait(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(3), self.changed:
            await self.changed.wait_for(predicate)

    # -- the shell's side --------------------------------------------------------------------

    async def recv(self, decode: bool | None = None) -> bytes:
        item = await self.inbox.get()
        if isinstance(item, BaseException):
            self.inbox.put_nowait(item)  # closed for good
            raise item
        async with self.changed:
            self.delivered += 1
            self.changed.notify_all()
        return item

    async def send(self, data: str | bytes) -> None:
        if self.closed or self.fail_sends:
            raise ConnectionClosedError(None, None)
        async with self.changed:
            self.frames.append(orjson.loads(data))
            self.changed.notify_all()

    async def close(self) -> None:
        self.closing.set()
        if self.hold_close is not None:
            await self.hold_close.wait()  # the server's frames sent before our close still come
        if not self.closed:
            self.closed = True
            self.inbox.put_nowait(ConnectionClosedOK(Close(1000, ""), Close(1000, ""), True))


@dataclass
class Conn:
    model: str
    config: types.LiveConnectConfig
    ws: FakeWS = field(default_factory=FakeWS)
    exited: bool = False

    @property
    def handle(self) -> str | None:
        assert self.config.session_resumption is not None
        return self.config.session_resumption.handle


class FakeGenai:
    """Stands in for ``genai.Client``: ``client.aio.live.connect`` as an async context manager."""

    def __init__(self) -> None:
        self.conns: list[Conn] = []
        self.opened = asyncio.Condition()
        self.gate: asyncio.Event | None = None  # set: connect waits for it
        self.entering = asyncio.Event()
        self.failures: list[BaseException] = []  # raised by the next connects, in order
        self.no_setup_complete = 0  # this many connects yield setup_complete None

    @property
    def aio(self) -> FakeGenai:
        return self

    @property
    def live(self) -> FakeGenai:
        return self

    @contextlib.asynccontextmanager
    async def connect(self, *, model: str, config: types.LiveConnectConfig) -> AsyncIterator[Any]:
        self.entering.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            raise self.failures.pop(0)
        conn = Conn(model, config)
        setup: Any = types.LiveServerSetupComplete()
        if self.no_setup_complete:
            self.no_setup_complete -= 1
            setup = None
        async with self.opened:
            self.conns.append(conn)
            self.opened.notify_all()
        try:
            yield SimpleNamespace(_ws=conn.ws, setup_complete=setup, session_id=None)
        finally:
            await conn.ws.close()
            conn.exited = True

    async def connection(self, number: int) -> Conn:
        async with asyncio.timeout(3), self.opened:
            await self.opened.wait_for(lambda: len(self.conns) >= number)
        return self.conns[number - 1]


def options(**changes: Any) -> GeminiOptions:
    values: dict[str, Any] = {
        "api_key": "test-key",
        "voice_model": VOICE_MODEL,
        "text_model": TEXT_MODEL,
        "connect_timeout_s": 2.0,
        "reconnect_initial_s": 0.001,
        **changes,
    }
    return GeminiOptions(**values)


def config(mode: str = "voice", **extra: Any) -> UpstreamConfig:
    return UpstreamConfig(
        mode=mode,  # type: ignore[arg-type]
        instructions="Be brief.",
        tools=[WEATHER],
        session_id="sess_review",
        **extra,
    )


async def start(mode: str = "voice", **option_changes: Any) -> Running:
    sdk = FakeGenai()
    transport = GeminiLiveTransport(options(**option_changes), client=sdk)  # type: ignore[arg-type]
    await transport.connect(config(mode))
    return Running(sdk, transport)


def handle(value: str) -> dict[str, Any]:
    return {"sessionResumptionUpdate": {"newHandle": value, "resumable": True}}


NOT_RESUMABLE = {"sessionResumptionUpdate": {"newHandle": "", "resumable": False}}
TURN_COMPLETE = {"serverContent": {"turnComplete": True}}


def audio(ms: int = 20, data: str | None = None) -> dict[str, Any]:
    if data is None:
        data = base64.b64encode(b"\x01\x00" * (24 * ms)).decode()
    part = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": data}}
    return {"serverContent": {"modelTurn": {"role": "model", "parts": [part]}}}


def tool_call(*ids: str) -> dict[str, Any]:
    calls = [{"id": i, "name": "get_weather", "args": {"city": "Paris"}} for i in ids]
    return {"toolCall": {"functionCalls": calls}}


def result(call_id: str) -> ToolResult:
    return ToolResult(call_id, "get_weather", {"ok": True, "data": {"temp_c": 21}})


async def known_handle(run: Running, conn: Conn, value: str) -> None:
    """Deliver a resumable handle and wait until the reader has taken it."""
    conn.ws.push(handle(value), {"serverContent": {"inputTranscription": {"text": "."}}})
    await run.until(lambda: run.saw(ev.TranscriptDelta))


# -- goAway ---------------------------------------------------------------------------------------


async def test_a_go_away_during_a_reply_resumes_with_the_handle_issued_after_it() -> None:
    # The service sends turnComplete, then a fresh resumable handle
    # (https://ai.google.dev/gemini-api/docs/live-session; the fake does the same). The reader
    # leaves at the first idle moment, i.e. right after turnComplete, and resumes with the handle
    # from before the turn: the resumed session has forgotten the last exchange.
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        c1.ws.push(handle("h1"), NOT_RESUMABLE, audio())
        c1.ws.push({"goAway": {"timeLeft": "30s"}}, audio(), TURN_COMPLETE, handle("h2"))
        c2 = await run.sdk.connection(2)
        assert c2.handle == "h2"
    finally:
        await run.close()


async def test_planned_go_away_swaps_do_not_use_up_the_reconnect_attempts() -> None:
    # A connection lives ~10 min; a session in which no reply completes for a while (the user
    # listens, or only switches modes) is ended "upstream_failed" at the (N+1)-th goAway without
    # even trying, although every swap succeeded.
    run = await start("voice", reconnect_attempts=2)
    try:
        for n in range(1, 4):
            conn = run.sdk.conns[n - 1]
            conn.ws.push(handle(f"h{n}"), {"goAway": {"timeLeft": "30s"}})
            await run.recovered(n)
        assert not run.saw(ev.UpstreamFailed)
        assert len(run.sdk.conns) == 4
    finally:
        await run.close()


# -- update() racing the reader -------------------------------------------------------------------


async def test_an_update_during_a_reconnect_does_not_disarm_the_next_drop() -> None:
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        run.sdk.gate = asyncio.Event()
        run.sdk.entering.clear()
        c1.ws.drop(1011)
        async with asyncio.timeout(3):
            await run.sdk.entering.wait()  # the reader is opening connection 2
        await run.transport.update(instructions="Be terse.")
        run.sdk.gate.set()
        await run.sdk.connection(2)
        # Connection 2 was configured before the update: the switch follows at once.
        c3 = await run.sdk.connection(3)
        await run.recovered(2)
        c3.ws.push(tool_call("fc-1"))
        await run.until(lambda: run.saw(ev.ToolCallsRequested))
        c3.ws.drop(1011)  # an ordinary drop, not taken for the (finished) switch
        c4 = await run.sdk.connection(4)
        await run.recovered(3)
        await run.transport.send_tool_results([result("fc-1")])
        # fc-1 belongs to connection 3: connection 4 must not get it by id (1008 in the wild).
        assert not c4.ws.received("toolResponse")
    finally:
        await run.close()


async def test_a_mode_switch_during_a_reconnect_starts_a_new_session() -> None:
    # On resumption every setup field but the model may change
    # (https://ai.google.dev/gemini-api/docs/live-session); docs/protocol.md 10.7: a new mode is a
    # new session given the conversation as context.
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        await known_handle(run, c1, "h1")
        run.sdk.gate = asyncio.Event()
        run.sdk.entering.clear()
        c1.ws.drop(1011)
        async with asyncio.timeout(3):
            await run.sdk.entering.wait()
        await run.transport.update(mode="text")
        run.sdk.gate.set()
        await run.recovered(1)
        # The connection being opened was configured before update(): voice, AUDIO, handle h1.
        # Nothing reopens it afterwards (the switch flag is left set instead), so the "text"
        # session keeps talking to the voice model; its audio is then dropped by the session.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1), run.sdk.opened:
                await run.sdk.opened.wait_for(
                    lambda: any(c.model == TEXT_MODEL for c in run.sdk.conns)
                )
        text_conns = [c for c in run.sdk.conns if c.model == TEXT_MODEL]
        assert text_conns
        assert text_conns[0].handle is None
    finally:
        await run.close()


async def test_a_tool_call_arriving_while_update_closes_the_socket_is_not_answered() -> None:
    # update() calls connection_lost() and then closes the socket; websockets still delivers what
    # the server sent before it saw our close. A toolCall decoded then is pending on no
    # connection: it runs and its result goes by id to the new connection, which never issued it.
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        c1.ws.hold_close = asyncio.Event()
        switching = asyncio.create_task(run.transport.update(mode="text"))
        async with asyncio.timeout(3):
            await c1.ws.closing.wait()
        c1.ws.push(tool_call("fc-9"))  # was on the wire before the server saw our close
        await c1.ws.wait(lambda: c1.ws.delivered >= 1)
        c1.ws.hold_close.set()
        await switching
        c2 = await run.sdk.connection(2)
        await run.recovered(1)
        await run.transport.send_tool_results([result("fc-9")])
        assert not c2.ws.received("toolResponse")
    finally:
        await run.close()


async def test_the_tail_of_a_reply_cut_by_update_is_not_relayed_as_a_new_response() -> None:
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        c1.ws.push(audio())
        await run.until(lambda: run.saw(ev.AudioDelta))
        c1.ws.hold_close = asyncio.Event()
        switching = asyncio.create_task(run.transport.update(instructions="Be terse."))
        async with asyncio.timeout(3):
            await c1.ws.closing.wait()
        # update() ended gemini_resp_1 (interrupted); the rest of it was already on the wire.
        c1.ws.push(audio(), TURN_COMPLETE)
        await c1.ws.wait(lambda: c1.ws.delivered >= 3)
        c1.ws.hold_close.set()
        await switching
        await run.recovered(1)
        assert [e.response_id for e in run.events if isinstance(e, ev.ResponseStarted)] == [
            "gemini_resp_1"
        ]
    finally:
        await run.close()


async def test_after_a_mode_switch_a_drop_does_not_resume_the_previous_session() -> None:
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        await known_handle(run, c1, "h-voice")
        await run.transport.update(mode="text")
        c2 = await run.sdk.connection(2)
        await run.recovered(1)
        assert c2.handle is None  # a new session on the text model: right
        c2.ws.drop(1011)  # before it issued any handle
        c3 = await run.sdk.connection(3)
        # h-voice is the voice session from before the switch (other model, older state).
        assert c3.handle != "h-voice"
    finally:
        await run.close()


# -- sending while the connection breaks ----------------------------------------------------------


async def test_audio_whose_send_failed_is_replayed_after_the_reconnect() -> None:
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        c1.ws.fail_sends = True  # the socket died; the reader has not seen the close yet
        await run.transport.send_audio(b"\x01\x02" * 1600)  # 100 ms at 16 kHz
        c1.ws.drop(1011)
        c2 = await run.sdk.connection(2)
        await run.recovered(1)
        assert c2.ws.audio_bytes() == 3200
    finally:
        await run.close()


# -- reconnect errors -----------------------------------------------------------------------------


async def test_an_unreachable_host_is_not_taken_for_a_refused_handle() -> None:
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        await known_handle(run, c1, "h1")
        run.sdk.failures = [ConnectionRefusedError(111, "Connect call failed ('10.0.0.7', 10080)")]
        c1.ws.drop(1011)
        c2 = await run.sdk.connection(2)
        assert c2.handle == "h1"  # retried with the handle, not a new session
    finally:
        await run.close()


async def test_a_reconnect_without_setup_complete_is_retried() -> None:
    run = await start("voice", reconnect_attempts=3)
    try:
        run.sdk.no_setup_complete = 1
        run.sdk.conns[0].ws.drop(1011)
        await run.recovered(1)
        assert run.sdk.conns[1].exited  # the odd connection was closed, not leaked
        assert not run.saw(ev.UpstreamFailed)  # 1 of 3 attempts used, yet given up
    finally:
        await run.close()


# -- close ----------------------------------------------------------------------------------------


async def test_close_during_the_first_connect_closes_the_socket() -> None:
    sdk = FakeGenai()
    sdk.gate = asyncio.Event()
    transport = GeminiLiveTransport(options(), client=sdk)  # type: ignore[arg-type]
    connecting = asyncio.create_task(transport.connect(config("voice")))
    async with asyncio.timeout(3):
        await sdk.entering.wait()
    await transport.close()
    sdk.gate.set()
    with contextlib.suppress(TransportError):
        await asyncio.wait_for(connecting, 3)
    assert all(conn.exited for conn in sdk.conns)


# -- malformed server messages --------------------------------------------------------------------


async def test_an_undecodable_audio_chunk_does_not_lose_the_response_start() -> None:
    # _start() opens the response (ResponseStarted in the local list), then decode_bytes raises;
    # the shell drops the whole message, so later events name a response never started.
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        c1.ws.push(audio(data="A"), audio(), TURN_COMPLETE)
        await run.until(lambda: run.saw(ev.ResponseDone))
        started = {e.response_id for e in run.events if isinstance(e, ev.ResponseStarted)}
        for event in run.events:
            if isinstance(event, ev.AudioDelta | ev.ResponseDone):
                assert event.response_id in started
    finally:
        await run.close()


async def test_an_instructions_change_does_not_downgrade_a_pending_mode_switch() -> None:
    run = await start("voice")
    try:
        c1 = run.sdk.conns[0]
        await known_handle(run, c1, "h1")
        run.sdk.gate = asyncio.Event()
        run.sdk.entering.clear()
        c1.ws.drop(1011)
        async with asyncio.timeout(3):
            await run.sdk.entering.wait()
        # Both changes land while the reader is still opening the next connection.
        await run.transport.update(mode="text")
        await run.transport.update(instructions="Be terse.")
        run.sdk.gate.set()
        async with asyncio.timeout(3), run.sdk.opened:
            await run.sdk.opened.wait_for(lambda: any(c.model == TEXT_MODEL for c in run.sdk.conns))
        (text_conn,) = [c for c in run.sdk.conns if c.model == TEXT_MODEL]
        assert text_conn.handle is None  # a new session, never the voice session resumed
    finally:
        await run.close()
