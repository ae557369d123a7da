"""Plivo Audio Streams on the wire: Plivo's JSON messages in, ``playAudio`` / ``checkpoint`` /
``clearAudio`` out. Pure: no I/O, no clock.

Theory of operation. Plivo opens the WebSocket named in the answer's ``<Stream>`` and sends one
JSON object per text frame, tagged by ``event``:

- ``start`` once, first: ``start.callId`` (the call's UUID, the ``CallUUID`` the answer webhook
  saw), ``start.streamId``, ``start.accountId``, ``start.tracks``, ``start.mediaFormat``
  (``encoding`` such as ``audio/x-mulaw``, ``sampleRate``) and, beside ``start``, the
  ``extra_headers`` string that the ``<Stream extraHeaders="…">`` attribute set: the gateway's
  stream token travels there;
- ``media``: ``media.payload`` base64 audio of ``media.track`` (``inbound``: the caller), with
  ``media.timestamp``, ``media.chunk`` and a ``sequenceNumber``; over one WebSocket they arrive
  in order, so ``Audio.sequence`` stays None;
- ``dtmf``: ``dtmf.digit``, a key the caller pressed;
- ``playedStream``: the echo of a ``checkpoint`` of ours, by ``name``, once everything sent
  before it has played (Plivo's support article calls it ``played``; both are read);
- ``clearedAudio``: the acknowledgement of ``clearAudio`` (nothing for the bridge to do).

There is no ``connected``. The end of a call is the socket closing (the protocol reference lists
no stop message); the audio-streaming guide and Plivo's Java stream SDK do name a ``stop`` event
(with a ``reason``), so one is read as ``Hangup`` should it come.

Outbound, a bidirectional stream takes ``playAudio`` (``media.contentType`` ``audio/x-mulaw`` or
``audio/x-l16``, ``media.sampleRate``, base64 ``media.payload``), ``checkpoint`` (a ``name``:
Plivo answers ``playedStream`` once the audio before it has played) and ``clearAudio`` (drops
the audio buffered and not yet played; Plivo answers ``clearedAudio``). Plivo documents that
``playedStream`` "will only be emitted if the preceding events were played successfully": a
checkpoint still pending when the audio is cleared is never echoed (unlike Twilio's marks).

``extraHeaders`` admits letters and digits only besides its ``key=value,key=value`` syntax, and
the stream token (a JWT) has dots, dashes and underscores: ``pack_header_value`` writes every
other byte as ``Z`` and two hex digits (``Z`` itself too), ``unpack_header_value`` reverses it.
The ``extra_headers`` string is ``key=value`` pairs: the protocol reference's example separates
them with ``;``, the XML attribute with ``,``, and Plivo's Python stream SDK types it a "JSON
string"; all three forms are read.

A frame that is not a JSON object, lacks ``event`` or is a known event with a missing or
mistyped field raises ``PhoneFormatError`` naming the field; an event Plivo adds later is
``Unknown``. Fields the bridge does not use (``sequenceNumber``, ``media.chunk``,
``media.timestamp``, ``start.tracks``) are not checked.

Sources (Plivo's public documentation):
https://www.plivo.com/docs/voice/audio-streaming/audio-streaming (Stream Event Protocol),
https://www.plivo.com/docs/voice-agents/audio-streaming/concepts/audio-streaming-reference,
https://docs.plivo.com/docs/voice/audio-streaming/overview-doc,
https://www.plivo.com/docs/voice-agents/audio-streaming/concepts/audio-streaming-guide/,
https://docs.plivo.com/docs/voice/xml/audiostream (``extraHeaders``),
https://docs.plivo.com/docs/voice/xml/audiostream/stream-events-to-plivo/play-audio-event,
https://plivo.com/docs/voice/xml/the-stream-element/checkpoint-event,
https://docs.plivo.com/docs/voice/xml/audiostream/stream-events-to-plivo/clear-audio-stream,
https://support.plivo.com/hc/en-us/sections/32252450281369-Audio-Stream.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.edges.phone.fields import (
    DTMF_DIGITS,
    dumps,
    integer_field,
    object_field,
    start_object,
    text_field,
)
from gateway.edges.phone.wire import (
    Audio,
    CarrierEvent,
    Digit,
    Hangup,
    Ignored,
    LineFormat,
    Outgoing,
    PhoneFormatError,
    Played,
    StreamStarted,
    Unknown,
)

__all__ = [
    "TOKEN_HEADER",
    "PlivoCarrier",
    "PlivoSpeaker",
    "pack_header_value",
    "unpack_header_value",
]

TOKEN_HEADER = "token"
"""The ``extraHeaders`` key the stream token travels under."""

# Plivo's content types and the line formats they are (µ-law is 8 kHz only).
_LINES = {
    ("audio/x-mulaw", 8000): LineFormat("pcmu", 8000),
    # L16's byte order is undocumented: little-endian is assumed (a guess; the gateway's answer
    # asks for µ-law, so this is read only from a stream configured otherwise).
    ("audio/x-l16", 8000): LineFormat("pcm16", 8000),
    ("audio/x-l16", 16000): LineFormat("pcm16", 16000),
}
_CONTENT_TYPES = {line: content_type for (content_type, _), line in _LINES.items()}
_DIGITS = DTMF_DIGITS
_ESCAPE = "Z"
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYabcdefghijklmnopqrstuvwxyz0123456789")
_HEX = frozenset("0123456789ABCDEF")
# Plivo prefixes the SIP headers of <Dial> with X-PH-; whether it ever does so to a stream's
# extra headers is undocumented, so a prefixed key is read too (a guess, harmless).
_SIP_PREFIX = "x-ph-"


# -- the token in extraHeaders -------------------------------------------------------------------


def pack_header_value(value: str) -> str:
    """``value`` in the letters and digits ``extraHeaders`` admits: each UTF-8 byte that is not
    one of them, and ``Z``, becomes ``Z`` and two upper-case hex digits."""
    return "".join(
        char if char in _PLAIN else "".join(f"{_ESCAPE}{byte:02X}" for byte in char.encode())
        for char in value
    )


def unpack_header_value(packed: str) -> str:
    """The value ``pack_header_value`` packed; ``ValueError`` if ``packed`` is not such."""
    out = bytearray()
    index = 0
    while index < len(packed):
        char = packed[index]
        if char == _ESCAPE:
            pair = packed[index + 1 : index + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise ValueError(f"Z at {index} is not followed by two hex digits")
            out.append(int(pair, 16))
            index += 3
        elif char in _PLAIN:
            out.append(ord(char))
            index += 1
        else:
            raise ValueError(f"character {index} is not a letter or a digit")
    return out.decode()  # a UnicodeDecodeError is a ValueError


# -- inbound -------------------------------------------------------------------------------------


class PlivoCarrier:
    """Plivo's Audio Streams, inbound. Stateless: one instance serves every call."""

    @property
    def name(self) -> str:
        return "plivo"

    def claims(self, message: str | bytes) -> bool:
        """A ``start`` with Plivo's field names: ``start.callId``, ``start.streamId`` and
        ``start.mediaFormat`` (Twilio's start has ``callSid`` and ``streamSid``)."""
        found = start_object(message, binary=True)
        if found is None:
            return False
        start = found[1]
        return (
            isinstance(start.get("callId"), str)
            and isinstance(start.get("streamId"), str)
            and isinstance(start.get("mediaFormat"), dict)
        )

    def decode(self, message: str | bytes) -> CarrierEvent:
        try:
            body = orjson.loads(message)
        except orjson.JSONDecodeError:
            kind = "binary frame" if isinstance(message, bytes) else "frame"
            raise PhoneFormatError(f"{kind} is not JSON") from None
        if not isinstance(body, dict):
            raise PhoneFormatError(f"frame is a JSON {type(body).__name__}, not an object")
        event = text_field(body, "event")
        match event:
            case "start":
                return _started(body)
            case "media":
                return _audio(body)
            case "dtmf":
                return _digit(body)
            case "playedStream" | "played":
                return Played(text_field(body, "name"))
            case "clearedAudio":
                return Ignored(event)
            case "stop":
                # Undocumented shape (Plivo's Java SDK reads a top-level "reason"): not checked.
                reason = body.get("reason")
                return Hangup(reason if isinstance(reason, str) and reason else "stop")
            case _:
                return Unknown(event)

    def speaker(self, started: StreamStarted) -> PlivoSpeaker:
        return PlivoSpeaker(started.stream_id, started.line)


def _started(body: Mapping[str, Any]) -> StreamStarted:
    start = object_field(body, "start")
    media_format = object_field(start, "mediaFormat", "start.")
    # An encoding with parameters ("audio/x-mulaw;rate=8000") is read by its type alone.
    encoding = text_field(media_format, "encoding", "start.mediaFormat.").split(";")[0].strip()
    rate = integer_field(media_format, "sampleRate", "start.mediaFormat.")
    line = _LINES.get((encoding.lower(), rate))
    if line is None:
        raise PhoneFormatError(
            f"start.mediaFormat {encoding!r} at {rate} Hz is not audio/x-mulaw at 8000 Hz "
            "or audio/x-l16 at 8000 or 16000 Hz"
        )
    headers = _extra_headers(body.get("extra_headers"))
    token_key = next((key for key in headers if _is_token_key(key)), None)
    packed = headers.pop(token_key) if token_key is not None else None
    token = None
    if packed is not None:
        try:
            token = unpack_header_value(packed)
        except ValueError:
            raise PhoneFormatError("extra_headers token is not a packed value") from None
    return StreamStarted(
        call_id=text_field(start, "callId", "start."),
        stream_id=text_field(start, "streamId", "start."),
        token=token,
        line=line,
        parameters=headers,
    )


def _is_token_key(key: str) -> bool:
    folded = key.lower()
    return folded.removeprefix(_SIP_PREFIX) == TOKEN_HEADER


def _extra_headers(value: object) -> dict[str, str]:
    """``key=value`` pairs separated by ``;`` or ``,``, or a JSON object of strings."""
    if value is None or value == "":
        return {}
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise PhoneFormatError("extra_headers is neither key=value pairs nor JSON") from None
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items() if isinstance(v, str)}
    if not isinstance(value, str):
        raise PhoneFormatError("extra_headers must be a string")
    pairs = (item.partition("=") for item in value.replace(",", ";").split(";"))
    return {key.strip(): item.strip() for key, sep, item in pairs if sep and key.strip()}


def _audio(body: Mapping[str, Any]) -> Audio | Ignored:
    media = object_field(body, "media")
    track = media.get("track", "inbound")
    if not isinstance(track, str):
        raise PhoneFormatError("media.track must be a string")
    payload = media.get("payload")
    if not isinstance(payload, str):
        raise PhoneFormatError("media.payload must be a base64 string")
    if track != "inbound":
        # Only with audioTrack="outbound"/"both", which a bidirectional stream may not use.
        return Ignored(f"media.{track}")
    try:
        return Audio(base64.b64decode(payload, validate=True))
    except (binascii.Error, ValueError):
        raise PhoneFormatError("media.payload is not valid base64") from None


def _digit(body: Mapping[str, Any]) -> Digit:
    digit = text_field(object_field(body, "dtmf"), "digit", "dtmf.").upper()
    if digit not in _DIGITS:
        raise PhoneFormatError("dtmf.digit must be one of 0-9, *, #, A-D")
    return Digit(digit)


# -- outbound ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlivoSpeaker:
    """The outbound side of one Plivo stream: Plivo plays what it receives in the format it
    sends (switching codecs between ``playAudio`` messages is unsupported)."""

    stream_id: str
    line: LineFormat

    def __post_init__(self) -> None:
        if self.line not in _CONTENT_TYPES:
            raise ValueError(f"Plivo plays µ-law or L16, not {self.line.encoding}")

    @property
    def frame_ms(self) -> int:
        return 20  # Plivo takes any length; 20 ms keeps a barge-in's clear near-instant

    @property
    def echoes_markers(self) -> bool:
        return True

    def media(self, audio: bytes) -> Outgoing:
        """``playAudio``: the frame base64 in ``media.payload``, with its content type and
        rate. ``streamId`` is not in the documented fields; Plivo's own SDKs send it."""
        return dumps(
            {
                "event": "playAudio",
                "streamId": self.stream_id,
                "media": {
                    "contentType": _CONTENT_TYPES[self.line],
                    "sampleRate": self.line.rate,
                    "payload": base64.b64encode(audio).decode("ascii"),
                },
            }
        )

    def marker(self, name: str) -> Outgoing:
        """``checkpoint``: Plivo answers ``playedStream`` with this ``name`` once the audio
        sent before it has played (never, if that audio is cleared first)."""
        return dumps({"event": "checkpoint", "streamId": self.stream_id, "name": name})

    def clear(self) -> Outgoing:
        """``clearAudio``: Plivo drops what it buffered and answers ``clearedAudio``."""
        return dumps({"event": "clearAudio", "streamId": self.stream_id})
