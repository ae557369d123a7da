"""The Vonage Voice API WebSocket, as the phone core's ``Carrier`` and ``Speaker``.

Theory of operation. The NCCO ``connect`` action with a ``websocket`` endpoint (see
``gateway.edges.vonage.webhook``) makes Vonage open a WebSocket to ``/phone/media`` and speak:

- first, one TEXT message ``{"event": "websocket:connected", "content-type":
  "audio/l16;rate=16000", ...}`` whose other top-level fields are the endpoint's ``headers``
  from the NCCO, flattened (Vonage sends no call id of its own there: the answer puts the
  call's ``uuid`` and the stream token in those headers, as ``call_uuid`` and ``token``);
- then BINARY messages of the call's audio: 16-bit signed little-endian linear PCM, mono, at
  the rate of the ``content-type`` (8 or 16 kHz), 20 ms each (320 or 640 bytes);
- TEXT events between them: ``websocket:dtmf`` (``digit``, ``duration``) for a key press,
  ``websocket:notify`` (the ``payload`` of our ``notify``, echoed once everything sent before
  it has played), ``websocket:cleared`` (our ``clear`` was done). Any other event becomes
  ``Unknown``.

Vonage sends no goodbye: when the caller hangs up the socket simply closes, so ``decode`` never
yields ``Hangup`` (the route's reader ends with the socket). It gives no stream id either: the
call's uuid serves as ``stream_id``.

Outbound, the gateway plays audio by sending BINARY PCM in exactly 20 ms messages at the
stream's rate (Vonage buffers what runs ahead and plays it at real time), a TEXT
``{"action": "notify", "payload": {"name": …}}`` as the marker whose ``websocket:notify`` echo
gives the played position, and ``{"action": "clear"}`` to drop what Vonage buffered (barge-in).

Facts from Vonage's documentation:
https://developer.vonage.com/en/voice/voice-api/concepts/websockets (first message, headers at
the top level, binary L16 8/16 kHz in 20 ms messages, ``websocket:dtmf``, writing audio back in
320/640-byte messages, the playback buffer, ``clear``/``websocket:cleared``,
``notify``/``websocket:notify``) and https://developer.vonage.com/en/voice/voice-api/ncco-reference
(the ``websocket`` endpoint's ``uri``, ``content-type``, ``headers``). The ``notify`` and
``clear`` message shapes were checked against the AsyncAPI description generated from that
guide (https://asyncapi.apis.io/asyncapis/vonage/vonage-asyncapi/). Guessed, as the docs are
silent: what becomes of a ``notify`` still queued when ``clear`` empties the buffer (the phone
core ignores stale echoes either way) and whether DTMF ``A``-``D`` can arrive (accepted).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.edges.phone.fields import DTMF_DIGITS, dumps, message_object, text_field
from gateway.edges.phone.wire import (
    Audio,
    CarrierEvent,
    Digit,
    Ignored,
    LineFormat,
    Outgoing,
    PhoneFormatError,
    Played,
    StreamStarted,
    Unknown,
)

__all__ = [
    "CALL_HEADER",
    "CONNECTED",
    "FRAME_MS",
    "TOKEN_HEADER",
    "VonageCarrier",
    "VonageSpeaker",
    "content_type",
    "parse_content_type",
]

CONNECTED = "websocket:connected"
# The NCCO endpoint headers the answer sets; Vonage hands them back at the top level of the
# ``websocket:connected`` message.
CALL_HEADER = "call_uuid"
TOKEN_HEADER = "token"
FRAME_MS = 20  # Vonage reads and writes 20 ms per binary message
_RATES = (8000, 16000)
_DIGITS = DTMF_DIGITS
_NOT_PARAMETERS = frozenset(("event", "content-type", CALL_HEADER, TOKEN_HEADER))


def content_type(rate: int) -> str:
    """The NCCO ``content-type`` of L16 audio at ``rate`` Hz (8000 or 16000)."""
    if rate not in _RATES:
        raise ValueError(f"Vonage streams L16 at 8000 or 16000 Hz, not {rate}")
    return f"audio/l16;rate={rate}"


def parse_content_type(value: object) -> LineFormat | None:
    """``audio/l16;rate=16000`` → its ``LineFormat``; None if it is not L16 at 8 or 16 kHz."""
    if not isinstance(value, str):
        return None
    kind, _, parameters = value.partition(";")
    if kind.strip().lower() != "audio/l16":
        return None
    name, _, rate = parameters.partition("=")
    digits = rate.strip()
    if name.strip().lower() != "rate" or not (digits.isascii() and digits.isdigit()):
        return None
    if len(digits) > 5 or int(digits) not in _RATES:
        return None
    return LineFormat("pcm16", int(digits))


class VonageCarrier:
    """The Vonage Voice WebSocket, inbound. Stateless: one instance serves every call.

    ``notify_markers``: use Vonage's ``notify`` action for markers (``echoes_markers`` true, the
    played position from Vonage's echoes). False makes the phone core estimate the played
    position on its own clock instead, should ``notify`` ever misbehave on an account."""

    def __init__(self, *, notify_markers: bool = True) -> None:
        self._notify_markers = notify_markers

    @property
    def name(self) -> str:
        return "vonage"

    def claims(self, message: str | bytes) -> bool:
        """Only the text ``websocket:connected`` with an L16 ``content-type``; binary never."""
        if not isinstance(message, str):
            return False
        try:
            parsed = orjson.loads(message)
        except ValueError:  # orjson.JSONDecodeError, and any other refusal of the text
            return False
        return (
            isinstance(parsed, dict)
            and parsed.get("event") == CONNECTED
            and parse_content_type(parsed.get("content-type")) is not None
        )

    def decode(self, message: str | bytes) -> CarrierEvent:
        if isinstance(message, bytes):
            return _audio(message)
        parsed = message_object(message, "Vonage")
        event = text_field(parsed, "event")
        match event:
            case "websocket:connected":
                return _connected(parsed)
            case "websocket:dtmf":
                digit = parsed.get("digit")
                if not isinstance(digit, str) or digit not in _DIGITS:
                    raise PhoneFormatError("websocket:dtmf.digit must be one of 0-9, *, #, A-D")
                return Digit(digit)
            case "websocket:notify":
                payload = parsed.get("payload")
                if not isinstance(payload, dict):
                    raise PhoneFormatError("websocket:notify.payload must be an object")
                return Played(text_field(payload, "name", "websocket:notify.payload."))
            case "websocket:cleared":
                return Ignored(event)
            case _:
                return Unknown(event)

    def speaker(self, started: StreamStarted) -> VonageSpeaker:
        return VonageSpeaker(started.line, echoes_markers=self._notify_markers)


@dataclass(frozen=True, slots=True)
class VonageSpeaker:
    """The outbound side of one stream: Vonage plays back in the format it sends (L16 at the
    stream's rate), one binary message per 20 ms."""

    line: LineFormat
    echoes_markers: bool = True
    frame_ms: int = FRAME_MS

    @property
    def frame_bytes(self) -> int:
        return self.line.bytes_per_ms * FRAME_MS

    def media(self, audio: bytes) -> Outgoing:
        """One binary message: exactly 20 ms (the docs ask each message to be 320 or 640
        bytes; the phone core pads a reply's last frame, so any other size is a bug)."""
        if len(audio) != self.frame_bytes:
            raise ValueError(
                f"a Vonage audio message is {self.frame_bytes} bytes (20 ms), not {len(audio)}"
            )
        return bytes(audio)

    def marker(self, name: str) -> Outgoing:
        """``notify`` with ``name`` in its payload: Vonage echoes ``websocket:notify`` once
        everything sent before it has played. Only when ``echoes_markers``."""
        if not self.echoes_markers:
            raise RuntimeError("this Vonage stream does not use notify markers")
        return dumps({"action": "notify", "payload": {"name": name}})

    def clear(self) -> Outgoing:
        """Drop everything Vonage has buffered and not yet played."""
        return dumps({"action": "clear"})


def _audio(payload: bytes) -> Audio:
    if not payload:
        raise PhoneFormatError("binary audio message is empty")
    if len(payload) % 2:
        raise PhoneFormatError(
            f"binary audio message has {len(payload)} bytes: not whole 16-bit samples"
        )
    return Audio(payload)


def _connected(message: Mapping[str, Any]) -> StreamStarted:
    line = parse_content_type(message.get("content-type"))
    if line is None:
        raise PhoneFormatError(
            "websocket:connected.content-type must be audio/l16;rate=8000 or audio/l16;rate=16000"
        )
    call_uuid = text_field(message, CALL_HEADER, "websocket:connected.")
    token = message.get(TOKEN_HEADER)
    if token is not None and not isinstance(token, str):
        raise PhoneFormatError("websocket:connected.token must be a string")
    parameters = {
        key: value
        for key, value in message.items()
        if key not in _NOT_PARAMETERS and isinstance(value, str)
    }
    return StreamStarted(
        call_id=call_uuid,
        stream_id=call_uuid,  # Vonage names no stream: the call's uuid stands for it
        token=token or None,
        line=line,
        parameters=parameters,
    )
