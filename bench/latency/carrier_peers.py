"""The phone lanes of the latency bench for the carriers besides Twilio, each driving the
gateway's ``/phone/media`` as its carrier does (the gateway tells the carrier from the first
messages). The messages are written here, from the carriers' documented wire as the adapters in
``gateway.edges.<carrier>.wire`` read it and the simulators in ``fakes.carriers`` send it (the
bench may not import the gateway's edges):

- ``TelnyxPhone``: JSON text; ``connected``, then ``start`` (``stream_id``,
  ``start.call_control_id``, ``start.media_format`` PCMU 8 kHz, ``start.client_state`` = base64
  of the stream token), then ``media`` of 20 ms µ-law (``media.chunk`` counts them, top-level
  ``sequence_number`` counts every message); it echoes each ``mark`` at once, ``stop`` ends it;
- ``PlivoPhone``: JSON text; ``start`` (``start.callId``, ``start.streamId``,
  ``start.mediaFormat`` ``audio/x-mulaw`` 8 kHz, the token packed into ``extra_headers``), then
  ``media`` of 20 ms µ-law; it answers each ``checkpoint`` with ``playedStream`` and each
  ``clearAudio`` with ``clearedAudio``; the socket closing ends the call (Plivo sends no stop);
- ``VonagePhone``: a TEXT ``websocket:connected`` (``content-type`` ``audio/l16;rate=16000``,
  the answer's headers ``call_uuid`` and ``token`` at the top), then BINARY PCM16 LE 16 kHz
  frames of 640 bytes (20 ms); it echoes each ``notify`` action as ``websocket:notify`` and
  answers ``clear`` with ``websocket:cleared``; the socket closing ends the call;
- ``ExotelPhone``: JSON text; ``connected``, ``start`` (``stream_sid``, ``start.call_sid``,
  ``start.media_format`` ``audio/x-raw`` at ``"8000"`` Hz, 16 bits, the token in
  ``start.custom_parameters``), then ``media`` of PCM16 8 kHz in **100 ms chunks** (1,600
  bytes), as Exotel streams; it echoes each ``mark`` at once, ``stop`` ends it.

Exotel's chunks are longer than the lanes' 20 ms frames: ``ExotelPhone.encode`` holds frames
and returns ``None`` until a chunk is whole, and the lane sends the chunk with the frame that
completes it (``bench.latency.lanes``). A chunk leaves at the due time of its last 20 ms frame,
so with turns on the chunk grid (``EXOTEL_CHUNK_MS`` divides the speech and the slot), the last
speech frame and the end of the VAD's silence leave at the same moments as on a 20 ms lane.

The stream token: ``token`` ("" by default), where each carrier's answer webhook puts it. The
bench runs the gateway with ``GATEWAY_AUTH=none`` (``bench.relay.procs.start_gateway``), which
admits a phone stream with an empty token (``gateway.admission.Admission.stream_user``), so these
lanes call no webhook (Telnyx's answer goes through its REST API, which no lane could call).

``opening``, ``encode`` and ``hear`` are pure (unit-tested); only ``handshake`` does I/O.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection

from bench.latency.peers import Heard

__all__ = [
    "EXOTEL_CHUNK_MS",
    "ExotelPhone",
    "PlivoPhone",
    "TelnyxPhone",
    "VonagePhone",
    "pack_plivo_header_value",
]

EXOTEL_CHUNK_MS = 100  # Exotel streams the caller in 100 ms media messages
EXOTEL_RATE = 8000  # PCM16 at 8 kHz, Exotel's default line
VONAGE_RATE = 16000  # audio/l16;rate=16000, the gateway's default Vonage line
PHONE_MEDIA = "/phone/media"

_AUDIO = Heard(audio=True)
_NOTHING = Heard()
# What Plivo's extraHeaders admits besides its key=value syntax; "Z" is the escape character.
_PLIVO_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYabcdefghijklmnopqrstuvwxyz0123456789")


def _media_url(http_url: str) -> str:
    return http_url.replace("http://", "ws://", 1) + PHONE_MEDIA


def _dumps(message: dict[str, Any]) -> str:
    return orjson.dumps(message).decode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _event(message: str | bytes) -> dict[str, Any]:
    event = orjson.loads(message)
    return event if isinstance(event, dict) else {}


async def _send_all(ws: ClientConnection, messages: list[str]) -> None:
    for message in messages:
        await ws.send(message)


def pack_plivo_header_value(value: str) -> str:
    """``value`` as the gateway's Plivo answer packs it into ``extraHeaders`` (letters and digits
    only): each UTF-8 byte that is not one of them, and ``Z``, becomes ``Z`` and two hex digits."""
    return "".join(
        char if char in _PLIVO_PLAIN else "".join(f"Z{byte:02X}" for byte in char.encode())
        for char in value
    )


@dataclass
class TelnyxPhone:
    http_url: str  # the gateway's http://…
    token: str = ""  # the stream token (""; the bench's gateway runs with auth off)
    headers: dict[str, str] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)
    call_control_id: str = field(default_factory=lambda: "v3:" + secrets.token_hex(16))
    stream_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _sequence: int = 0  # every message sent
    _chunks: int = 0  # media messages sent

    @property
    def url(self) -> str:
        return _media_url(self.http_url)

    async def prepare(self) -> None:
        pass

    def opening(self) -> list[str]:
        start = {
            "call_control_id": self.call_control_id,
            "call_session_id": str(uuid.uuid4()),
            "from": "+15550001111",
            "to": "+15550002222",
            "tags": [],
            "client_state": _b64(self.token.encode()),
            "custom_parameters": {},
            "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
        }
        return [
            _dumps({"event": "connected", "version": "1.0.0"}),
            self._message("start", start=start),
        ]

    async def handshake(self, ws: ClientConnection) -> None:
        await _send_all(ws, self.opening())

    def encode(self, frame: bytes) -> str:
        self._chunks += 1
        media = {
            "track": "inbound",
            "chunk": str(self._chunks),
            "timestamp": str((self._chunks - 1) * 20),
            "payload": _b64(frame),
        }
        return self._message("media", media=media)

    def hear(self, message: str | bytes) -> Heard:
        event = _event(message)
        kind = event.get("event")
        if kind == "media":
            return _AUDIO if event.get("media", {}).get("payload") else _NOTHING
        if kind == "mark":  # played at once, as far as this caller is concerned
            return Heard(replies=(self._message("mark", mark=event.get("mark", {})),))
        self.events[f"telnyx:{kind}"] += 1
        return _NOTHING

    def goodbye(self) -> list[str]:
        stop = {"call_control_id": self.call_control_id}
        return [self._message("stop", stop=stop)]

    def _message(self, event: str, **body: Any) -> str:
        self._sequence += 1
        message = {"event": event, "sequence_number": str(self._sequence), **body}
        return _dumps(message | {"stream_id": self.stream_id})


@dataclass
class PlivoPhone:
    http_url: str
    token: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)
    call_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    stream_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _sequence: int = 0
    _chunks: int = 0

    @property
    def url(self) -> str:
        return _media_url(self.http_url)

    @property
    def extra_headers(self) -> str:
        """What ``<Stream extraHeaders>`` of the gateway's answer holds, handed back by Plivo."""
        return f"token={pack_plivo_header_value(self.token)}"

    async def prepare(self) -> None:
        pass

    def opening(self) -> list[str]:
        start = {
            "callId": self.call_id,
            "streamId": self.stream_id,
            "accountId": "MA" + "0" * 18,
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
        }
        return [self._message("start", start=start, extra_headers=self.extra_headers)]

    async def handshake(self, ws: ClientConnection) -> None:
        await _send_all(ws, self.opening())

    def encode(self, frame: bytes) -> str:
        self._chunks += 1
        media = {
            "track": "inbound",
            "timestamp": str((self._chunks - 1) * 20),
            "chunk": self._chunks,
            "payload": _b64(frame),
        }
        return self._message("media", media=media, extra_headers=self.extra_headers)

    def hear(self, message: str | bytes) -> Heard:
        event = _event(message)
        kind = event.get("event")
        if kind == "playAudio":
            return _AUDIO if event.get("media", {}).get("payload") else _NOTHING
        if kind == "checkpoint":  # played at once: Plivo answers with the checkpoint's name
            return Heard(replies=(self._message("playedStream", name=event.get("name", "")),))
        self.events[f"plivo:{kind}"] += 1
        if kind == "clearAudio":
            return Heard(replies=(self._message("clearedAudio"),))
        return _NOTHING

    def goodbye(self) -> list[str]:
        return []  # Plivo closes the socket: no message

    def _message(self, event: str, **body: Any) -> str:
        self._sequence += 1
        message: dict[str, Any] = {"event": event, "sequenceNumber": self._sequence, **body}
        if event != "start":
            message["streamId"] = self.stream_id
        return _dumps(message)


@dataclass
class VonagePhone:
    http_url: str
    token: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)
    call_uuid: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def url(self) -> str:
        return _media_url(self.http_url)

    async def prepare(self) -> None:
        pass

    def opening(self) -> list[str]:
        first = {
            "event": "websocket:connected",
            "content-type": f"audio/l16;rate={VONAGE_RATE}",
            "call_uuid": self.call_uuid,
            "token": self.token,
        }
        return [_dumps(first)]

    async def handshake(self, ws: ClientConnection) -> None:
        await _send_all(ws, self.opening())

    def encode(self, frame: bytes) -> bytes:
        return frame  # one binary message of 20 ms: 640 bytes at 16 kHz

    def hear(self, message: str | bytes) -> Heard:
        if isinstance(message, bytes):
            return _AUDIO if message else _NOTHING
        event = _event(message)
        action = event.get("action")
        if action == "notify":  # played at once: the payload comes back as it went
            notified = {"event": "websocket:notify", "payload": event.get("payload")}
            return Heard(replies=(_dumps(notified),))
        self.events[f"vonage:{action}"] += 1
        if action == "clear":
            return Heard(replies=('{"event":"websocket:cleared"}',))
        return _NOTHING

    def goodbye(self) -> list[str]:
        return []  # Vonage closes the socket: no message


@dataclass
class ExotelPhone:
    http_url: str
    token: str = ""
    chunk_ms: int = EXOTEL_CHUNK_MS
    headers: dict[str, str] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)
    call_sid: str = field(default_factory=lambda: secrets.token_hex(16))
    stream_sid: str = field(default_factory=lambda: "MZ" + secrets.token_hex(16))
    _sequence: int = 0
    _chunks: int = 0
    _held: bytearray = field(default_factory=bytearray)

    @property
    def url(self) -> str:
        return _media_url(self.http_url)

    @property
    def chunk_bytes(self) -> int:
        return EXOTEL_RATE // 1000 * 2 * self.chunk_ms

    async def prepare(self) -> None:
        pass

    def opening(self) -> list[str]:
        start = {
            "stream_sid": self.stream_sid,
            "call_sid": self.call_sid,
            "account_sid": "bench",
            "from": "+919876543210",
            "to": "+918047491899",
            "custom_parameters": {"token": self.token},
            "media_format": {
                "encoding": "audio/x-raw",
                "sample_rate": str(EXOTEL_RATE),
                "bit_rate": "16",
            },
        }
        return ['{"event":"connected"}', self._message("start", start=start)]

    async def handshake(self, ws: ClientConnection) -> None:
        await _send_all(ws, self.opening())

    def encode(self, frame: bytes) -> str | None:
        """The chunk that ``frame`` completes, else ``None`` (the frame is held)."""
        self._held += frame
        if len(self._held) < self.chunk_bytes:
            return None
        chunk, self._held = bytes(self._held[: self.chunk_bytes]), self._held[self.chunk_bytes :]
        self._chunks += 1
        media = {
            "chunk": str(self._chunks),
            "timestamp": str(self._chunks * self.chunk_ms),
            "payload": _b64(chunk),
        }
        return self._message("media", media=media)

    def hear(self, message: str | bytes) -> Heard:
        event = _event(message)
        kind = event.get("event")
        if kind == "media":
            return _AUDIO if event.get("media", {}).get("payload") else _NOTHING
        if kind == "mark":  # played at once
            return Heard(replies=(self._message("mark", mark=event.get("mark", {})),))
        self.events[f"exotel:{kind}"] += 1
        return _NOTHING

    def goodbye(self) -> list[str]:
        stop = {"call_sid": self.call_sid, "account_sid": "bench", "reason": "callended"}
        return [self._message("stop", stop=stop)]

    def _message(self, event: str, **body: Any) -> str:
        self._sequence += 1
        message = {"event": event, "sequence_number": str(self._sequence)}
        return _dumps(message | {"stream_sid": self.stream_sid} | body)
