"""Telnyx Media Streaming (WebSocket, bidirectional RTP mode) on the gateway's phone contract.
Pure.

Theory of operation. Once a call is answered (or dialled) with a ``stream_url``, Telnyx opens one
WebSocket to it and sends one JSON object per text frame, tagged by ``event``, snake_case:

- ``connected`` (``version``; with a ``stream_auth_token`` configured, also
  ``connected.x-telnyx-streaming-auth-token``): ``Ignored``;
- ``start``: ``stream_id`` at the top, and in ``start`` the call (``call_control_id``,
  ``call_session_id``, ``from``, ``to``, ``client_state``, ``custom_parameters``) and the audio
  Telnyx sends (``media_format``: ``encoding``, ``sample_rate``, ``channels``). The gateway's
  stream token travels in ``client_state``: the answer (or dial) action sets the call's
  ``client_state`` to the token in base64, and Telnyx hands it back in ``start.client_state``
  (see ``call_control``: the answer action takes no ``custom_parameters``, and a
  ``stream_auth_token`` comes back in ``connected``, before the call is named);
- ``media``: ``media.payload`` is the base64 RTP payload (no RTP header), with ``media.track``,
  ``media.chunk``, ``media.timestamp`` and a top-level ``sequence_number``. Telnyx does not
  guarantee the order of media frames, so ``Audio.sequence`` is ``media.chunk``: it counts media
  frames only, so the numbers are contiguous for audio (``sequence_number`` counts every frame,
  ``dtmf`` and ``mark`` too, and would leave gaps that look like lost audio). Media of the
  ``outbound`` track (only sent with ``both_tracks``) is ``Ignored``;
- ``dtmf`` (``dtmf.digit``) → ``Digit``; ``mark`` (``mark.name``, the echo of a mark of ours once
  the media before it has played, or at once when nothing is queued; ``clear`` echoes the marks
  still queued) → ``Played``; ``stop`` → ``Hangup``;
- ``error`` (a problem with the stream, often with a frame we sent) → ``Unknown`` named
  ``error <code> <title>`` so that it is logged: the contract has no error case.

Numbers (``sample_rate``, ``chunk``) may be JSON numbers or decimal strings (the documented
example sends ``sequence_number`` as ``"1"``); both are read.

The line. ``start.media_format.encoding`` is ``PCMU`` or ``PCMA`` at 8000 Hz: the answer asks for
``stream_codec`` = the bidirectional codec, and Telnyx transcodes between the two G.711 laws.
``L16`` (16-bit PCM, network byte order) is refused by name: the adapter is stateless, so a
``media`` frame cannot know that its stream's samples need swapping to little-endian; G.722,
Opus and AMR-WB are refused too. What Telnyx plays is the ``stream_bidirectional_codec`` the
answer named, the carrier's ``codec`` (``TelnyxSpeaker.line``), which the bridge sends as is.

Outbound (``TelnyxSpeaker``): ``{"event":"media","media":{"payload":…}}`` (20 ms to 30 s of RTP
payload a frame), ``{"event":"mark","mark":{"name":…}}`` and ``{"event":"clear"}`` (stops the
playback and drops the queued media). The documented client frames name no ``stream_id``: the
socket is the stream.

A frame that is not a JSON text object, has no ``event``, or is a known event with a field
missing or mistyped raises ``PhoneFormatError`` naming the field (``start.media_format.encoding``);
an event Telnyx adds later is ``Unknown``.

Sources:
- https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket
  (frames, ordering, bidirectional RTP, marks and clear)
- https://developers.telnyx.com/docs/voice/programmable-voice/media-streaming
- https://developers.telnyx.com/api-reference/call-commands/answer-call (``stream_codec``,
  ``stream_bidirectional_codec``, ``client_state``)
- RFC 3551 section 4.5.11 (L16 is in network byte order)
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Literal

from gateway.edges.phone.fields import (
    dumps,
    integer_field,
    message_object,
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

__all__ = ["CODECS", "Codec", "TelnyxCarrier", "TelnyxSpeaker"]

Codec = Literal["PCMU", "PCMA"]
CODECS: tuple[Codec, ...] = ("PCMU", "PCMA")

_LINES: dict[str, LineFormat] = {
    "PCMU": LineFormat("pcmu", 8000),
    "PCMA": LineFormat("pcma", 8000),
}


class TelnyxSpeaker:
    """The outbound side of one Telnyx stream: frames in the bidirectional codec."""

    def __init__(self, line: LineFormat) -> None:
        self._line = line

    @property
    def line(self) -> LineFormat:
        return self._line

    @property
    def frame_ms(self) -> int:
        return 20  # Telnyx takes 20 ms to 30 s a frame; 20 ms keeps a barge-in's clear prompt

    @property
    def echoes_markers(self) -> bool:
        return True

    def media(self, audio: bytes) -> Outgoing:
        payload = base64.b64encode(audio).decode("ascii")
        return dumps({"event": "media", "media": {"payload": payload}})

    def marker(self, name: str) -> Outgoing:
        return dumps({"event": "mark", "mark": {"name": name}})

    def clear(self) -> Outgoing:
        return dumps({"event": "clear"})


class TelnyxCarrier:
    """Telnyx's media-stream wire, inbound. ``codec``: the ``stream_bidirectional_codec`` the
    gateway's answer and dial actions name, i.e. what Telnyx plays (``TELNYX_CODEC``)."""

    def __init__(self, codec: Codec = "PCMU") -> None:
        if codec not in _LINES:
            raise ValueError(f"the Telnyx codec is PCMU or PCMA, not {codec!r}")
        self._line = _LINES[codec]

    @property
    def name(self) -> str:
        return "telnyx"

    def claims(self, message: str | bytes) -> bool:
        """A ``start`` with Telnyx's own names: ``stream_id`` at the top, ``call_control_id``
        and ``media_format`` inside."""
        found = start_object(message)
        if found is None:
            return False
        frame, body = found
        return (
            isinstance(frame.get("stream_id"), str)
            and isinstance(body.get("call_control_id"), str)
            and isinstance(body.get("media_format"), dict)
        )

    def decode(self, message: str | bytes) -> CarrierEvent:
        frame = message_object(message, "Telnyx")
        event = text_field(frame, "event")
        match event:
            case "connected":
                return Ignored("connected")
            case "start":
                return _start(frame)
            case "media":
                return _media(frame)
            case "dtmf":
                return Digit(text_field(object_field(frame, "dtmf"), "digit", "dtmf."))
            case "mark":
                return Played(text_field(object_field(frame, "mark"), "name", "mark."))
            case "stop":
                return Hangup("stop")
            case "error":
                return Unknown(_error_name(frame))
            case _:
                return Unknown(event)

    def speaker(self, started: StreamStarted) -> TelnyxSpeaker:
        # What Telnyx plays is the codec the answer asked for, whatever the start says it sends.
        return TelnyxSpeaker(self._line)


def _start(frame: Mapping[str, Any]) -> StreamStarted:
    body = object_field(frame, "start")
    parameters = body.get("custom_parameters", {})
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict) or not all(
        isinstance(value, str) for value in parameters.values()
    ):
        raise PhoneFormatError("start.custom_parameters must be an object of strings")
    return StreamStarted(
        call_id=text_field(body, "call_control_id", "start."),
        stream_id=text_field(frame, "stream_id"),
        token=_client_state(body.get("client_state")),
        line=_line(object_field(body, "media_format", "start.")),
        parameters=dict(parameters),
    )


def _client_state(value: object) -> str | None:
    """The stream token: ``start.client_state`` is the call's client state, the token in base64
    (None when the call has none)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PhoneFormatError("start.client_state must be a base64 string")
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise PhoneFormatError("start.client_state is not base64 of UTF-8 text") from None


def _line(media_format: Mapping[str, Any]) -> LineFormat:
    where = "start.media_format."
    encoding = text_field(media_format, "encoding", where).upper()
    rate = integer_field(media_format, "sample_rate", where)
    channels = integer_field(media_format, "channels", where) if "channels" in media_format else 1
    if channels != 1:
        raise PhoneFormatError(f"{where}channels must be 1, not {channels}")
    if encoding not in _LINES:
        raise PhoneFormatError(
            f"{where}encoding {encoding[:16]!r} is not supported (PCMU or PCMA at 8000 Hz)"
        )
    if rate != 8000:
        raise PhoneFormatError(f"{where}sample_rate of {encoding} must be 8000, not {rate}")
    return _LINES[encoding]


def _media(frame: Mapping[str, Any]) -> CarrierEvent:
    body = object_field(frame, "media")
    track = body.get("track")
    if isinstance(track, str) and track.startswith("outbound"):
        return Ignored("media")  # what the caller hears, sent back with both_tracks
    payload = body.get("payload")
    if not isinstance(payload, str):
        raise PhoneFormatError("media.payload must be a base64 string")
    try:
        audio = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise PhoneFormatError("media.payload is not valid base64") from None
    return Audio(audio, sequence=integer_field(body, "chunk", "media."))


def _error_name(frame: Mapping[str, Any]) -> str:
    """``error <code> <title>`` from an error frame, whatever of it is there: an error frame is
    logged, never refused for its own shape."""
    body = frame.get("payload")
    if not isinstance(body, dict):
        return "error"
    parts = ["error"]
    for key in ("code", "title"):
        value = body.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            parts.append(str(value)[:64])
    return " ".join(parts)
