"""A simulated Plivo call: what Plivo does on an Audio Stream, on a real WebSocket (aiohttp).

As Plivo runs a call: the answer URL gets a signed form POST (``answer_request``, rightly or
wrongly signed); the XML answered is read (``read_answer``: the ``<Stream>`` URL and
``extraHeaders``, refused past Plivo's documented limits); Plivo opens the socket and sends
``start`` (``extra_headers`` hands back the ``extraHeaders`` string), then ``media`` (µ-law
8 kHz in 20 ms frames: the frame length is undocumented, a guess) and ``dtmf``.

What the gateway sends is recorded with a monotonic time (``received``) and acted on:
``playAudio`` is played at real time (``realtime=False``: at once), a ``checkpoint`` is echoed
as ``playedStream`` once the audio before it has played, ``clearAudio`` drops what is unplayed
and answers ``clearedAudio``. Plivo emits ``playedStream`` "only if the preceding events were
played successfully", so a checkpoint pending at a clear is dropped unechoed
(``echo_cleared_checkpoints=True`` echoes it instead). Off-protocol frames from the gateway are
noted in ``protocol_errors``. A call ends with the socket closing (``hang_up``; with
``stop_message=True`` after the ``stop`` event of Plivo's guide and Java SDK, its shape a guess).
Faults: ``drop`` (no message, no close handshake) and ``answer_request(fault=...)``.

Sources: https://www.plivo.com/docs/voice/audio-streaming/audio-streaming,
https://www.plivo.com/docs/voice-agents/audio-streaming/concepts/audio-streaming-reference,
https://docs.plivo.com/docs/voice/audio-streaming/overview-doc,
https://docs.plivo.com/docs/voice/xml/audiostream,
https://plivo.com/docs/voice/xml/the-stream-element/checkpoint-event,
https://support.plivo.com/hc/en-us/articles/32800291247001-Can-I-interrupt-and-clear-buffered-audio,
https://docs.plivo.com/docs/voice/concepts/signature-validation/,
https://docs.plivo.com/docs/voice/xml/request (the answer URL's parameters).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import secrets
import socket
import time
import uuid
import xml.etree.ElementTree as ET
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urlparse, urlunparse

import aiohttp

from gateway.audio.g711 import ulaw_decode, ulaw_encode
from gateway.audio.resample import StreamResampler

__all__ = [
    "AnswerRefused",
    "AnswerRequest",
    "PlivoCall",
    "Received",
    "SigningFault",
    "StreamOrder",
    "answer_request",
    "read_answer",
]

SigningFault = Literal["wrong-token", "unsigned", "no-nonce", "tampered"]
_FRAME_BYTES_PER_MS = 8  # µ-law at 8 kHz
_EXTRA_HEADERS_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789=,")
_CONTENT_TYPES = ("audio/x-l16;rate=8000", "audio/x-l16;rate=16000", "audio/x-mulaw;rate=8000")


# -- the answer URL --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnswerRequest:
    """The request Plivo makes to the answer URL. ``headers`` are named as Plivo names them;
    ``lower_headers`` as ``WebhookRequest`` takes them."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes = field(repr=False)
    form: dict[str, str]

    @property
    def lower_headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}


def answer_request(
    url: str,
    auth_token: str,
    *,
    call_id: str | None = None,
    caller: str = "14155550100",
    number: str = "14155550199",
    nonce: str | None = None,
    fault: SigningFault | None = None,
) -> AnswerRequest:
    """A POST to the answer URL ``url`` for an inbound call, signed as Plivo signs it (V3 with
    ``auth_token``), or with ``fault``: signed with another token, unsigned, without its nonce,
    or a body changed after signing."""
    form = {
        "CallUUID": call_id or str(uuid.uuid4()),
        "From": caller,
        "To": number,
        "Direction": "inbound",
        "CallStatus": "ringing",
    }
    nonce = nonce or str(secrets.randbelow(10**20)).zfill(20)
    key = auth_token + "x" if fault == "wrong-token" else auth_token
    signature = _sign(key, url, form, nonce)
    if fault == "tampered":
        form = form | {"From": "19005550123"}
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if fault != "unsigned":
        headers["X-Plivo-Signature-V3"] = signature
    if fault not in ("unsigned", "no-nonce"):
        headers["X-Plivo-Signature-V3-Nonce"] = nonce
    return AnswerRequest("POST", url, headers, urlencode(form).encode(), form)


def _sign(auth_token: str, url: str, form: Mapping[str, str], nonce: str) -> str:
    """V3, written apart from the gateway's: URL base, sorted query, then ``.`` or ``?``, the
    sorted ``namevalue`` pairs, ``.``, the nonce; HMAC-SHA256, base64."""
    parts = urlparse(url)
    text = urlunparse((parts.scheme, parts.netloc, parts.path, "", "", ""))
    query = parse_qs(parts.query, keep_blank_values=True)
    pairs = [f"{k}={v}" for k in sorted(query) for v in sorted(query[k])]
    if pairs or form:
        text += "?" + "&".join(pairs)
    if pairs and form:
        text += "."
    text += "".join(f"{k}{form[k]}" for k in sorted(form)) + "." + nonce
    digest = hmac.new(auth_token.encode(), text.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class AnswerRefused(ValueError):
    """An answer Plivo would not run as a bidirectional stream."""


@dataclass(frozen=True, slots=True)
class StreamOrder:
    """What the answer's ``<Stream>`` asks of Plivo."""

    url: str
    extra_headers: str
    content_type: str
    keep_call_alive: bool


def read_answer(xml_text: str) -> StreamOrder:
    """The ``<Stream>`` of an answer, checked against the documented attributes."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise AnswerRefused(f"not XML: {exc}") from None
    stream = root.find("Stream")
    if root.tag != "Response" or stream is None:
        raise AnswerRefused("no <Response><Stream>")
    url = (stream.text or "").strip()
    if not url.startswith(("wss://", "ws://")):
        raise AnswerRefused("the stream URL is not a WebSocket URL")
    if stream.get("bidirectional") != "true":
        raise AnswerRefused("the stream is not bidirectional")
    if stream.get("audioTrack", "inbound") != "inbound":
        raise AnswerRefused("a bidirectional stream's audioTrack must be inbound")
    content_type = stream.get("contentType", "audio/x-l16;rate=8000")
    if content_type not in _CONTENT_TYPES:
        raise AnswerRefused(f"contentType {content_type!r} is not one Plivo offers")
    extra = stream.get("extraHeaders", "")
    if len(extra.encode()) > 512 or not set(extra) <= _EXTRA_HEADERS_CHARS:
        raise AnswerRefused("extraHeaders is over 512 bytes or not letters and digits")
    return StreamOrder(url, extra, content_type, stream.get("keepCallAlive") == "true")


# -- the stream -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Received:
    """One message the gateway sent, when it arrived (``time.monotonic()``)."""

    at: float
    event: str
    message: dict[str, Any] = field(repr=False)


_Options = tuple[bool, int, bool]  # realtime, frame_ms, echo_cleared_checkpoints


class PlivoCall:
    """One call's Audio Stream, Plivo's side: ``async with PlivoCall.open(url, call_id=…,
    extra_headers="token=…") as call: await call.speak(pcm); await call.wait_for("playAudio")``
    (or ``PlivoCall.from_answer(xml, call_id=…)``), then ``call.heard_pcm()``."""

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        ids: tuple[str, str],
        extra_headers: str,
        options: _Options,
    ) -> None:
        self.ws = ws
        self.call_id, self.stream_id = ids
        self.extra_headers = extra_headers
        self.realtime, self.frame_ms, self.echo_cleared_checkpoints = options
        self.received: list[Received] = []
        self.sent: list[dict[str, Any]] = []
        self.protocol_errors: list[str] = []
        self.echoed: list[str] = []  # checkpoint names echoed as playedStream, in order
        self.dropped_checkpoints: list[str] = []  # pending at a clearAudio, never echoed
        self._heard = bytearray()  # µ-law the caller heard
        self._queue: deque[bytes | str] = deque()  # audio, or a checkpoint's name
        self._queued = asyncio.Event()
        self._changed = asyncio.Condition()
        self._sequence = 0
        self._chunk = 0
        self._started_at = time.monotonic()
        self._down: StreamResampler | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = asyncio.Event()

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        url: str,
        *,
        call_id: str | None = None,
        extra_headers: str = "",
        stream_id: str | None = None,
        realtime: bool = True,
        frame_ms: int = 20,
        echo_cleared_checkpoints: bool = False,
        headers_separator: str = ";",
        session: aiohttp.ClientSession | None = None,
    ) -> AsyncIterator[PlivoCall]:
        """Connect to ``url``, send ``start`` and serve the stream until the block ends (then
        hang up if the call is still on). ``extra_headers`` is the ``<Stream extraHeaders>``
        value; Plivo hands it back with ``headers_separator`` between the pairs (``;`` as in
        the protocol reference's example)."""
        own = session is None
        http = session or aiohttp.ClientSession()
        try:
            ws = await http.ws_connect(url, autoping=True)
            headers = extra_headers.replace(",", headers_separator)
            ids = (call_id or str(uuid.uuid4()), stream_id or str(uuid.uuid4()))
            call = cls(ws, ids, headers, (realtime, frame_ms, echo_cleared_checkpoints))
            await call._start()
            try:
                yield call
            finally:
                await call._finish()
        finally:
            if own:
                await http.close()

    @classmethod
    @asynccontextmanager
    async def from_answer(
        cls, answer_xml: str, *, call_id: str, **options: Any
    ) -> AsyncIterator[PlivoCall]:
        """Run the answer's ``<Stream>`` as Plivo does: its URL, its ``extraHeaders``."""
        order = read_answer(answer_xml)
        if order.content_type != "audio/x-mulaw;rate=8000":
            raise AnswerRefused("this simulator streams audio/x-mulaw;rate=8000 only")
        async with cls.open(
            order.url, call_id=call_id, extra_headers=order.extra_headers, **options
        ) as call:
            yield call

    # -- what the caller does ---------------------------------------------------------------------

    async def speak(self, pcm: bytes, *, rate: int = 8000, paced: bool = False) -> None:
        """Caller audio (PCM16 at 8 or 16 kHz) as Plivo's ``media`` frames, µ-law 8 kHz;
        ``paced`` sends one frame per frame time, as a live call does."""
        if rate not in (8000, 16000):
            raise ValueError("speak takes PCM16 at 8000 or 16000 Hz")
        if rate == 16000:
            self._down = self._down or StreamResampler(16000, 8000)  # one stream, one filter
            pcm = self._down.process(pcm)
        ulaw = ulaw_encode(pcm)
        step = self.frame_ms * _FRAME_BYTES_PER_MS
        next_at = time.monotonic()
        for offset in range(0, len(ulaw), step):
            self._chunk += 1
            media = {
                "track": "inbound",
                "timestamp": str(self._elapsed_ms()),
                "chunk": self._chunk,
                "payload": base64.b64encode(ulaw[offset : offset + step]).decode(),
            }
            await self._send("media", media=media, extra_headers=self.extra_headers)
            if paced:
                next_at += self.frame_ms / 1000
                await asyncio.sleep(max(next_at - time.monotonic(), 0))

    async def press(self, digit: str) -> None:
        """A key press, as Plivo's ``dtmf`` event."""
        dtmf = {"track": "inbound", "digit": digit, "timestamp": str(self._elapsed_ms())}
        await self._send("dtmf", dtmf=dtmf, extra_headers=self.extra_headers)

    async def hang_up(self, *, stop_message: bool = False) -> None:
        """The caller hangs up: Plivo closes the socket (after a ``stop`` if asked)."""
        if self.ws.closed:
            return
        if stop_message:
            await self._send("stop", reason="hangup")
        await self.ws.close()
        await self._wind_down()

    async def drop(self) -> None:
        """Fault: the connection dies with no message and no close handshake."""
        sock = self.ws.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        await self._wind_down()

    async def send_raw(self, data: str | bytes) -> None:
        """Anything at all on the stream (a malformed frame, an event Plivo may add)."""
        await (self.ws.send_bytes(data) if isinstance(data, bytes) else self.ws.send_str(data))

    # -- what the caller heard --------------------------------------------------------------------

    def heard(self) -> bytes:
        """The µ-law played to the caller so far (cleared audio excluded)."""
        return bytes(self._heard)

    def heard_pcm(self) -> bytes:
        """What the caller heard, as PCM16 at 8 kHz."""
        return ulaw_decode(bytes(self._heard))

    def received_events(self, event: str | None = None) -> list[Received]:
        return [r for r in self.received if event is None or r.event == event]

    async def wait_for(self, event: str, within: float = 5.0, *, count: int = 1) -> Received:
        """The ``count``-th message of kind ``event`` (counting those already received)."""

        def arrived() -> bool:
            return len(self.received_events(event)) >= count or self.closed.is_set()

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(arrived), within)
        matches = self.received_events(event)
        if len(matches) < count:
            raise ConnectionError(f"the stream closed before {event} #{count}")
        return matches[count - 1]

    async def wait_closed(self, within: float = 5.0) -> int | None:
        """Until the gateway closes the stream; its close code."""
        await asyncio.wait_for(self.closed.wait(), within)
        return self.ws.close_code

    # -- Plivo's side of the socket ---------------------------------------------------------------

    async def _start(self) -> None:
        start = {
            "callId": self.call_id,
            "streamId": self.stream_id,
            "accountId": "MA" + "0" * 18,
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
        }
        await self._send("start", start=start, extra_headers=self.extra_headers)
        self._tasks.append(asyncio.create_task(self._read()))
        if self.realtime:
            self._tasks.append(asyncio.create_task(self._play()))

    async def _send(self, event: str, **fields: Any) -> None:
        self._sequence += 1
        message = {"event": event, "sequenceNumber": self._sequence, **fields}
        if event != "start":
            message["streamId"] = self.stream_id
        self.sent.append(message)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.send_str(json.dumps(message))

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await self._on_text(msg.data)
                elif msg.type == aiohttp.WSMsgType.BINARY:
                    self.protocol_errors.append("a binary frame (Plivo's stream is JSON text)")
        finally:
            await self._wind_down()

    async def _on_text(self, text: str) -> None:
        try:
            message = json.loads(text)
            event = str(message["event"])
        except (ValueError, TypeError, KeyError):
            self.protocol_errors.append("a frame that is not a JSON object with an event")
            return
        self.received.append(Received(time.monotonic(), event, message))
        if message.get("streamId", self.stream_id) != self.stream_id:
            self.protocol_errors.append(f"{event} names another streamId")
        if event == "playAudio":
            self._on_play(message)
        elif event == "checkpoint" and isinstance(name := message.get("name"), str) and name:
            self._queue.append(name)
        elif event == "checkpoint":
            self.protocol_errors.append("a checkpoint without a name")
        elif event == "clearAudio":
            await self._clear()
        else:
            self.protocol_errors.append(f"an event Plivo does not take: {event}")
        if not self.realtime:
            await self._play_now()
        self._queued.set()
        async with self._changed:
            self._changed.notify_all()

    def _on_play(self, message: Mapping[str, Any]) -> None:
        media = message.get("media")
        if not isinstance(media, dict):
            self.protocol_errors.append("playAudio without media")
            return
        if media.get("contentType") != "audio/x-mulaw" or media.get("sampleRate") != 8000:
            self.protocol_errors.append("playAudio is not audio/x-mulaw at 8000 Hz")
        try:
            audio = base64.b64decode(str(media.get("payload")), validate=True)
        except (binascii.Error, ValueError):
            self.protocol_errors.append("playAudio's payload is not base64")
            return
        self._queue.append(audio)

    async def _clear(self) -> None:
        pending = [item for item in self._queue if isinstance(item, str)]
        self._queue.clear()
        if self.echo_cleared_checkpoints:
            for name in pending:
                await self._echo(name)
        else:
            self.dropped_checkpoints.extend(pending)
        await self._send("clearedAudio")

    async def _echo(self, name: str) -> None:
        self.echoed.append(name)
        await self._send("playedStream", name=name)

    async def _play_now(self) -> None:
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, str):
                await self._echo(item)
            else:
                self._heard += item

    async def _play(self) -> None:
        """Real time: one frame per frame time, a checkpoint echoed when the audio before it
        has played out."""
        step = self.frame_ms * _FRAME_BYTES_PER_MS
        next_at: float | None = None
        while not self.closed.is_set():
            if not self._queue:
                next_at = None  # idle: the next audio plays at once
                self._queued.clear()
                await self._queued.wait()
                continue
            head = self._queue[0]
            if isinstance(head, str):
                self._queue.popleft()
                await self._echo(head)
                continue
            piece, rest = head[:step], head[step:]
            if rest:
                self._queue[0] = rest
            else:
                self._queue.popleft()
            self._heard += piece
            now = time.monotonic()
            next_at = max(next_at or now, now - 0.1) + len(piece) / _FRAME_BYTES_PER_MS / 1000
            await asyncio.sleep(max(next_at - now, 0))

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self._started_at) * 1000)

    async def _wind_down(self) -> None:
        self.closed.set()
        self._queued.set()
        async with self._changed:
            self._changed.notify_all()

    async def _finish(self) -> None:
        if not self.ws.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(), 2.0)
        await self._wind_down()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
