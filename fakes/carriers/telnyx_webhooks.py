"""Telnyx Call Control webhooks as Telnyx sends them: signed with an Ed25519 key pair of the
simulated account, in Telnyx's envelope. For the gateway's tests (``webhook_request`` builds one
rightly or wrongly signed) and for the fake REST API (``fakes.carriers.telnyx_api``), which
POSTs them to the gateway.

Written apart from the gateway's verifier, from the documentation: the headers
``telnyx-signature-ed25519`` (base64 of the 64-byte Ed25519 signature of
``f"{timestamp}|{raw body}"``) and ``telnyx-timestamp`` (Unix seconds); the body
``{"data": {"record_type": "event", "event_type": …, "id": …, "occurred_at": …, "payload": {…}},
"meta": {"attempt": 1, "delivered_to": url}}``. ``SignedWebhook`` has the fields of the phone
core's ``WebhookRequest`` (headers in lower case), so a test builds one with
``WebhookRequest(**signed.fields())``.

Sources:
- https://developers.telnyx.com/docs/development/api-fundamentals/webhooks
- https://developers.telnyx.com/docs/voice/programmable-voice/receiving-webhooks
- https://developers.telnyx.com/api-reference/callbacks/call-hangup (the envelope)
"""

from __future__ import annotations

import base64
import secrets
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fakes.carriers.stream_kit import CarrierRequest

__all__ = [
    "CallIds",
    "SignedWebhook",
    "SigningFault",
    "WebhookSigner",
    "event_body",
    "webhook_request",
]

SigningFault = Literal["wrong-key", "tampered", "unsigned", "no-timestamp", "stale", "future"]
_STALE_S = 301  # Telnyx's SDKs and the gateway allow 300 s either way


class WebhookSigner:
    """An account's webhook key pair. ``public_key`` (base64, 32 bytes) is what Mission Control
    shows and the gateway's ``TELNYX_PUBLIC_KEY`` holds."""

    def __init__(self, private_key: Ed25519PrivateKey | None = None) -> None:
        self._private = private_key or Ed25519PrivateKey.generate()

    @property
    def public_key(self) -> str:
        raw = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return base64.b64encode(raw).decode("ascii")

    def signature(self, body: bytes, timestamp: str) -> str:
        signed = timestamp.encode("ascii") + b"|" + body
        return base64.b64encode(self._private.sign(signed)).decode("ascii")

    def headers(self, body: bytes, timestamp: int) -> dict[str, str]:
        """The headers of a webhook with ``body`` sent at ``timestamp``, as Telnyx names them."""
        stamp = str(timestamp)
        return {
            "Content-Type": "application/json",
            "telnyx-signature-ed25519": self.signature(body, stamp),
            "telnyx-timestamp": stamp,
        }


@dataclass(frozen=True, slots=True)
class CallIds:
    """The ids Telnyx gives a call leg."""

    call_control_id: str = field(default_factory=lambda: "v3:" + secrets.token_urlsafe(24))
    call_leg_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    call_session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    connection_id: str = "1684641123236054244"

    def payload(self, **fields: Any) -> dict[str, Any]:
        """An event's payload: these ids and ``fields`` (``from_`` is sent as ``from``)."""
        extra = {("from" if key == "from_" else key): value for key, value in fields.items()}
        return {
            "call_control_id": self.call_control_id,
            "call_leg_id": self.call_leg_id,
            "call_session_id": self.call_session_id,
            "connection_id": self.connection_id,
            **extra,
        }


def event_body(
    event_type: str, payload: dict[str, Any], *, delivered_to: str = "", attempt: int = 1
) -> bytes:
    """The raw body of a webhook, in Telnyx's envelope."""
    envelope = {
        "data": {
            "record_type": "event",
            "event_type": event_type,
            "id": str(uuid.uuid4()),
            "occurred_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "payload": payload,
        },
        "meta": {"attempt": attempt, "delivered_to": delivered_to},
    }
    return orjson.dumps(envelope)


@dataclass(frozen=True, slots=True)
class SignedWebhook(CarrierRequest):
    """A webhook as the gateway receives it: ``headers`` in lower case, ``now`` the receiver's
    clock (Unix seconds)."""

    now: float

    def fields(self) -> dict[str, Any]:
        """Keyword arguments of the phone core's ``WebhookRequest``."""
        return {
            "method": self.method,
            "url": self.url,
            "headers": dict(self.headers),
            "body": self.body,
            "now": self.now,
        }


def webhook_request(
    signer: WebhookSigner,
    url: str,
    event_type: str = "call.initiated",
    payload: dict[str, Any] | None = None,
    *,
    now: float | None = None,
    fault: SigningFault | None = None,
) -> SignedWebhook:
    """A webhook to ``url`` signed by ``signer`` at ``now``, or with ``fault``: signed with
    another key, the body changed after signing, no signature, no timestamp, or a timestamp
    301 s in the past or the future. ``payload`` defaults to an incoming ``call.initiated``."""
    now = time.time() if now is None else now
    if payload is None:
        payload = CallIds().payload(
            direction="incoming", from_="+13125550100", to="+13125550199", state="parked"
        )
    body = event_body(event_type, payload, delivered_to=url)
    stamp = int(now)
    if fault == "stale":
        stamp -= _STALE_S
    elif fault == "future":
        stamp += _STALE_S
    headers = (WebhookSigner() if fault == "wrong-key" else signer).headers(body, stamp)
    if fault == "tampered":
        body = event_body(event_type, {**payload, "to": "+19005550123"}, delivered_to=url)
    elif fault == "unsigned":
        del headers["telnyx-signature-ed25519"]
    elif fault == "no-timestamp":
        del headers["telnyx-timestamp"]
    lower = {name.lower(): value for name, value in headers.items()}
    return SignedWebhook("POST", url, lower, body, now)
