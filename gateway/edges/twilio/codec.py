"""Twilio Media Streams messages: inbound text frames → a tagged union, outbound commands → text.

Theory of operation. Twilio sends one JSON object per WebSocket text frame, tagged by ``event``:
``connected`` once, ``start`` with the stream's identity and ``<Parameter>`` values, ``media``
with base64 µ-law 8 kHz (20 ms per message in practice), ``mark`` when it has played everything
sent before a mark of ours, ``dtmf`` for a key press and ``stop`` when the call ends. ``decode``
turns one frame into a frozen event; an event Twilio adds later becomes ``UnknownTwilio`` rather
than an error. Numbers such as ``chunk`` and ``timestamp`` arrive as decimal strings and are read
as ints (plain ints are accepted too). Fields the bridge does not use (``sequenceNumber``, the
DTMF ``track``) are not checked.

A frame that is not a JSON object, lacks ``event``, or is a known event with a missing or
mistyped field raises ``TwilioFormatError`` naming the field (``start.mediaFormat.sampleRate``):
the peer broke the protocol, not us.

Outbound, ``media``, ``mark`` and ``clear`` return the compact JSON of one text frame.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from transports.base import TransportError

__all__ = [
    "Connected",
    "Dtmf",
    "Mark",
    "Media",
    "MediaFormat",
    "Start",
    "Stop",
    "TwilioEvent",
    "TwilioFormatError",
    "UnknownTwilio",
    "clear",
    "decode",
    "mark",
    "media",
]


class TwilioFormatError(TransportError, ValueError):
    """A frame from Twilio that does not follow the Media Streams protocol."""


@dataclass(frozen=True, slots=True)
class Connected:
    protocol: str
    version: str
    type: Literal["connected"] = "connected"


@dataclass(frozen=True, slots=True)
class MediaFormat:
    encoding: str
    sample_rate: int
    channels: int


@dataclass(frozen=True, slots=True)
class Start:
    stream_sid: str
    call_sid: str
    account_sid: str
    tracks: tuple[str, ...]
    custom_parameters: dict[str, str] = field(hash=False)
    media_format: MediaFormat
    type: Literal["start"] = "start"


@dataclass(frozen=True, slots=True)
class Media:
    """Audio of one track; ``payload`` is µ-law 8 kHz, already base64-decoded."""

    stream_sid: str
    track: str
    chunk: int
    timestamp_ms: int
    payload: bytes = field(repr=False)
    type: Literal["media"] = "media"


@dataclass(frozen=True, slots=True)
class Mark:
    """Twilio played everything sent before our mark ``name``."""

    stream_sid: str
    name: str
    type: Literal["mark"] = "mark"


@dataclass(frozen=True, slots=True)
class Dtmf:
    stream_sid: str
    digit: str
    type: Literal["dtmf"] = "dtmf"


@dataclass(frozen=True, slots=True)
class Stop:
    stream_sid: str
    call_sid: str
    type: Literal["stop"] = "stop"


@dataclass(frozen=True, slots=True)
class UnknownTwilio:
    event: str
    raw: dict[str, Any] = field(repr=False, hash=False)
    type: Literal["unknown"] = "unknown"


_MAX_DIGITS = 18  # int("9" * 5000) is a ValueError in Python 3.11+; no real field is that long

TwilioEvent = Connected | Start | Media | Mark | Dtmf | Stop | UnknownTwilio


def decode(text: str) -> TwilioEvent:
    """One text frame from Twilio → its event; ``TwilioFormatError`` if it is malformed."""
    try:
        message = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise TwilioFormatError(f"frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise TwilioFormatError(f"frame is a JSON {type(message).__name__}, not an object")
    event = _text(message, "event", "")
    match event:
        case "connected":
            return Connected(_text(message, "protocol"), _text(message, "version"))
        case "start":
            return _start(message)
        case "media":
            return _media(message)
        case "mark":
            body = _object(message, "mark")
            return Mark(_text(message, "streamSid"), _text(body, "name", "mark."))
        case "dtmf":
            body = _object(message, "dtmf")
            return Dtmf(_text(message, "streamSid"), _text(body, "digit", "dtmf."))
        case "stop":
            body = _object(message, "stop")
            return Stop(_text(message, "streamSid"), _text(body, "callSid", "stop."))
        case _:
            return UnknownTwilio(event, message)


def media(stream_sid: str, ulaw: bytes) -> str:
    """Audio to play: µ-law 8 kHz, base64 in ``media.payload``."""
    payload = base64.b64encode(ulaw).decode("ascii")
    return _dumps({"event": "media", "streamSid": stream_sid, "media": {"payload": payload}})


def mark(stream_sid: str, name: str) -> str:
    """Ask Twilio to echo ``name`` once everything sent before it has played."""
    return _dumps({"event": "mark", "streamSid": stream_sid, "mark": {"name": name}})


def clear(stream_sid: str) -> str:
    """Drop all audio Twilio has buffered; outstanding marks echo at once."""
    return _dumps({"event": "clear", "streamSid": stream_sid})


def _start(message: Mapping[str, Any]) -> Start:
    body = _object(message, "start")
    tracks = body.get("tracks")
    if not isinstance(tracks, list) or not all(isinstance(t, str) for t in tracks):
        raise TwilioFormatError("start.tracks must be a list of strings")
    parameters = body.get("customParameters", {})
    if not isinstance(parameters, dict) or not all(
        isinstance(value, str) for value in parameters.values()
    ):
        raise TwilioFormatError("start.customParameters must be an object of strings")
    media_format = _object(body, "mediaFormat", "start.")
    stream_sid = body.get("streamSid", message.get("streamSid"))
    if not isinstance(stream_sid, str) or not stream_sid:
        raise TwilioFormatError("start.streamSid must be a non-empty string")
    return Start(
        stream_sid=stream_sid,
        call_sid=_text(body, "callSid", "start."),
        account_sid=_text(body, "accountSid", "start."),
        tracks=tuple(tracks),
        custom_parameters=dict(parameters),
        media_format=MediaFormat(
            encoding=_text(media_format, "encoding", "start.mediaFormat."),
            sample_rate=_integer(media_format, "sampleRate", "start.mediaFormat."),
            channels=_integer(media_format, "channels", "start.mediaFormat."),
        ),
    )


def _media(message: Mapping[str, Any]) -> Media:
    body = _object(message, "media")
    payload = body.get("payload")
    if not isinstance(payload, str):
        raise TwilioFormatError("media.payload must be a base64 string")
    try:
        audio = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise TwilioFormatError("media.payload is not valid base64") from None
    return Media(
        stream_sid=_text(message, "streamSid"),
        track=_text(body, "track", "media."),
        chunk=_integer(body, "chunk", "media."),
        timestamp_ms=_integer(body, "timestamp", "media."),
        payload=audio,
    )


def _object(message: Mapping[str, Any], key: str, where: str = "") -> Mapping[str, Any]:
    value = message.get(key)
    if not isinstance(value, dict):
        raise TwilioFormatError(f"{where}{key} must be an object")
    return value


def _text(message: Mapping[str, Any], key: str, where: str = "") -> str:
    value = message.get(key)
    if not isinstance(value, str) or not value:
        raise TwilioFormatError(f"{where}{key} must be a non-empty string")
    return value


def _integer(message: Mapping[str, Any], key: str, where: str = "") -> int:
    """A non-negative int, sent as a decimal string (Twilio's habit) or as a number."""
    value = message.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit():
        return int(value)
    raise TwilioFormatError(f"{where}{key} must be a non-negative integer")


def _dumps(message: Mapping[str, Any]) -> str:
    return orjson.dumps(message).decode()
