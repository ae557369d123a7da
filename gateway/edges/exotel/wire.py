"""Exotel's Voicebot stream (bidirectional AgentStream) on the gateway's phone contract. Pure.

Theory of operation. Exotel opens one WebSocket per call to the URL the applet names (here the
one ``ExotelAnswerWebhook`` answered) and sends one JSON object per text frame, tagged by
``event``, with snake_case fields: ``connected`` (nothing in it), ``start`` (``stream_sid``,
``start.call_sid``, ``start.account_sid``, ``start.from``/``to``, ``start.custom_parameters``:
the query parameters of the stream URL, our ``token`` among them, and ``start.media_format``),
``media`` (``media.payload``: base64 audio, ~100 ms a message, with ``chunk`` and
``timestamp``), ``dtmf`` (``dtmf.digit``), ``mark`` (the echo of a mark of ours, once the audio
sent before it has played) and ``stop`` (``stop.reason``: ``callended`` or ``stopped``). Numbers
arrive as decimal strings in one page and as numbers in another: neither is checked, the bridge
uses none (the socket's order is the audio's: ``Audio.sequence`` stays None).

The line: ``start.media_format`` says what Exotel sends, and Exotel plays what it receives in the
same format. The pages name 16-bit little-endian PCM ``audio/x-raw`` (also ``raw``; Exotel's own
sample repository says ``linear16``) at 8000 Hz by default, 16000 with ``?sample-rate=16000`` on
the stream URL; the beta extension guide adds µ-law (``MediaFormat=audio/x-mulaw;rate=8000``).
The µ-law name in ``start`` is not shown anywhere: ``audio/x-mulaw`` (and ``mulaw``/``ulaw``/
``pcmu``) are accepted as a guess. 24000 Hz, which Exotel offers, is not a phone ``LineFormat``
here and is refused by name. ``sample_rate`` may be a string (``"8000"``) or a number.

Outbound (``ExotelSpeaker``): ``{"event":"media","stream_sid":…,"media":{"payload":…}}``, a
``mark`` with a ``name`` whose echo is ``Played``, and ``clear`` (drops the audio not yet
played). Exotel asks for chunks of 3 200 bytes ("100 ms", which is true at 16 kHz: 200 ms at
8 kHz) to 100 KB, whole multiples of 320 bytes (smaller ones risk jitter, it says): the speaker
asks the bridge for frames of that size (``frame_ms``). What Exotel does with marks still
pending when a ``clear`` arrives is not documented.

A message that is not a JSON object, has no ``event``, or is a known event with a field missing
or mistyped raises ``PhoneFormatError`` naming the field (``start.media_format.sample_rate``);
an event Exotel adds later (the beta guide mentions ``silence``) is ``Unknown``. With the beta
``Track=both``, media of the ``outbound`` track (what the caller hears) is ``Ignored``.

Sources:
- https://developer.exotel.com/docs/agentstream/websocket-protocol
- https://developer.exotel.com/docs/agentstream/stream-voicebot-applet
- https://developer.exotel.com/docs/agentstream/stream-voicebot-extension (beta: µ-law, tracks)
- https://support.exotel.com/support/solutions/articles/3000108630-working-with-the-stream-and-voicebot-applet
  (chunk sizes: 3.2k minimum, 100k maximum, multiples of 320 bytes)
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from gateway.edges.phone.fields import (
    DTMF_DIGITS,
    dumps,
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

__all__ = ["TOKEN_PARAMETER", "ExotelCarrier", "ExotelSpeaker"]

TOKEN_PARAMETER = "token"
"""The custom parameter (a query parameter of the stream URL) that carries the stream token."""
MIN_CHUNK_BYTES = 3200  # Exotel's smallest recommended media chunk

# What ``start.media_format.encoding`` may say, lower-cased and without ``;rate=…``. Exotel's
# pages show "audio/x-raw" and "raw", its sample repository "linear16"; the µ-law names are a
# guess from the beta guide's MediaFormat values (its L16 name is accepted too).
_PCM16_NAMES = frozenset({"audio/x-raw", "raw", "linear16", "audio/l16", "l16", "slin", "pcm"})
_ULAW_NAMES = frozenset({"audio/x-mulaw", "mulaw", "ulaw", "pcmu", "audio/pcmu"})
_DIGITS = DTMF_DIGITS
_MAX_RATE_DIGITS = 6


class ExotelCarrier:
    """Exotel's media-stream wire, inbound. Stateless: one instance serves every call."""

    @property
    def name(self) -> str:
        return "exotel"

    def claims(self, message: str | bytes) -> bool:
        """Exotel's ``start``: snake_case ``stream_sid`` (top level or in ``start``) and
        ``start.call_sid``. Twilio's says ``streamSid``/``callSid``, Telnyx's ``stream_id`` and
        ``start.call_control_id``, Plivo's ``streamId``/``callId``: none has both of these."""
        found = start_object(message)
        if found is None:
            return False
        parsed, body = found
        stream_sid = body.get("stream_sid", parsed.get("stream_sid"))
        return _nonempty(stream_sid) and _nonempty(body.get("call_sid"))

    def decode(self, message: str | bytes) -> CarrierEvent:
        parsed = message_object(message, "Exotel")
        event = text_field(parsed, "event")
        match event:
            case "connected":
                return Ignored(event)
            case "start":
                return _started(parsed)
            case "media":
                return _audio(parsed)
            case "dtmf":
                return Digit(_digit(object_field(parsed, "dtmf")))
            case "mark":
                return Played(text_field(object_field(parsed, "mark"), "name", "mark."))
            case "stop":
                return Hangup(_stop_reason(parsed))
            case _:
                return Unknown(event)

    def speaker(self, started: StreamStarted) -> ExotelSpeaker:
        return ExotelSpeaker(stream_sid=started.stream_id, line=started.line)


@dataclass(frozen=True, slots=True)
class ExotelSpeaker:
    """The outbound side of one Exotel stream: Exotel plays what it is sent in the format it
    sends (``line``), echoes each ``mark`` once the audio before it has played, and ``clear``
    drops what it has buffered and not yet played."""

    stream_sid: str
    line: LineFormat

    @property
    def frame_ms(self) -> int:
        """Exotel asks for chunks of 3,200 bytes at least, in multiples of 320: 100 ms of PCM16
        at 16 kHz, 200 ms at 8 kHz. µ-law (beta, undocumented sizes) gets 200 ms too (1,600
        bytes, a multiple of 320): longer would delay the start of every reply."""
        if self.line.encoding == "pcm16":
            return MIN_CHUNK_BYTES // self.line.bytes_per_ms
        return 200

    @property
    def echoes_markers(self) -> bool:
        return True

    def media(self, audio: bytes) -> Outgoing:
        sample_bytes = 2 if self.line.encoding == "pcm16" else 1
        if len(audio) % sample_bytes:
            # A partial sample would shift every sample after it (and break Exotel's rule of
            # whole multiples of 320 bytes): a bug of ours, not something to send.
            raise ValueError(f"{len(audio)} bytes is not a whole number of {self.line.encoding}")
        payload = base64.b64encode(audio).decode("ascii")
        return dumps(
            {"event": "media", "stream_sid": self.stream_sid, "media": {"payload": payload}}
        )

    def marker(self, name: str) -> Outgoing:
        return dumps({"event": "mark", "stream_sid": self.stream_sid, "mark": {"name": name}})

    def clear(self) -> Outgoing:
        return dumps({"event": "clear", "stream_sid": self.stream_sid})


# -- inbound messages ---------------------------------------------------------------------------


def _started(message: Mapping[str, Any]) -> StreamStarted:
    body = object_field(message, "start")
    stream_sid = body.get("stream_sid", message.get("stream_sid"))
    if not _nonempty(stream_sid):
        raise PhoneFormatError("start.stream_sid must be a non-empty string")
    parameters = body.get("custom_parameters", {})
    if not isinstance(parameters, dict) or not all(
        isinstance(value, str) for value in parameters.values()
    ):
        raise PhoneFormatError("start.custom_parameters must be an object of strings")
    return StreamStarted(
        call_id=text_field(body, "call_sid", "start."),
        stream_id=stream_sid,
        token=parameters.get(TOKEN_PARAMETER) or None,
        line=_line(object_field(body, "media_format", "start.")),
        parameters={key: value for key, value in parameters.items() if key != TOKEN_PARAMETER},
    )


def _line(media_format: Mapping[str, Any]) -> LineFormat:
    where = "start.media_format."
    encoding = text_field(media_format, "encoding", where).split(";", 1)[0].strip().lower()
    rate = _rate(media_format.get("sample_rate"))
    if encoding in _PCM16_NAMES:
        if rate not in (8000, 16000):
            raise PhoneFormatError(f"{where}sample_rate {rate} is not supported (8000 or 16000)")
        return LineFormat("pcm16", rate)
    if encoding in _ULAW_NAMES:
        if rate != 8000:
            raise PhoneFormatError(f"{where}sample_rate {rate} is not µ-law's 8000")
        return LineFormat("pcmu", 8000)
    raise PhoneFormatError(f"{where}encoding {encoding[:40]!r} is not PCM16 or µ-law")


def _rate(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_RATE_DIGITS
        and value.isascii()
        and value.isdigit()
    ):
        return int(value)
    raise PhoneFormatError("start.media_format.sample_rate must be a positive integer")


def _audio(message: Mapping[str, Any]) -> Audio | Ignored:
    body = object_field(message, "media")
    payload = body.get("payload")
    if not isinstance(payload, str):
        raise PhoneFormatError("media.payload must be a base64 string")
    try:
        audio = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise PhoneFormatError("media.payload is not valid base64") from None
    track = body.get("track", "inbound")
    if track != "inbound":
        return Ignored("media")  # beta Track=both: our own audio, as the caller hears it
    return Audio(audio)


def _digit(body: Mapping[str, Any]) -> str:
    digit = body.get("digit")
    if isinstance(digit, int) and not isinstance(digit, bool):
        digit = str(digit)  # numbers sometimes arrive unquoted in Exotel's samples
    if not isinstance(digit, str) or len(digit) != 1 or digit.upper() not in _DIGITS:
        raise PhoneFormatError("dtmf.digit must be one key: 0-9, *, #, A-D")
    return digit.upper()


def _stop_reason(message: Mapping[str, Any]) -> str:
    """``stop.reason`` (``callended``: the caller hung up; ``stopped``: the applet ended). Not
    required: the call is over either way, and a stop without a reason is still a stop."""
    body = message.get("stop")
    reason = body.get("reason") if isinstance(body, dict) else None
    return reason if _nonempty(reason) else "stop"


def _nonempty(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value)
