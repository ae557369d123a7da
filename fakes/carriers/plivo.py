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

import base64
import hashlib
import hmac
import secrets
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urlparse, urlunparse

import aiohttp

from fakes.carriers.json_stream import BYTES_PER_MS, JsonStream, MarkedPlayout
from fakes.carriers.stream_kit import CarrierRequest, Pace, Received, b64decoded, client_session
from gateway.audio.g711 import ulaw_decode, ulaw_encode

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
_EXTRA_HEADERS_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789=,")
_CONTENT_TYPES = ("audio/x-l16;rate=8000", "audio/x-l16;rate=16000", "audio/x-mulaw;rate=8000")


# -- the answer URL --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnswerRequest(CarrierRequest):
    """The request Plivo makes to the answer URL. ``headers`` are named as Plivo names them;
    ``lower_headers`` as ``WebhookRequest`` takes them."""

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


_Options = tuple[bool, int, bool]  # realtime, frame_ms, echo_cleared_checkpoints


class PlivoCall(JsonStream):
    """One call's Audio Stream, Plivo's side: ``async with PlivoCall.open(url, call_id=…,
    extra_headers="token=…") as call: await call.speak(pcm); await call.wait_for("playAudio")``
    (or ``PlivoCall.from_answer(xml, call_id=…)``), then ``call.heard_pcm()``."""

    carrier = "Plivo"

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        ids: tuple[str, str],
        extra_headers: str,
        options: _Options,
    ) -> None:
        self.realtime, self.frame_ms, self.echo_cleared_checkpoints = options
        on_clear: Literal["echo", "drop"] = "echo" if self.echo_cleared_checkpoints else "drop"
        playout = MarkedPlayout(
            self._echo, realtime=self.realtime, frame_ms=self.frame_ms, marks_on_clear=on_clear
        )
        super().__init__(ws, playout)
        self.call_id, self.stream_id = ids
        self.extra_headers = extra_headers
        self.echoed: list[str] = []  # checkpoint names echoed as playedStream, in order
        self.dropped_checkpoints = playout.dropped  # pending at a clearAudio, never echoed
        self._sequence = 0
        self._chunk = 0
        self._started_at = time.monotonic()

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
        async with client_session(session) as http:
            ws = await http.ws_connect(url, autoping=True)
            headers = extra_headers.replace(",", headers_separator)
            ids = (call_id or str(uuid.uuid4()), stream_id or str(uuid.uuid4()))
            call = cls(ws, ids, headers, (realtime, frame_ms, echo_cleared_checkpoints))
            await call._start()
            try:
                yield call
            finally:
                await call._finish()

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
        ulaw = ulaw_encode(self._narrowband(pcm, rate))
        step = self.frame_ms * BYTES_PER_MS
        pace = Pace(self.frame_ms / 1000)
        for n, offset in enumerate(range(0, len(ulaw), step), 1):
            self._chunk += 1
            media = {
                "track": "inbound",
                "timestamp": str(self._elapsed_ms()),
                "chunk": self._chunk,
                "payload": base64.b64encode(ulaw[offset : offset + step]).decode(),
            }
            await self._send("media", media=media, extra_headers=self.extra_headers)
            if paced:
                await pace.until(n)

    async def press(self, digit: str) -> None:
        """A key press, as Plivo's ``dtmf`` event."""
        dtmf = {"track": "inbound", "digit": digit, "timestamp": str(self._elapsed_ms())}
        await self._send("dtmf", dtmf=dtmf, extra_headers=self.extra_headers)

    async def hang_up(self, *, stop_message: bool = False) -> None:
        """The caller hangs up: Plivo closes the socket (after a ``stop`` if asked)."""
        await self._hang_up({"reason": "hangup"} if stop_message else None)

    # -- what the caller heard --------------------------------------------------------------------

    def heard_pcm(self) -> bytes:
        """What the caller heard, as PCM16 at 8 kHz."""
        return ulaw_decode(bytes(self._playout.heard))

    async def wait_for(self, event: str, within: float = 5.0, *, count: int = 1) -> Received:
        """The ``count``-th message of kind ``event`` (counting those already received)."""
        return await super().wait_for(event, within, count=count)

    async def wait_closed(self, within: float = 5.0) -> int | None:
        """Until the gateway closes the stream; its close code."""
        return await super().wait_closed(within)

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
        self._serve()

    async def _send(self, event: str, **fields: Any) -> None:
        self._sequence += 1
        message = {"event": event, "sequenceNumber": self._sequence, **fields}
        if event != "start":
            message["streamId"] = self.stream_id
        await self._emit(message)

    async def _on_message(self, event: str, message: dict[str, Any]) -> None:
        if message.get("streamId", self.stream_id) != self.stream_id:
            self.protocol_errors.append(f"{event} names another streamId")
        if event == "playAudio":
            self._on_play(message)
        elif event == "checkpoint" and isinstance(name := message.get("name"), str) and name:
            self._playout.mark(name)
        elif event == "checkpoint":
            self.protocol_errors.append("a checkpoint without a name")
        elif event == "clearAudio":
            await self._playout.clear()  # the checkpoints pending: echoed, or dropped
            await self._send("clearedAudio")
        else:
            self.protocol_errors.append(f"an event Plivo does not take: {event}")

    def _on_play(self, message: Mapping[str, Any]) -> None:
        media = message.get("media")
        if not isinstance(media, dict):
            self.protocol_errors.append("playAudio without media")
            return
        if media.get("contentType") != "audio/x-mulaw" or media.get("sampleRate") != 8000:
            self.protocol_errors.append("playAudio is not audio/x-mulaw at 8000 Hz")
        audio = b64decoded(str(media.get("payload")))
        if audio is None:
            self.protocol_errors.append("playAudio's payload is not base64")
            return
        self._playout.media(audio)

    async def _echo(self, name: str, cleared: bool) -> None:
        self.echoed.append(name)
        await self._send("playedStream", name=name)
        self._changes.notify()

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self._started_at) * 1000)
