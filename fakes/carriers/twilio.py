"""Twilio's side of a bidirectional Media Stream (``<Connect><Stream>``), on a real WebSocket
(aiohttp client), for the phone edge's tests.

Twilio sends ``connected``, then ``start`` (``accountSid``, ``streamSid``, ``callSid``,
``tracks`` ["inbound"], the ``<Parameter>`` values in ``customParameters``, ``mediaFormat``
audio/x-mulaw 8000 Hz mono), ``media`` (track "inbound", ``chunk`` from "1", ``timestamp`` in ms
from the start, base64 µ-law), ``dtmf`` (track "inbound_track", ``digit``), ``mark`` echoes and
``stop`` (``accountSid``, ``callSid``); all but ``connected`` carry ``streamSid`` and a
``sequenceNumber`` from "1" (``start``); numbers are decimal strings. It plays the ``media`` it
is sent in order ("buffered and played in the order received"; here 8 bytes/ms, 20 ms at a time,
or all at once with ``realtime=False``), echoes a ``mark`` once the media before it has played
(at once if none is buffered), and on ``clear`` "empties the audio buffer and sends back
``mark`` messages matching any remaining ``mark`` messages". Off-protocol input is noted in
``protocol_errors`` (Twilio documents no error frame).

For tests: ``received`` / ``wait_for`` (what the gateway sent, and when), ``heard`` /
``heard_pcm`` (what has played), ``received_audio``, ``cleared``, ``echoes`` / ``wait_echoed``,
``closed_by``. Faults: ``hang_up(stop_message=False)`` (no ``stop``), ``drop()`` (no close
handshake), ``echo_marks=False`` (marks never echoed, not even on ``clear``), ``send_raw``.

Guessed: ``media.timestamp``, the audio's position or the time since ``start`` if later (Twilio
streams silence too; this sends what ``speak`` is given); 20 ms frames (the page gives no size).

Sources: https://www.twilio.com/docs/voice/media-streams/websocket-messages,
https://www.twilio.com/docs/voice/media-streams, https://www.twilio.com/docs/voice/twiml/stream

    async with TwilioStream.open(url, call_sid=CALL, token=token) as call:
        await call.speak(pcm16_8k)
        echo = await call.wait_echoed("reply-1", 5)
        assert call.heard_pcm()
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import socket
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, Unpack

import aiohttp

from gateway.audio.g711 import ulaw_decode, ulaw_encode
from gateway.audio.resample import StreamResampler

__all__ = ["ACCOUNT_SID", "Echo", "Received", "StreamOptions", "TwilioStream", "new_sid"]

ACCOUNT_SID = "AC0123456789abcdef0123456789abcdef"
BYTES_PER_MS = 8  # µ-law at 8 kHz: Twilio plays 8 bytes a millisecond
FRAME_MS = 20
_FRAME_BYTES = FRAME_MS * BYTES_PER_MS
_LATE_S = 0.1  # after a stall of the event loop, catch up at most this much


def new_sid(prefix: str) -> str:
    """A Twilio SID: two letters and 32 hex digits (``CA…`` a call, ``MZ…`` a stream)."""
    return prefix + uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class Received:
    """One message the gateway sent, when it arrived (``time.monotonic()``)."""

    at: float
    event: str
    message: dict[str, Any] = field(repr=False)


class StreamOptions(TypedDict, total=False):
    """What ``connect`` and ``open`` take beside the URL (all optional)."""

    call_sid: str | None  # CA… (a new one when absent)
    stream_sid: str | None  # MZ… (a new one when absent)
    token: str | None  # the gateway's stream token: customParameters.token
    account_sid: str  # ACCOUNT_SID when absent
    custom_parameters: Mapping[str, str] | None  # every other <Parameter> of the TwiML
    realtime: bool  # play what the gateway sends at real time (default), or at once
    echo_marks: bool  # False: marks are never echoed (a fault)
    session: aiohttp.ClientSession | None  # else the stream makes (and closes) its own


@dataclass(frozen=True, slots=True)
class Echo:
    """A mark Twilio sent back, when (``time.monotonic()``), and whether a ``clear`` did it."""

    name: str
    at: float
    cleared: bool


@dataclass(frozen=True, slots=True)
class _Mark:
    name: str


class _Playout:
    """The play buffer of one stream: media in order, marks where they were sent."""

    def __init__(self, echo: Callable[[str, bool], Awaitable[None]], *, realtime: bool) -> None:
        self.realtime = realtime
        self.heard = bytearray()  # µ-law played so far
        self.cleared = bytearray()  # µ-law dropped by clear, never played
        self._echo = echo
        self._queue: deque[bytes | _Mark] = deque()
        self._wake = asyncio.Event()
        self._stopped = False

    def media(self, audio: bytes) -> None:
        self._queue.append(audio)
        self._wake.set()

    def mark(self, name: str) -> None:
        self._queue.append(_Mark(name))
        self._wake.set()

    async def clear(self) -> None:
        pending = [item.name for item in self._queue if isinstance(item, _Mark)]
        for item in self._queue:
            if isinstance(item, bytes):
                self.cleared += item
        self._queue.clear()
        for name in pending:
            await self._echo(name, True)

    def queued_ms(self) -> float:
        return sum(len(i) for i in self._queue if isinstance(i, bytes)) / BYTES_PER_MS

    async def settle(self) -> None:
        """Not real time: play everything buffered now."""
        while not self.realtime and self._queue:
            item = self._queue.popleft()
            if isinstance(item, _Mark):
                await self._echo(item.name, False)
            else:
                self.heard += item

    async def run(self) -> None:
        """Real time: 20 ms at a time; a mark is echoed once the media before it has played."""
        next_at: float | None = None
        while not self._stopped:
            if not self._queue:
                next_at = None  # idle: the next media starts at once
                self._wake.clear()
                await self._wake.wait()
                continue
            head = self._queue.popleft()
            if isinstance(head, _Mark):
                await self._echo(head.name, False)
                continue
            piece, rest = head[:_FRAME_BYTES], head[_FRAME_BYTES:]
            if rest:
                self._queue.appendleft(rest)
            self.heard += piece
            now = time.monotonic()
            next_at = max(next_at or now, now - _LATE_S) + len(piece) / BYTES_PER_MS / 1000
            await asyncio.sleep(max(next_at - now, 0))

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()


class TwilioStream:
    """One call's Media Stream, Twilio's end. ``connect`` (then ``close``) or ``open``."""

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        http: aiohttp.ClientSession | None,
        *,
        call_sid: str,
        stream_sid: str,
        account_sid: str,
        realtime: bool,
        echo_marks: bool,
    ) -> None:
        self.ws = ws
        self.call_sid = call_sid
        self.stream_sid = stream_sid
        self.account_sid = account_sid
        self.echo_marks = echo_marks
        self.received: list[Received] = []
        self.sent: list[dict[str, Any]] = []  # what Twilio sent, in order
        self.echoes: list[Echo] = []  # marks echoed, in order
        self.protocol_errors: list[str] = []
        self.closed = asyncio.Event()
        # Who ended the stream: "twilio" (hang_up, drop) or "gateway" (it closed the socket).
        self.closed_by: Literal["twilio", "gateway"] | None = None
        self._http = http  # closed with the stream when the stream made it
        self._playout = _Playout(self._echo, realtime=realtime)
        self._changed = asyncio.Condition()
        self._sequence = 0
        self._chunk = 0
        self._next_timestamp = 0
        self._started_at = time.monotonic()
        self._resamplers: dict[int, StreamResampler] = {}
        self._received_audio = bytearray()
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def connect(cls, url: str, **options: Unpack[StreamOptions]) -> TwilioStream:
        """Open the socket and send ``connected`` and ``start``; ``close`` when done."""
        session = options.get("session")
        account_sid = options.get("account_sid", ACCOUNT_SID)
        realtime = options.get("realtime", True)
        http = session or aiohttp.ClientSession()
        try:
            ws = await http.ws_connect(url, autoping=True)
        except BaseException:
            if session is None:
                await http.close()
            raise
        stream = cls(
            ws,
            None if session is not None else http,
            call_sid=options.get("call_sid") or new_sid("CA"),
            stream_sid=options.get("stream_sid") or new_sid("MZ"),
            account_sid=account_sid,
            realtime=realtime,
            echo_marks=options.get("echo_marks", True),
        )
        parameters = dict(options.get("custom_parameters") or {})
        if (token := options.get("token")) is not None:
            parameters["token"] = token
        await stream._emit({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        start = {
            "accountSid": account_sid,
            "streamSid": stream.stream_sid,
            "callSid": stream.call_sid,
            "tracks": ["inbound"],
            "customParameters": parameters,
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        }
        await stream._send("start", start=start)
        stream._started_at = time.monotonic()
        stream._tasks.append(asyncio.create_task(stream._read()))
        if realtime:
            stream._tasks.append(asyncio.create_task(stream._playout.run()))
        return stream

    @classmethod
    @asynccontextmanager
    async def open(cls, url: str, **options: Unpack[StreamOptions]) -> AsyncIterator[TwilioStream]:
        """``connect`` for the length of a block; hangs up (with ``stop``) if still open."""
        stream = await cls.connect(url, **options)
        try:
            yield stream
        finally:
            await stream.close()

    # -- what the caller does ---------------------------------------------------------------------

    async def speak(self, pcm: bytes, *, rate: int = 8000, paced: bool = False) -> None:
        """Caller audio (PCM16 at 8 or 16 kHz) as 20 ms µ-law ``media`` frames, numbered as
        Twilio numbers them; ``paced`` sends one frame per 20 ms, as a live call does."""
        if rate not in (8000, 16000):
            raise ValueError("speak takes PCM16 at 8000 or 16000 Hz")
        if rate != 8000:
            pcm = self._resamplers.setdefault(rate, StreamResampler(rate, 8000)).process(pcm)
        ulaw = ulaw_encode(pcm)
        next_at = time.monotonic()
        for offset in range(0, len(ulaw), _FRAME_BYTES):
            self._chunk += 1
            elapsed_ms = int((time.monotonic() - self._started_at) * 1000)
            timestamp = max(self._next_timestamp, elapsed_ms)
            self._next_timestamp = timestamp + FRAME_MS
            media = {
                "track": "inbound",
                "chunk": str(self._chunk),
                "timestamp": str(timestamp),
                "payload": base64.b64encode(ulaw[offset : offset + _FRAME_BYTES]).decode(),
            }
            await self._send("media", media=media)
            if paced:
                next_at += FRAME_MS / 1000
                await asyncio.sleep(max(next_at - time.monotonic(), 0))

    async def silence(self, ms: int, *, paced: bool = False) -> None:
        await self.speak(b"\x00\x00" * (8 * ms), paced=paced)

    async def press(self, digit: str) -> None:
        """A key press, as Twilio's ``dtmf`` message."""
        if len(digit) != 1 or digit not in "0123456789*#ABCD":
            raise ValueError(f"not a DTMF key: {digit!r}")
        await self._send("dtmf", dtmf={"track": "inbound_track", "digit": digit})

    async def hang_up(self, *, stop_message: bool = True) -> None:
        """The call ends: ``stop``, then the socket closes. ``stop_message=False`` is the fault
        of a stream that ends with no ``stop``."""
        if self.ws.closed:
            return
        self.closed_by = self.closed_by or "twilio"
        if stop_message:
            stop = {"accountSid": self.account_sid, "callSid": self.call_sid}
            await self._send("stop", stop=stop)
        await self.ws.close()
        await self._wind_down()

    async def drop(self) -> None:
        """Fault: the connection dies with no message and no close handshake."""
        self.closed_by = self.closed_by or "twilio"
        sock = self.ws.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        await self._wind_down()

    async def send_raw(self, data: str | bytes) -> None:
        """Anything at all on the stream (a malformed frame, an event Twilio may add)."""
        await (self.ws.send_bytes(data) if isinstance(data, bytes) else self.ws.send_str(data))

    async def close(self) -> None:
        """Hang up if the stream is still on, stop the playout and the reader."""
        if not self.ws.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.hang_up(), 2.0)
        await self._wind_down()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._http is not None:
            http, self._http = self._http, None
            await http.close()

    # -- what the caller heard --------------------------------------------------------------------

    @property
    def echoed(self) -> list[str]:
        """The names of the marks echoed, in order."""
        return [echo.name for echo in self.echoes]

    def heard(self) -> bytes:
        """The µ-law played to the caller so far (what ``clear`` dropped never plays)."""
        return bytes(self._playout.heard)

    def heard_pcm(self) -> bytes:
        """What the caller heard, as PCM16 at 8 kHz."""
        return ulaw_decode(bytes(self._playout.heard))

    def received_audio(self) -> bytes:
        """Every µ-law payload the gateway sent, played or not."""
        return bytes(self._received_audio)

    def cleared(self) -> bytes:
        """The µ-law that ``clear`` dropped before it played."""
        return bytes(self._playout.cleared)

    def queued_ms(self) -> float:
        """Media received and not yet played."""
        return self._playout.queued_ms()

    def received_events(self, event: str | None = None) -> list[Received]:
        return [r for r in self.received if event is None or r.event == event]

    async def wait_for(
        self,
        event: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
        *,
        count: int = 1,
    ) -> Received:
        """The ``count``-th message of kind ``event`` the gateway sent (counting those already in);
        ``ConnectionError`` if the stream closes first, ``TimeoutError`` after ``timeout``."""
        await self._until(lambda: len(self.received_events(event)) >= count, timeout)
        matches = self.received_events(event)
        if len(matches) < count:
            raise ConnectionError(f"the stream closed before {event} #{count}")
        return matches[count - 1]

    async def wait_echoed(
        self,
        name: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> Echo:
        """Until mark ``name`` has been echoed (``ConnectionError`` if the stream closes)."""
        await self._until(lambda: name in self.echoed, timeout)
        for echo in self.echoes:
            if echo.name == name:
                return echo
        raise ConnectionError(f"the stream closed before mark {name!r} was echoed")

    async def wait_closed(
        self,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> int | None:
        """Until the stream is closed (by the gateway or by us); its close code."""
        await asyncio.wait_for(self.closed.wait(), timeout)
        return self.ws.close_code

    # -- Twilio's side of the socket --------------------------------------------------------------

    async def _until(self, ready: Callable[[], bool], timeout: float) -> None:  # noqa: ASYNC109
        async with self._changed:
            waiting = self._changed.wait_for(lambda: ready() or self.closed.is_set())
            await asyncio.wait_for(waiting, timeout)

    async def _send(self, event: str, **fields: Any) -> None:
        self._sequence += 1
        message = {"event": event, "sequenceNumber": str(self._sequence), **fields}
        await self._emit({**message, "streamSid": self.stream_sid})

    async def _emit(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.send_str(json.dumps(message))

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await self._on_text(msg.data)
                elif msg.type == aiohttp.WSMsgType.BINARY:
                    self.protocol_errors.append("a binary frame (Twilio's stream is JSON text)")
        finally:
            self.closed_by = self.closed_by or "gateway"
            await self._wind_down()

    async def _on_text(self, text: str) -> None:
        try:
            message = json.loads(text)
            event = message["event"]
            if not isinstance(event, str):
                raise TypeError("event")
        except (ValueError, TypeError, KeyError):
            self.protocol_errors.append("a frame that is not a JSON object with an event")
            return
        self.received.append(Received(time.monotonic(), event, message))
        if message.get("streamSid") != self.stream_sid:
            self.protocol_errors.append(f"{event} without this stream's streamSid")
        if event == "media":
            self._on_media(message)
        elif event == "mark":
            mark = message.get("mark")
            name = mark.get("name") if isinstance(mark, dict) else None
            if isinstance(name, str) and name:
                self._playout.mark(name)
            else:
                self.protocol_errors.append("a mark without mark.name")
        elif event == "clear":
            await self._playout.clear()
        else:
            self.protocol_errors.append(f"an event Twilio does not take: {event}")
        await self._playout.settle()
        async with self._changed:
            self._changed.notify_all()

    def _on_media(self, message: Mapping[str, Any]) -> None:
        media = message.get("media")
        payload = media.get("payload") if isinstance(media, dict) else None
        try:
            if not isinstance(payload, str):
                raise ValueError("no payload")
            audio = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            self.protocol_errors.append("a media message whose media.payload is not base64")
            return
        self._received_audio += audio
        self._playout.media(audio)

    async def _echo(self, name: str, cleared: bool) -> None:
        if not self.echo_marks:  # fault: Twilio never answers the mark
            return
        self.echoes.append(Echo(name, time.monotonic(), cleared))
        await self._send("mark", mark={"name": name})
        async with self._changed:
            self._changed.notify_all()

    async def _wind_down(self) -> None:
        self.closed.set()
        self._playout.stop()
        async with self._changed:
            self._changed.notify_all()
