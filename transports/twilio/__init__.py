"""Twilio Media Streams bridge, pure core: µ-law, the stream's messages, playback, webhooks.

- ``g711``: G.711 µ-law (and A-law) ⇄ PCM16 (8 kHz mono on a call).
- ``codec``: Twilio's inbound messages as a tagged union (``decode``); ``media``, ``mark`` and
  ``clear`` frames out.
- ``playback``: ``PlaybackTracker``, the outbound side as a state machine (20 ms frames, marks,
  played position from mark echoes, barge-in).
- ``signature``: ``X-Twilio-Signature`` validation and the ``<Connect><Stream>`` TwiML.

No I/O here: the WebSocket endpoint is a thin shell over these.
"""

from transports.twilio import g711
from transports.twilio.codec import (
    Connected,
    Dtmf,
    Mark,
    Media,
    MediaFormat,
    Start,
    Stop,
    TwilioEvent,
    TwilioFormatError,
    UnknownTwilio,
)
from transports.twilio.playback import Frame, MarkOut, PlaybackTracker, parse_mark_name
from transports.twilio.signature import connect_twiml, twilio_signature, valid_signature

__all__ = [
    "Connected",
    "Dtmf",
    "Frame",
    "Mark",
    "MarkOut",
    "Media",
    "MediaFormat",
    "PlaybackTracker",
    "Start",
    "Stop",
    "TwilioEvent",
    "TwilioFormatError",
    "UnknownTwilio",
    "connect_twiml",
    "g711",
    "parse_mark_name",
    "twilio_signature",
    "valid_signature",
]
