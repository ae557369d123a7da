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

import base64
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Unpack

import aiohttp

from fakes.carriers.json_stream import JsonStream, MarkedPlayout
from fakes.carriers.stream_kit import Pace, Received, media_payload
from gateway.audio.g711 import ulaw_decode, ulaw_encode

__all__ = ["ACCOUNT_SID", "Echo", "Received", "StreamOptions", "TwilioStream", "new_sid"]

ACCOUNT_SID = "AC0123456789abcdef0123456789abcdef"
BYTES_PER_MS = 8  # µ-law at 8 kHz: Twilio plays 8 bytes a millisecond
FRAME_MS = 20
_FRAME_BYTES = FRAME_MS * BYTES_PER_MS


def new_sid(prefix: str) -> str:
    """A Twilio SID: two letters and 32 hex digits (``CA…`` a call, ``MZ…`` a stream)."""
    return prefix + uuid.uuid4().hex


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


class TwilioStream(JsonStream):
    """One call's Media Stream, Twilio's end. ``connect`` (then ``close``) or ``open``."""

    carrier = "Twilio"

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
        super().__init__(ws, MarkedPlayout(self._echo, realtime=realtime))
        self.call_sid = call_sid
        self.stream_sid = stream_sid
        self.account_sid = account_sid
        self.echo_marks = echo_marks
        self.echoes: list[Echo] = []  # marks echoed, in order
        # Who ended the stream: "twilio" (hang_up, drop) or "gateway" (it closed the socket).
        self.closed_by: Literal["twilio", "gateway"] | None = None
        self._http = http  # closed with the stream when the stream made it
        self._sequence = 0
        self._chunk = 0
        self._next_timestamp = 0
        self._started_at = time.monotonic()
        self._received_audio = bytearray()

    @classmethod
    async def connect(cls, url: str, **options: Unpack[StreamOptions]) -> TwilioStream:
        """Open the socket and send ``connected`` and ``start``; ``close`` when done."""
        session = options.get("session")
        account_sid = options.get("account_sid", ACCOUNT_SID)
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
            realtime=options.get("realtime", True),
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
        stream._serve()
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
        ulaw = ulaw_encode(self._narrowband(pcm, rate))
        pace = Pace(FRAME_MS / 1000)
        for n, offset in enumerate(range(0, len(ulaw), _FRAME_BYTES), 1):
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
                await pace.until(n)

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
        stop = {"accountSid": self.account_sid, "callSid": self.call_sid}
        await self._hang_up({"stop": stop} if stop_message else None)

    async def close(self) -> None:
        """Hang up if the stream is still on, stop the playout and the reader."""
        await self._finish()
        if self._http is not None:
            http, self._http = self._http, None
            await http.close()

    # -- what the caller heard --------------------------------------------------------------------

    @property
    def echoed(self) -> list[str]:
        """The names of the marks echoed, in order."""
        return [echo.name for echo in self.echoes]

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

    async def wait_echoed(
        self,
        name: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> Echo:
        """Until mark ``name`` has been echoed (``ConnectionError`` if the stream closes)."""

        def echo() -> Echo | None:
            return next((echo for echo in self.echoes if echo.name == name), None)

        return await self._found(echo, timeout, f"mark {name!r} was echoed")

    # -- Twilio's side of the socket --------------------------------------------------------------

    async def _send(self, event: str, **fields: Any) -> None:
        self._sequence += 1
        message = {"event": event, "sequenceNumber": str(self._sequence), **fields}
        await self._emit({**message, "streamSid": self.stream_sid})

    @staticmethod
    def _event_name(value: object) -> str:
        if not isinstance(value, str):
            raise TypeError("event")
        return value

    async def _on_message(self, event: str, message: dict[str, Any]) -> None:
        if message.get("streamSid") != self.stream_sid:
            self.protocol_errors.append(f"{event} without this stream's streamSid")
        await self._take_media_mark_clear(event, message)

    async def _on_media(self, message: dict[str, Any]) -> None:
        audio = media_payload(message)
        if audio is None:
            await self._refuse("a media message whose media.payload is not base64")
            return
        self._received_audio += audio
        self._playout.media(audio)

    async def _echo(self, name: str, cleared: bool) -> None:
        if not self.echo_marks:  # fault: Twilio never answers the mark
            return
        self.echoes.append(Echo(name, time.monotonic(), cleared))
        await self._send("mark", mark={"name": name})
        self._changes.notify()

    def _ended_by(self, who: Literal["carrier", "gateway"]) -> None:
        self.closed_by = self.closed_by or ("twilio" if who == "carrier" else "gateway")
