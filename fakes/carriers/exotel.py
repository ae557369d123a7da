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
to 100 000 bytes, multiples of 320).

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
import binascii
import contextlib
import socket
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

import aiohttp
import orjson

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


@dataclass(frozen=True, slots=True)
class Received:
    """One message the gateway sent, with the ``time.monotonic()`` it arrived at."""

    at: float
    data: str | bytes = field(repr=False)

    @property
    def message(self) -> dict[str, Any]:
        """Its JSON object (empty for a binary message or a text that is not an object)."""
        if isinstance(self.data, str):
            with contextlib.suppress(orjson.JSONDecodeError):
                parsed = orjson.loads(self.data)
                if isinstance(parsed, dict):
                    return parsed
        return {}

    @property
    def event(self) -> str | None:
        value = self.message.get("event")
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Heard:
    """Audio the caller heard (PCM16 at the line's rate) and when it finished playing."""

    at: float
    pcm: bytes = field(repr=False)


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


class ExotelCall:
    """One call's stream, Exotel's end. Build it with ``open``."""

    def __init__(
        self, ws: aiohttp.ClientWebSocketResponse, session: aiohttp.ClientSession, setup: _Setup
    ) -> None:
        self.call_sid, self.stream_sid = setup.call_sid, setup.stream_sid
        self.encoding, self.rate = setup.encoding, setup.rate
        self.chunk_pcm_bytes = setup.rate // 1000 * 2 * CHUNK_MS
        self.received: list[Received] = []
        self.heard: list[Heard] = []
        self.echoed_marks: list[tuple[float, str]] = []  # (when, name)
        self.violations: list[str] = []
        self.chunk_sizes: list[int] = []  # of each media payload received, in wire bytes
        self._ws, self._session = ws, session
        self._playback, self._marks_on_clear = setup.playback, setup.marks_on_clear
        self._queue: deque[_Chunk | str] = deque()  # audio to play, and mark names
        self._plays_until = 0.0  # when the last queued audio ends
        self._sequence = self._chunks_sent = 0  # messages sent, media messages sent
        self._ended = False
        self._news = asyncio.Event()  # set whenever something arrived, played or closed
        self._wake = asyncio.Event()  # set when the queue changed
        self._send_lock = asyncio.Lock()
        self._tasks = [asyncio.create_task(self._read())]
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
        session = aiohttp.ClientSession()
        try:
            ws = await session.ws_connect(url, autoclose=False, max_msg_size=0)
        except BaseException:
            await session.close()
            raise
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
        step, start = self.chunk_pcm_bytes, time.monotonic()
        for n, i in enumerate(range(0, len(pcm), step)):
            if realtime:
                await asyncio.sleep(max(start + n * CHUNK_MS / 1000 - time.monotonic(), 0))
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
        self._ended = True
        await self._stop_tasks()
        await self._ws.close()
        self._news.set()

    async def vanish(self) -> None:
        """Fault: the stream ends with no ``stop`` and no WebSocket close (a network drop)."""
        self._ended = True
        await self._stop_tasks()
        sock = self._ws.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        await self._session.close()
        self._news.set()

    async def send_odd_payload(self, n_bytes: int = 3201) -> None:
        """Fault: one ``media`` message whose payload is ``n_bytes`` (odd: half a sample)."""
        await self._send_media(b"\x01" * n_bytes, encode=False)

    async def send_raw(self, message: str | bytes) -> None:
        async with self._send_lock:
            if isinstance(message, bytes):
                await self._ws.send_bytes(message)
            else:
                await self._ws.send_str(message)

    async def close(self) -> None:
        """Hang up if not done yet, and release the client session."""
        if not self._ended and not self._ws.closed:
            await self.hang_up()
        await self._stop_tasks()
        await self._session.close()

    # What the gateway sent ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._ws.closed

    @property
    def close_code(self) -> int | None:
        return self._ws.close_code

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
        await self._until(lambda: len(self.received_events(event)) >= count, timeout_s)
        return self.received_events(event)[count - 1]

    async def wait_heard(self, ms: int, timeout_s: float) -> None:
        """Until the caller has heard ``ms`` of audio."""
        await self._until(lambda: len(self.heard_pcm()) >= ms * self.rate // 1000 * 2, timeout_s)

    async def wait_echoed(self, name: str, timeout_s: float) -> float:
        """Until the mark ``name`` has been echoed; the ``time.monotonic()`` it was."""
        await self._until(lambda: any(n == name for _, n in self.echoed_marks), timeout_s)
        return next(at for at, n in self.echoed_marks if n == name)

    async def wait_played_out(self, timeout_s: float) -> None:
        """Until everything received has played (or been cleared), marks echoed."""
        await self._until(lambda: not self._queue, timeout_s)

    async def wait_closed(self, timeout_s: float) -> None:
        """Until the gateway closed the socket."""
        await self._until(lambda: self._ws.closed, timeout_s)

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

    async def _until(self, done: Callable[[], bool], timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s):
            while not done():
                self._news.clear()
                await self._news.wait()

    def _decoded(self, message: dict[str, Any]) -> bytes:
        try:
            payload = base64.b64decode(message["media"]["payload"], validate=True)
        except (KeyError, TypeError, binascii.Error, ValueError):
            return b""
        return ulaw_decode(payload) if self.encoding == "pcmu" else payload[: len(payload) // 2 * 2]

    async def _read(self) -> None:
        async for msg in self._ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                await self._on_text(msg.data)
            elif msg.type == aiohttp.WSMsgType.BINARY:
                self.received.append(Received(time.monotonic(), msg.data))
                self.violations.append(f"a binary message of {len(msg.data)} bytes")
            self._news.set()
        if not self._ended:
            with contextlib.suppress(ConnectionError):
                await self._ws.close()  # the gateway closed: answer its close (no autoclose)
        self._news.set()

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
                mark = message.get("mark")
                name = mark.get("name") if isinstance(mark, dict) else None
                if not isinstance(name, str) or not name:
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
        media = message.get("media")
        payload = media.get("payload") if isinstance(media, dict) else None
        try:
            audio = base64.b64decode(payload if isinstance(payload, str) else "-", validate=True)
        except (binascii.Error, ValueError):
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
            self._news.set()

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


# The applet's dynamic URL -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnswerRequest:
    """The fields of the phone core's ``WebhookRequest`` but ``now`` (headers in lower case)."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes = field(repr=False)


def answer_request(
    url: str,
    *,
    secret: str | None,
    call_sid: str,
    via: Literal["query", "basic"] = "query",
) -> AnswerRequest:
    """The GET Exotel makes to the applet's URL ``url`` (the call's details in the query), with
    ``secret`` (None: none) as the ``secret`` query parameter the operator put in that URL, or
    as HTTP basic credentials (``via="basic"``, user ``exotel``)."""
    query = {"CallSid": call_sid, "CallFrom": "09876543210", "CallTo": "08047491899"}
    query["Direction"] = "incoming"
    headers: dict[str, str] = {}
    if secret is not None and via == "query":
        query["secret"] = secret
    elif secret is not None:
        headers["authorization"] = aiohttp.encode_basic_auth("exotel", secret)
    return AnswerRequest(
        "GET", f"{url}{'&' if '?' in url else '?'}{urlencode(query)}", headers, b""
    )


def wrongly_signed_answer_request(
    url: str, *, call_sid: str, via: Literal["query", "basic"] = "query"
) -> AnswerRequest:
    """Fault: the same request with a secret that is not the gateway's."""
    return answer_request(
        url, secret="not-the-answer-secret-0123456789", call_sid=call_sid, via=via
    )


async def fetch_stream_url(
    url: str, *, secret: str | None, call_sid: str, via: Literal["query", "basic"] = "query"
) -> str:
    """Call the applet's URL as Exotel does and return the ``url`` it answers (the stream's).
    Raises ``aiohttp.ClientResponseError`` for a status that is not 200, ``ValueError`` for a
    body that is not ``{"url": "ws(s)://…"}``."""
    request = answer_request(url, secret=secret, call_sid=call_sid, via=via)
    async with (
        aiohttp.ClientSession() as session,
        session.get(request.url, headers=request.headers) as response,
    ):
        response.raise_for_status()
        document = orjson.loads(await response.read())
    stream_url = document.get("url") if isinstance(document, dict) else None
    if not isinstance(stream_url, str) or not stream_url.startswith(("ws://", "wss://")):
        raise ValueError('the answer is not {"url": "ws(s)://…"}')
    return stream_url
