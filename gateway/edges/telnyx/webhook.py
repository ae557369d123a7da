"""Telnyx Call Control webhooks: the Ed25519 signature, the events as a tagged union, and the
``AnswerWebhook`` of the phone core. Pure: no I/O, no clock (``now`` is passed in).

The signature. Telnyx signs every webhook with the account's Ed25519 key: the header
``telnyx-signature-ed25519`` is the base64 signature (64 bytes) of ``f"{timestamp}|{body}"``, the
timestamp being the header ``telnyx-timestamp`` (Unix seconds) and the body the raw bytes as sent
(never JSON re-serialised). It verifies with the account's public key (base64, 32 bytes: Mission
Control, Keys & Credentials, Public Key). A timestamp more than 300 s from ``now`` either way is
refused (a replay). There is no expected signature to compare in constant time: the Ed25519
verification is the check, and a refusal never repeats the signature.

The events. Telnyx POSTs ``{"data": {"event_type": …, "id": …, "occurred_at": …, "payload":
{…}, "record_type": "event"}, "meta": {…}}`` to the Call Control App's webhook URL for every
event of every call. ``parse_event`` reads the few the gateway acts on: ``call.initiated`` (a new
call; ``direction`` ``incoming`` is answered with ``call_control.answer_request``),
``call.answered``, ``call.hangup`` (``hangup_cause``: ``normal_clearing``, ``user_busy``,
``timeout``, ``call_rejected``, ``unspecified``…), ``call.machine.detection.ended`` (and its
premium twin; ``result``: ``human``, ``machine``, ``not_sure``…); any other is
``UnknownCallEvent``. Telnyx may deliver a webhook twice or out of order.

The answer. Telnyx's webhook answer carries no document: the call is answered by a REST command.
``TelnyxAnswerWebhook.answer`` returns the JSON body of that command
(``call_control.answer_request``) for the caller to POST to ``/v2/calls/{id}/actions/answer``;
the webhook itself is acknowledged with any 2xx.

Sources:
- https://developers.telnyx.com/docs/development/api-fundamentals/webhooks (Ed25519, replay
  window)
- https://developers.telnyx.com/docs/development/sdk/python/webhooks (public key, raw body)
- https://developers.telnyx.com/docs/voice/programmable-voice/receiving-webhooks
- https://developers.telnyx.com/api-reference/callbacks/call-hangup (envelope, hangup causes)
- https://developers.telnyx.com/api-reference/call-commands/answer-call
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Literal

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gateway.edges.phone.fields import object_field, text_field
from gateway.edges.phone.webhook import Answer, WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError
from gateway.edges.telnyx.call_control import answer_request
from gateway.edges.telnyx.wire import CODECS, Codec

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "TOLERANCE_S",
    "CallAnswered",
    "CallEvent",
    "CallHangup",
    "CallInitiated",
    "MachineDetectionEnded",
    "TelnyxAnswerWebhook",
    "UnknownCallEvent",
    "load_public_key",
    "parse_event",
    "signature_refusal",
]

SIGNATURE_HEADER = "telnyx-signature-ed25519"
TIMESTAMP_HEADER = "telnyx-timestamp"
TOLERANCE_S = 300.0
_MAX_DIGITS = 12  # Unix seconds have 10 digits until the year 2286


def load_public_key(encoded: str) -> Ed25519PublicKey:
    """The account's public key from its base64 form; ``ValueError`` if it is not one."""
    try:
        raw = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the Telnyx public key is not base64") from None
    if len(raw) != 32:
        raise ValueError(f"the Telnyx public key is 32 bytes, not {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def signature_refusal(
    key: Ed25519PublicKey,
    body: bytes,
    timestamp: str | None,
    signature: str | None,
    now: float,
    tolerance_s: float = TOLERANCE_S,
) -> str | None:
    """Why a webhook with these headers is not Telnyx's (None if it is)."""
    if not signature:
        return f"no {SIGNATURE_HEADER} header"
    if not timestamp:
        return f"no {TIMESTAMP_HEADER} header"
    if not (len(timestamp) <= _MAX_DIGITS and timestamp.isascii() and timestamp.isdigit()):
        return f"{TIMESTAMP_HEADER} is not Unix seconds"
    skew = abs(now - int(timestamp))
    if skew > tolerance_s:
        return f"timestamp is {skew:.0f} s from now (more than {tolerance_s:.0f})"
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return "signature is not base64"
    if len(raw) != 64:
        return "signature is not 64 bytes"
    try:
        key.verify(raw, timestamp.encode("ascii") + b"|" + body)
    except InvalidSignature:
        return "signature does not match the body and timestamp"
    return None


# -- events -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallInitiated:
    """A call began: ``direction`` ``incoming`` (answer it) or ``outgoing`` (one we dialled)."""

    call_control_id: str
    direction: str
    from_: str
    to: str
    type: Literal["call.initiated"] = "call.initiated"


@dataclass(frozen=True, slots=True)
class CallAnswered:
    call_control_id: str
    type: Literal["call.answered"] = "call.answered"


@dataclass(frozen=True, slots=True)
class CallHangup:
    """The call ended; ``cause`` is Telnyx's ``hangup_cause`` (``unspecified`` when absent),
    ``source`` its ``hangup_source`` (``caller``, ``callee``, ``unknown``) when given."""

    call_control_id: str
    cause: str
    source: str | None = None
    type: Literal["call.hangup"] = "call.hangup"


@dataclass(frozen=True, slots=True)
class MachineDetectionEnded:
    """Answering machine detection's verdict: ``human``, ``machine`` or ``not_sure`` (premium:
    ``human_residence``, ``human_business``, ``machine``, ``silence``, ``fax_detected``)."""

    call_control_id: str
    result: str
    premium: bool = False
    type: Literal["call.machine.detection.ended"] = "call.machine.detection.ended"

    @property
    def is_human(self) -> bool:
        return self.result.startswith("human")


@dataclass(frozen=True, slots=True)
class UnknownCallEvent:
    """An event the gateway does not act on (``streaming.started``, ``call.bridged``…)."""

    event_type: str
    call_control_id: str | None = None
    type: Literal["unknown"] = "unknown"


CallEvent = CallInitiated | CallAnswered | CallHangup | MachineDetectionEnded | UnknownCallEvent

_MACHINE_EVENTS = {
    "call.machine.detection.ended": False,
    "call.machine.premium.detection.ended": True,
}


def parse_event(body: bytes) -> CallEvent:
    """A webhook's raw body → its event; ``PhoneFormatError`` naming the field if malformed."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PhoneFormatError("webhook body is not JSON") from None
    if not isinstance(message, dict):
        raise PhoneFormatError("webhook body is not a JSON object")
    data = object_field(message, "data")
    event_type = text_field(data, "event_type", "data.")
    payload = data.get("payload")
    if event_type not in (
        "call.initiated",
        "call.answered",
        "call.hangup",
        *_MACHINE_EVENTS,
    ):
        call = payload.get("call_control_id") if isinstance(payload, dict) else None
        return UnknownCallEvent(event_type, call if isinstance(call, str) and call else None)
    payload = object_field(data, "payload", "data.")
    call_control_id = text_field(payload, "call_control_id", "data.payload.")
    match event_type:
        case "call.initiated":
            return CallInitiated(
                call_control_id,
                direction=text_field(payload, "direction", "data.payload."),
                from_=text_field(payload, "from", "data.payload."),
                to=text_field(payload, "to", "data.payload."),
            )
        case "call.answered":
            return CallAnswered(call_control_id)
        case "call.hangup":
            cause = payload.get("hangup_cause")
            source = payload.get("hangup_source")
            return CallHangup(
                call_control_id,
                cause=cause if isinstance(cause, str) and cause else "unspecified",
                source=source if isinstance(source, str) and source else None,
            )
        case _:
            return MachineDetectionEnded(
                call_control_id,
                result=text_field(payload, "result", "data.payload."),
                premium=_MACHINE_EVENTS[event_type],
            )


# -- the phone core's AnswerWebhook ---------------------------------------------------------------


class TelnyxAnswerWebhook:
    """Telnyx's webhook on the phone core's contract. ``public_key``: ``TELNYX_PUBLIC_KEY``
    (base64); ``codec``: ``TELNYX_CODEC``, what the stream carries both ways."""

    def __init__(
        self, public_key: str, *, codec: Codec = "PCMU", tolerance_s: float = TOLERANCE_S
    ) -> None:
        if codec not in CODECS:
            raise ValueError(f"the Telnyx codec is PCMU or PCMA, not {codec!r}")
        self._key = load_public_key(public_key)
        self._codec: Codec = codec
        self._tolerance_s = tolerance_s

    @property
    def name(self) -> str:
        return "telnyx"

    def refusal(self, request: WebhookRequest) -> str | None:
        if request.method != "POST":
            return f"Telnyx webhooks are POSTs, not {request.method[:10]}"
        return signature_refusal(
            self._key,
            request.body,
            request.headers.get(TIMESTAMP_HEADER),
            request.headers.get(SIGNATURE_HEADER),
            request.now,
            self._tolerance_s,
        )

    def event(self, request: WebhookRequest) -> CallEvent:
        return parse_event(request.body)

    def call_id(self, request: WebhookRequest) -> str:
        """The ``call_control_id`` of the event, whichever it is."""
        event = parse_event(request.body)
        if event.call_control_id is None:
            raise PhoneFormatError("data.payload.call_control_id must be a non-empty string")
        return event.call_control_id

    def answer(self, stream_url: str, token: str, call_id: str) -> Answer:
        """The body of the answer command for ``call_id`` (JSON), to POST to
        ``/v2/calls/{call_id}/actions/answer``: Telnyx reads no document from the webhook's
        HTTP answer."""
        request = answer_request(call_id, stream_url, token, codec=self._codec)
        return Answer(content_type="application/json", body=request.json().decode())
