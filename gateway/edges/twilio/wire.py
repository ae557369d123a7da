"""Twilio Media Streams as a phone-bridge carrier (``gateway.edges.phone.wire``). Pure.

``codec`` reads and writes Twilio's messages; this maps them onto the carrier contract:
``start`` → ``StreamStarted`` (the call's ``callSid``, the stream token from
``customParameters``), ``media`` → µ-law audio, a ``mark`` echo → ``Played``, ``dtmf`` →
``Digit``, ``stop`` → ``Hangup``. Twilio sends µ-law 8 kHz and plays µ-law 8 kHz; it echoes our
marks, so the played position is its own.

``claims`` takes Twilio's ``start`` only (camelCase ``streamSid``/``callSid``/``accountSid``):
its ``connected`` carries ``"protocol": "Call"``, but so might another carrier's one day.
"""

from __future__ import annotations

from gateway.edges.phone.fields import start_object
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
from gateway.edges.twilio import codec

__all__ = ["TWILIO_LINE", "TwilioCarrier", "TwilioSpeaker"]

TWILIO_LINE = LineFormat("pcmu", 8000)


class TwilioSpeaker:
    """What the gateway sends on one Twilio stream."""

    line = TWILIO_LINE
    frame_ms = 20
    echoes_markers = True

    def __init__(self, stream_sid: str) -> None:
        self.stream_sid = stream_sid

    def media(self, audio: bytes) -> Outgoing:
        return codec.media(self.stream_sid, audio)

    def marker(self, name: str) -> Outgoing:
        return codec.mark(self.stream_sid, name)

    def clear(self) -> Outgoing:
        return codec.clear(self.stream_sid)


class TwilioCarrier:
    name = "twilio"

    def claims(self, message: str | bytes) -> bool:
        found = start_object(message)
        return found is not None and "callSid" in found[1] and "accountSid" in found[1]

    def decode(self, message: str | bytes) -> CarrierEvent:
        if not isinstance(message, str):
            raise PhoneFormatError("Twilio sends text frames only")
        event = codec.decode(message)  # raises PhoneFormatError itself
        match event:
            case codec.Start():
                return _started(event)
            case codec.Media(payload=payload):
                return Audio(payload)
            case codec.Mark(name=name):
                return Played(name)
            case codec.Dtmf(digit=digit):
                return Digit(digit)
            case codec.Stop():
                return Hangup("stop")
            case codec.Connected():
                return Ignored("connected")
            case codec.UnknownTwilio(event=name):
                return Unknown(name)

    def speaker(self, started: StreamStarted) -> TwilioSpeaker:
        return TwilioSpeaker(started.stream_id)


def _started(start: codec.Start) -> StreamStarted:
    media_format = start.media_format
    if media_format.encoding != "audio/x-mulaw" or media_format.sample_rate != 8000:
        raise PhoneFormatError(
            "start.mediaFormat must be audio/x-mulaw at 8000 Hz (Twilio's only format)"
        )
    parameters = dict(start.custom_parameters)
    token = parameters.pop("token", None)
    return StreamStarted(
        call_id=start.call_sid,
        stream_id=start.stream_sid,
        token=token,
        line=TWILIO_LINE,
        parameters=parameters,
    )
