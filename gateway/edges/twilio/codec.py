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

from gateway.edges.phone.fields import (
    dumps,
    integer_field,
    message_object,
    object_field,
    text_field,
)
from gateway.edges.phone.wire import PhoneFormatError

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


TwilioFormatError = PhoneFormatError  # a frame that does not follow the Media Streams protocol


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


TwilioEvent = Connected | Start | Media | Mark | Dtmf | Stop | UnknownTwilio


def decode(text: str) -> TwilioEvent:
    """One text frame from Twilio → its event; ``TwilioFormatError`` if it is malformed."""
    message = message_object(text, "Twilio")
    event = text_field(message, "event", "")
    match event:
        case "connected":
            return Connected(text_field(message, "protocol"), text_field(message, "version"))
        case "start":
            return _start(message)
        case "media":
            return _media(message)
        case "mark":
            body = object_field(message, "mark")
            return Mark(text_field(message, "streamSid"), text_field(body, "name", "mark."))
        case "dtmf":
            body = object_field(message, "dtmf")
            return Dtmf(text_field(message, "streamSid"), text_field(body, "digit", "dtmf."))
        case "stop":
            body = object_field(message, "stop")
            return Stop(text_field(message, "streamSid"), text_field(body, "callSid", "stop."))
        case _:
            return UnknownTwilio(event, message)


def media(stream_sid: str, ulaw: bytes) -> str:
    """Audio to play: µ-law 8 kHz, base64 in ``media.payload``."""
    payload = base64.b64encode(ulaw).decode("ascii")
    return dumps({"event": "media", "streamSid": stream_sid, "media": {"payload": payload}})


def mark(stream_sid: str, name: str) -> str:
    """Ask Twilio to echo ``name`` once everything sent before it has played."""
    return dumps({"event": "mark", "streamSid": stream_sid, "mark": {"name": name}})


def clear(stream_sid: str) -> str:
    """Drop all audio Twilio has buffered; outstanding marks echo at once."""
    return dumps({"event": "clear", "streamSid": stream_sid})


def _start(message: Mapping[str, Any]) -> Start:
    body = object_field(message, "start")
    tracks = body.get("tracks")
    if not isinstance(tracks, list) or not all(isinstance(t, str) for t in tracks):
        raise TwilioFormatError("start.tracks must be a list of strings")
    parameters = body.get("customParameters", {})
    if not isinstance(parameters, dict) or not all(
        isinstance(value, str) for value in parameters.values()
    ):
        raise TwilioFormatError("start.customParameters must be an object of strings")
    media_format = object_field(body, "mediaFormat", "start.")
    stream_sid = body.get("streamSid", message.get("streamSid"))
    if not isinstance(stream_sid, str) or not stream_sid:
        raise TwilioFormatError("start.streamSid must be a non-empty string")
    return Start(
        stream_sid=stream_sid,
        call_sid=text_field(body, "callSid", "start."),
        account_sid=text_field(body, "accountSid", "start."),
        tracks=tuple(tracks),
        custom_parameters=dict(parameters),
        media_format=MediaFormat(
            encoding=text_field(media_format, "encoding", "start.mediaFormat."),
            sample_rate=integer_field(media_format, "sampleRate", "start.mediaFormat."),
            channels=integer_field(media_format, "channels", "start.mediaFormat."),
        ),
    )


def _media(message: Mapping[str, Any]) -> Media:
    body = object_field(message, "media")
    payload = body.get("payload")
    if not isinstance(payload, str):
        raise TwilioFormatError("media.payload must be a base64 string")
    try:
        audio = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise TwilioFormatError("media.payload is not valid base64") from None
    return Media(
        stream_sid=text_field(message, "streamSid"),
        track=text_field(body, "track", "media."),
        chunk=integer_field(body, "chunk", "media."),
        timestamp_ms=integer_field(body, "timestamp", "media."),
        payload=audio,
    )
