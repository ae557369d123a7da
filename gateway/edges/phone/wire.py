"""What a phone carrier's media stream means to the gateway: the contract every carrier adapter
implements, and the events its messages become. Pure: no I/O, no clock.

A carrier (Twilio, Telnyx, Plivo, Vonage, Exotel) opens a WebSocket to the gateway for each call
and speaks its own JSON (or, for Vonage, binary audio beside JSON). Its adapter is two small
objects:

- a ``Carrier``: ``claims`` says whether a message is this carrier's (``/phone/media`` serves
  every carrier on one URL and asks each in turn), ``decode`` turns one inbound message into a
  ``CarrierEvent``, and ``speaker`` binds the outbound side to the stream that started;
- a ``Speaker``: the messages the gateway sends on that stream (audio, a marker whose echo tells
  what the caller has heard, ``clear`` for barge-in) and the audio format the carrier plays.

The phone bridge (``gateway.edges.phone.bridge``) does the rest for every carrier alike: the
voice session, pacing at real time, the played position, DTMF confirmations, the farewell.

Events are a tagged union with an unknown case: a message the carrier adds later becomes
``Unknown`` (logged, ignored), one the bridge has no use for (``connected``, a checkpoint's
acknowledgement) ``Ignored``. A message that breaks the carrier's documented format raises
``PhoneFormatError`` naming what is wrong; the bridge logs it and goes on with the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from transports.base import TransportError

__all__ = [
    "Audio",
    "Carrier",
    "CarrierEvent",
    "Digit",
    "Hangup",
    "Ignored",
    "LineFormat",
    "Outgoing",
    "PhoneFormatError",
    "Played",
    "Speaker",
    "StreamStarted",
    "Unknown",
]

Encoding = Literal["pcmu", "pcma", "pcm16"]
Outgoing = str | bytes  # a text frame (JSON) or a binary frame


class PhoneFormatError(TransportError, ValueError):
    """A message from a carrier that does not follow its documented media-stream format."""


@dataclass(frozen=True, slots=True)
class LineFormat:
    """Audio on a phone line, one direction: G.711 µ-law or A-law at 8 kHz, or 16-bit
    little-endian PCM (8 or 16 kHz). Mono."""

    encoding: Encoding
    rate: int

    def __post_init__(self) -> None:
        if self.encoding not in ("pcmu", "pcma", "pcm16"):
            raise ValueError(f"unknown line encoding {self.encoding!r}")
        if self.encoding != "pcm16" and self.rate != 8000:
            raise ValueError(f"{self.encoding} is 8000 Hz")
        if self.rate not in (8000, 16000):
            raise ValueError(f"a phone line is 8000 or 16000 Hz, not {self.rate}")

    @property
    def bytes_per_ms(self) -> int:
        return self.rate // 1000 * (2 if self.encoding == "pcm16" else 1)

    @property
    def silence(self) -> bytes:
        """One sample of silence in this encoding (padding for a reply's last frame)."""
        return {"pcmu": b"\xff", "pcma": b"\xd5", "pcm16": b"\x00\x00"}[self.encoding]


# -- inbound events -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamStarted:
    """The stream of one call began: who the call is and what the carrier sends.

    ``call_id`` is the carrier's id of the call (the one the answer webhook saw, so the stream
    token bound to it can be checked); ``stream_id`` the id the carrier gives this stream
    (outbound messages name it); ``token`` the stream token the gateway's answer handed the
    carrier (None if the message carries none); ``line`` the audio the carrier sends;
    ``parameters`` the other custom parameters, for the log."""

    call_id: str
    stream_id: str
    token: str | None
    line: LineFormat
    parameters: Mapping[str, str] = field(default_factory=dict, hash=False)
    type: Literal["started"] = "started"


@dataclass(frozen=True, slots=True)
class Audio:
    """Caller audio in the stream's ``line`` format, already decoded from base64.
    ``sequence``: the carrier's ordering number when frames may arrive out of order (Telnyx),
    None when the socket's order is the audio's."""

    payload: bytes = field(repr=False)
    sequence: int | None = None
    type: Literal["audio"] = "audio"


@dataclass(frozen=True, slots=True)
class Played:
    """The carrier has played everything sent before the marker ``name`` (a Twilio or Exotel
    ``mark`` echo, a Plivo ``playedStream``)."""

    name: str
    type: Literal["played"] = "played"


@dataclass(frozen=True, slots=True)
class Digit:
    """A key the caller pressed (DTMF)."""

    digit: str
    type: Literal["digit"] = "digit"


@dataclass(frozen=True, slots=True)
class Hangup:
    """The carrier ends the stream (the call is over)."""

    reason: str
    type: Literal["hangup"] = "hangup"


@dataclass(frozen=True, slots=True)
class Ignored:
    """A known message with nothing for the bridge to do (``connected``, an acknowledgement)."""

    event: str
    type: Literal["ignored"] = "ignored"


@dataclass(frozen=True, slots=True)
class Unknown:
    """A message this adapter does not know (a carrier's later addition): logged, ignored."""

    event: str
    type: Literal["unknown"] = "unknown"


CarrierEvent = StreamStarted | Audio | Played | Digit | Hangup | Ignored | Unknown


# -- the adapter's contract ---------------------------------------------------------------------


class Speaker(Protocol):
    """The outbound side of one stream, bound to it by ``Carrier.speaker``."""

    @property
    def line(self) -> LineFormat:
        """The audio the carrier plays: the bridge sends whole frames in it."""
        ...

    @property
    def frame_ms(self) -> int:
        """How much audio each media message carries: 20 ms for most carriers, more where the
        carrier asks for larger chunks (Exotel)."""
        ...

    @property
    def echoes_markers(self) -> bool:
        """Whether the carrier tells when audio sent before a marker has played. Without it
        the bridge takes the played position from its own clock."""
        ...

    def media(self, audio: bytes) -> Outgoing:
        """One frame of audio to play: ``frame_ms`` of it in the ``line`` format."""
        ...

    def marker(self, name: str) -> Outgoing:
        """Ask for ``Played(name)`` once everything sent before it has played (only called
        when ``echoes_markers``)."""
        ...

    def clear(self) -> Outgoing:
        """Barge-in: drop everything the carrier has buffered and not yet played."""
        ...


class Carrier(Protocol):
    """One carrier's media-stream wire, inbound. Stateless: one instance serves every call."""

    @property
    def name(self) -> str:
        """``twilio``, ``telnyx``, ``plivo``, ``vonage``, ``exotel``: in logs and metrics."""
        ...

    def claims(self, message: str | bytes) -> bool:
        """Whether ``message``, one of the first of a stream, is unmistakably this carrier's.
        Never raises: a message that is not even JSON is simply not claimed."""
        ...

    def decode(self, message: str | bytes) -> CarrierEvent:
        """One inbound message → its event; raises ``PhoneFormatError`` if malformed."""
        ...

    def speaker(self, started: StreamStarted) -> Speaker:
        """The outbound side of the stream ``started`` began."""
        ...
