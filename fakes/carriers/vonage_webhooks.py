"""The answer webhook of a Vonage call, as Vonage makes it, for ``fakes.carriers.vonage``: a GET
with the call's fields in the query string (Vonage's default) or a POST with a JSON body, signed
with an HS256 JWT in ``Authorization`` whose ``payload_hash`` is the SHA-256 of the body (or of
the fields, for a GET), or wrongly signed (``wrongly_signed_answer_request``).

Written from https://developer.vonage.com/en/voice/voice-api/webhook-reference,
https://developer.vonage.com/en/getting-started/concepts/webhooks#decoding-signed-webhooks and
https://api.support.vonage.com/hc/en-us/articles/19033783342876 (what the payload hash covers).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Literal

import jwt
import orjson

from fakes.carriers.stream_kit import CarrierRequest, with_query

__all__ = ["SignedRequest", "answer_request", "wrongly_signed_answer_request"]


class SignedRequest(CarrierRequest):
    """An answer webhook request as Vonage makes it: lower-case header names, the raw body.
    The fields of the phone core's ``WebhookRequest`` but ``now``."""

    __slots__ = ()


def answer_request(
    url: str,
    *,
    secret: str | None,
    call_uuid: str,
    issued_at: float,
    method: Literal["GET", "POST"] = "GET",
    application_id: str = "aaaaaaaa-bbbb-cccc-dddd-0123456789ab",
) -> SignedRequest:
    """The answer webhook for ``call_uuid``: a GET with the fields in the query string (Vonage's
    default) or a POST with a JSON body, signed as Vonage signs it (HS256 JWT with ``iat``
    ``issued_at``, keyed by ``secret``; None: unsigned)."""
    fields = {"to": "447700900001", "from": "447700900000", "uuid": call_uuid}
    fields["conversation_uuid"] = f"CON-{uuid.uuid4()}"
    payload = orjson.dumps(fields)  # compact JSON, in the fields' order: what the hash covers
    body = payload if method == "POST" else b""
    if method == "GET":
        url = with_query(url, fields)
    headers = {"content-type": "application/json"} if method == "POST" else {}
    if secret is not None:
        claims = {
            "iat": int(issued_at),
            "jti": str(uuid.uuid4()),
            "iss": "Vonage",
            "payload_hash": hashlib.sha256(payload).hexdigest(),
            "api_key": "a1b2c3d4",
            "application_id": application_id,
        }
        headers["authorization"] = "Bearer " + jwt.encode(claims, secret, algorithm="HS256")
    return SignedRequest(method, url, headers, body)


def wrongly_signed_answer_request(
    url: str, *, call_uuid: str, issued_at: float, method: Literal["GET", "POST"] = "GET"
) -> SignedRequest:
    """Fault: the same request signed with a secret that is not the account's."""
    return answer_request(
        url,
        secret="not-the-account-signature-secret-0123456789",
        call_uuid=call_uuid,
        issued_at=issued_at,
        method=method,
    )
