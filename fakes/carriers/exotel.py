"""Exotel's side of a Voicebot applet stream (bidirectional AgentStream), on a real socket
(aiohttp client), for tests. What Exotel documents, done:

- the applet's dynamic URL: a GET with the call's details in the query (``CallSid``, …),
  answered ``{"url": "wss://…"}`` (``fetch_stream_url``, ``answer_request``); that URL's query
  parameters become ``start.custom_parameters`` (at most 3, 256 characters in all, else
  ``ValueError`` unless ``check_parameters=False``), but ``sample-rate`` (8000 or 16000);
- ``{"event": "connected"}``, then ``start`` (``stream_sid``, ``call_sid``, ``custom_parameters``,
  ``media_format``: ``audio/x-raw`` PCM16, or ``audio/x-mulaw`` with ``encoding="pcmu"``);
- the caller: ``media`` of 100 ms at real time (``speak``; Exotel streams all along, silence
  included: speak silence where a test needs it), ``dtmf`` (``press``), ``stop`` then the
  socket closes (``hang_up``);
- what the gateway sends plays at real time (or at once: ``playback="instant"``; ``heard_pcm``);
  a ``mark`` is echoed once the audio before it has played; ``clear`` drops what has not played.
  Marks pending at a ``clear`` (the docs are silent) are echoed at once, as Twilio does, or
  forgotten (``marks_on_clear="drop"``).

Faults: ``vanish`` (no ``stop``, no close: the TCP connection ends), ``send_odd_payload`` (half
a PCM16 sample), ``send_raw``, ``wrongly_signed_answer_request``. What breaks Exotel's format on
the way in is in ``violations``; each payload's size in ``chunk_sizes`` (Exotel asks for 3 200
to 100 000 bytes, multiples of 320). The applet's URL (``answer_request``, ``fetch_stream_url``)
is ``fakes.carriers.exotel_applet``'s, re-exported here.

From https://developer.exotel.com/docs/agentstream/websocket-protocol,
https://developer.exotel.com/docs/agentstream/stream-voicebot-applet,
https://developer.exotel.com/docs/agentstream/stream-voicebot-extension (µ-law, beta),
https://docs.exotel.com/exotel-agentstream/stream-applet (the ``{"url": …}`` answer),
https://support.exotel.com/support/solutions/articles/3000096873-working-with-connect-applet-dynamic-url-

    stream_url = await fetch_stream_url(answer_url, secret=SECRET, call_sid=CALL)
    async with ExotelCall.open(stream_url, call_sid=CALL) as call:
        await call.speak(pcm16_8k)
        await call.wait_for("mark", 5)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

import aiohttp
import orjson

from fakes.carriers.exotel_applet import (
    AnswerRequest,
    answer_request,
    fetch_stream_url,
    wrongly_signed_answer_request,
)
from fakes.carriers.stream_kit import (
    HeardAudio,
    Pace,
    RawReceived,
    RawStream,
    cut,
    mark_name,
    media_payload,
)
from gateway.audio.g711 import ulaw_decode, ulaw_encode
from gateway.audio.resample import StreamResampler

__all__ = [
    "CHUNK_MS",
    "AnswerRequest",
    "ExotelCall",
    "Heard",
    "Received",
    "answer_request",
    "fetch_stream_url",
    "wrongly_signed_answer_request",
]

CHUNK_MS = 100  # Exotel streams the caller's audio "every ~100 ms"
MAX_PARAMETERS, MAX_PARAMETER_CHARS = 3, 256  # Exotel's documented bounds
ACCOUNT_SID = "exotel-account"


class Received(RawReceived):
    """One message the gateway sent, with the ``time.monotonic()`` it arrived at."""

    __slots__ = ()

    @property
    def event(self) -> str | None:
        return self._string("event")


class Heard(HeardAudio):
    """Audio the caller heard (PCM16 at the line's rate) and when it finished playing."""

    __slots__ = ()


@dataclass(slots=True)
class _Chunk:
    pcm: bytes  # PCM16 at the line's rate, whatever the wire's encoding
    starts: float
    ends: float


@dataclass(frozen=True, slots=True)
class _Setup:
    call_sid: str
    stream_sid: str
    encoding: Literal["pcm16", "pcmu"]
    rate: int
    playback: Literal["realtime", "instant"]
    marks_on_clear: Literal["echo", "drop"]


class ExotelCall(RawStream):
    """One call's stream, Exotel's end. Build it with ``open``."""

    def __init__(
        self, ws: aiohttp.ClientWebSocketResponse, session: aiohttp.ClientSession, setup: _Setup
    ) -> None:
        super().__init__(ws, session)
        self.call_sid, self.stream_sid = setup.call_sid, setup.stream_sid
        self.encoding, self.rate = setup.encoding, setup.rate
        self.chunk_pcm_bytes = setup.rate // 1000 * 2 * CHUNK_MS
        self.received: list[Received] = []
        self.heard: list[Heard] = []
        self.echoed_marks: list[tuple[float, str]] = []  # (when, name)
        self.violations: list[str] = []
        self.chunk_sizes: list[int] = []  # of each media payload received, in wire bytes
        self._playback, self._marks_on_clear = setup.playback, setup.marks_on_clear
        self._queue: deque[_Chunk | str] = deque()  # audio to play, and mark names
        self._plays_until = 0.0  # when the last queued audio ends
        self._sequence = self._chunks_sent = 0  # messages sent, media messages sent
        self._wake = asyncio.Event()  # set when the queue changed
        self._tasks.append(asyncio.create_task(self._read()))
        if setup.playback == "realtime":
            self._tasks.append(asyncio.create_task(self._play()))

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        url: str,
        *,
        call_sid: str,
        stream_sid: str | None = None,
        token: str | None = None,
        encoding: Literal["pcm16", "pcmu"] = "pcm16",
        rate: int | None = None,
        playback: Literal["realtime", "instant"] = "realtime",
        marks_on_clear: Literal["echo", "drop"] = "echo",
        check_parameters: bool = True,
    ) -> AsyncIterator[ExotelCall]:
        """Connect to ``url`` (as Exotel does: query string included) and send ``connected``
        and ``start``. ``start.custom_parameters`` are the URL's query parameters (but
        ``sample-rate``), plus ``token`` when given. ``rate``: 8000 unless the URL says
        ``sample-rate=16000``; µ-law is 8000."""
        query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
        url_rate = query.pop("sample-rate", None)
        line_rate = rate or (int(url_rate) if url_rate and url_rate.isdigit() else 8000)
        if encoding == "pcmu" and line_rate != 8000:
            raise ValueError("µ-law is 8000 Hz")
        if token is not None:
            query["token"] = token
        size = (len(query), len(urlencode(query)))
        if check_parameters and (size[0] > MAX_PARAMETERS or size[1] > MAX_PARAMETER_CHARS):
            raise ValueError(f"custom parameters: {size}, over Exotel's documented (3, 256)")
        ws, session = await cls._connect(url)
        sid = stream_sid or "MZ" + uuid.uuid4().hex
        setup = _Setup(call_sid, sid, encoding, line_rate, playback, marks_on_clear)
        call = cls(ws, session, setup)
        try:
            await call.send_raw('{"event":"connected"}')
            pcm16 = encoding == "pcm16"
            media_format = {"encoding": "audio/x-raw" if pcm16 else "audio/x-mulaw"}
            media_format |= {"sample_rate": str(line_rate), "bit_rate": "16" if pcm16 else "8"}
            start: dict[str, Any] = {"stream_sid": sid, "call_sid": call_sid}
            start["account_sid"] = ACCOUNT_SID
            start |= {"from": "+919876543210", "to": "+918047491899", "custom_parameters": query}
            await call._send("start", {"start": {**start, "media_format": media_format}})
            yield call
        finally:
            await call.close()

    # The caller --------------------------------------------------------------------------------

    async def speak(self, pcm: bytes, *, rate: int | None = None, realtime: bool = True) -> None:
        """The caller says ``pcm`` (16-bit LE at ``rate``, by default the line's; resampled to
        it otherwise): 100 ms ``media`` messages in the line's encoding, at real time (or all at
        once: ``realtime=False``). Returns once the last has been sent."""
        if rate is not None and rate != self.rate:
            pcm = StreamResampler(rate, self.rate).process(pcm)
        step, pace = self.chunk_pcm_bytes, Pace(CHUNK_MS / 1000)
        for n, i in enumerate(range(0, len(pcm), step)):
            if realtime:
                await pace.until(n)
            await self._send_media(pcm[i : i + step])

    async def press(self, digit: str, duration_ms: int = 100) -> None:
        """The caller presses a key: one ``dtmf`` message."""
        await self._send("dtmf", {"dtmf": {"digit": digit, "duration": str(duration_ms)}})

    async def hang_up(self, reason: Literal["callended", "stopped"] = "callended") -> None:
        """The call ends: ``stop`` with ``reason``, then Exotel closes the socket."""
        if self._ended:
            return
        stop = {"call_sid": self.call_sid, "account_sid": ACCOUNT_SID, "reason": reason}
        with contextlib.suppress(ConnectionError):
            await self._send("stop", {"stop": stop})
        await self._close_socket()

    async def vanish(self) -> None:
        """Fault: the stream ends with no ``stop`` and no WebSocket close (a network drop)."""
        self._ended = True
        await self._stop_tasks()
        cut(self._ws)
        await self._session.close()
        self._news.notify()

    async def send_odd_payload(self, n_bytes: int = 3201) -> None:
        """Fault: one ``media`` message whose payload is ``n_bytes`` (odd: half a sample)."""
        await self._send_media(b"\x01" * n_bytes, encode=False)

    # What the gateway sent ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._ws.closed

    def received_events(self, event: str | None = None) -> list[Received]:
        """Messages received (those with ``event``: ``media``, ``mark``, ``clear``), in order."""
        return [r for r in self.received if event in (None, r.event)]

    def received_pcm(self) -> bytes:
        """Every byte of audio received as PCM16, played or not."""
        return b"".join(self._decoded(r.message) for r in self.received_events("media"))

    def heard_pcm(self) -> bytes:
        """The audio the caller has heard so far (PCM16; cleared audio is not heard)."""
        return b"".join(heard.pcm for heard in self.heard)

    async def wait_for(self, event: str, timeout_s: float, count: int = 1) -> Received:
        """The ``count``-th message with ``event``, waiting ``timeout_s`` at most."""
        await self._news.until(lambda: len(self.received_events(event)) >= count, timeout_s)
        return self.received_events(event)[count - 1]

    async def wait_heard(self, ms: int, timeout_s: float) -> None:
        """Until the caller has heard ``ms`` of audio."""
        await self._news.until(
            lambda: len(self.heard_pcm()) >= ms * self.rate // 1000 * 2, timeout_s
        )

    async def wait_echoed(self, name: str, timeout_s: float) -> float:
        """Until the mark ``name`` has been echoed; the ``time.monotonic()`` it was."""
        await self._news.until(lambda: any(n == name for _, n in self.echoed_marks), timeout_s)
        return next(at for at, n in self.echoed_marks if n == name)

    async def wait_played_out(self, timeout_s: float) -> None:
        """Until everything received has played (or been cleared), marks echoed."""
        await self._news.until(lambda: not self._queue, timeout_s)

    async def wait_closed(self, timeout_s: float) -> None:
        """Until the gateway closed the socket."""
        await self._news.until(lambda: self._ws.closed, timeout_s)

    # Inside ------------------------------------------------------------------------------------

    async def _send(self, event: str, body: dict[str, Any]) -> None:
        self._sequence += 1
        message = {"event": event, "sequence_number": str(self._sequence)}
        await self.send_raw(
            orjson.dumps({**message, "stream_sid": self.stream_sid, **body}).decode()
        )

    async def _send_media(self, pcm: bytes, *, encode: bool = True) -> None:
        self._chunks_sent += 1
        payload = ulaw_encode(pcm) if encode and self.encoding == "pcmu" else pcm
        media = {"chunk": str(self._chunks_sent), "timestamp": str(self._chunks_sent * CHUNK_MS)}
        media["payload"] = base64.b64encode(payload).decode("ascii")
        await self._send("media", {"media": media})

    def _decoded(self, message: dict[str, Any]) -> bytes:
        payload = media_payload(message) or b""
        return ulaw_decode(payload) if self.encoding == "pcmu" else payload[: len(payload) // 2 * 2]

    async def _on_binary(self, data: bytes) -> None:
        self.received.append(Received(time.monotonic(), data))
        self.violations.append(f"a binary message of {len(data)} bytes")

    async def _on_text(self, text: str) -> None:
        received = Received(time.monotonic(), text)
        self.received.append(received)
        message, event = received.message, received.event
        if not message:
            self.violations.append(f"not a JSON object: {text[:80]!r}")
            return
        if event in ("media", "mark", "clear") and message.get("stream_sid") != self.stream_sid:
            self.violations.append(f"a {event} for stream_sid {message.get('stream_sid')!r}")
        match event:
            case "media":
                self._on_media(message)
            case "mark":
                name = mark_name(message)
                if name is None:
                    self.violations.append("a mark without mark.name")
                elif self._playback == "instant":
                    await self._echo(name)
                else:
                    self._queue.append(name)
                    self._wake.set()
            case "clear":
                await self._clear()
            case _:
                self.violations.append(f"an unknown event: {text[:80]!r}")

    def _on_media(self, message: dict[str, Any]) -> None:
        audio = media_payload(message)
        if audio is None:
            self.violations.append("a media.payload that is not base64")
            return
        self.chunk_sizes.append(len(audio))
        if self.encoding == "pcm16" and len(audio) % 2:
            self.violations.append(f"a media.payload of {len(audio)} bytes: half a sample")
        pcm = self._decoded(message)
        now = time.monotonic()
        if self._playback == "instant":
            self.heard.append(Heard(now, pcm))
            return
        starts = max(now, self._plays_until)
        self._plays_until = starts + len(pcm) / (self.rate * 2)
        self._queue.append(_Chunk(pcm, starts, self._plays_until))
        self._wake.set()

    async def _clear(self) -> None:
        """Drop what has not played; the chunk playing now is heard up to this instant."""
        now = time.monotonic()
        pending = list(self._queue)
        self._queue.clear()
        self._plays_until = now
        for item in pending:
            if isinstance(item, str):
                if self._marks_on_clear == "echo":
                    await self._echo(item)
            elif item.starts < now:
                samples = int(len(item.pcm) // 2 * (now - item.starts) / (item.ends - item.starts))
                self.heard.append(Heard(now, item.pcm[: samples * 2]))
        self._wake.set()

    async def _echo(self, name: str) -> None:
        self.echoed_marks.append((time.monotonic(), name))
        with contextlib.suppress(ConnectionError):
            await self._send("mark", {"mark": {"name": name}})

    async def _play(self) -> None:
        """Each queued chunk is heard at its end time; a mark is echoed when reached."""
        while True:
            self._wake.clear()
            if not self._queue:
                await self._wake.wait()
                continue
            head = self._queue[0]
            delay = 0.0 if isinstance(head, str) else head.ends - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                continue  # re-read the head: a clear may have dropped it
            self._queue.popleft()
            if isinstance(head, str):
                await self._echo(head)
            else:
                self.heard.append(Heard(time.monotonic(), head.pcm))
            self._news.notify()
