"""Vonage's answer webhook: the signed request, and the NCCO that connects the call's audio to
the gateway's media WebSocket.

Theory of operation. When a call to the application's number is answered, Vonage requests the
application's answer URL: a GET with ``uuid``, ``conversation_uuid``, ``from`` and ``to`` in the
query string by default, or a POST with the same fields as a JSON body when the application's
answer method is POST. Both are read here. With signed webhooks on, the request carries
``Authorization: Bearer <JWT>``: HS256, keyed by the account's signature secret, with the claims
``iat`` (Unix seconds), ``jti``, ``iss`` (always ``Vonage``), ``api_key``, ``application_id``
and ``payload_hash``, the hex SHA-256 of the payload.

``refusal`` checks that token with pyjwt: the signature, ``iss``, its age (older than 5 minutes,
or issued more than a minute in the future: refused), ``exp`` if one is ever present, the
``application_id`` when one is configured, and on a POST ``payload_hash`` against the raw body.
On a GET the payload is the query string, hashed as Vonage's JSON rendering of it (a support
article, not the reference, describes that rendering): its hash is not checked, the query is
only ever read over TLS, and the call it names must still open the stream with the token the
answer minted for it.

``answer`` returns one ``connect`` action with a ``websocket`` endpoint: ``uri`` the media URL,
``content-type`` L16 at the chosen rate, and ``headers`` carrying the call's uuid and the
stream token, which Vonage hands back at the top level of the stream's ``websocket:connected``
(``gateway.edges.vonage.wire``). Vonage limits those headers to 512 bytes.

Facts from: https://developer.vonage.com/en/voice/voice-api/webhook-reference (answer webhook:
GET by default, POST with ``answer_method``, its fields; signed webhooks on the Voice API),
https://developer.vonage.com/en/getting-started/concepts/webhooks#decoding-signed-webhooks and
https://developer.vonage.com/en/messages/concepts/signed-webhooks (the JWT's header and claims),
https://api.support.vonage.com/hc/en-us/articles/19033783342876 (what ``payload_hash`` covers on
a GET and a POST), https://developer.vonage.com/en/voice/voice-api/ncco-reference and
https://developer.vonage.com/en/voice/voice-api/concepts/websockets (the ``connect`` action's
``websocket`` endpoint, ``headers`` of at most 512 bytes). Guessed: the tolerated clock skew
(the docs give no ``exp``; 5 minutes is the phone core's rule for every carrier).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import warnings
from urllib.parse import parse_qs, urlsplit

import jwt
import orjson

from gateway.edges.phone.webhook import Answer, WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError
from gateway.edges.vonage.wire import CALL_HEADER, TOKEN_HEADER, content_type

__all__ = ["MAX_AGE_S", "MAX_HEADERS_BYTES", "MAX_SKEW_S", "VonageAnswerWebhook"]

MAX_AGE_S = 300.0  # a token issued longer ago is refused (a replay, or a clock far off)
MAX_SKEW_S = 60.0  # a token issued this far in our future is still taken (clocks drift)
MAX_HEADERS_BYTES = 512  # Vonage's limit for the websocket endpoint's headers
ISSUER = "Vonage"


class VonageAnswerWebhook:
    """The answer webhook of one Vonage application.

    ``signature_secret``: the account's signature secret (``VONAGE_SIGNATURE_SECRET``), the key
    of the webhooks' HS256 tokens. ``application_id`` (``VONAGE_APPLICATION_ID``), when given,
    refuses a token minted for another application of the account. ``rate``: the L16 rate the
    stream is asked for (16000, or 8000)."""

    def __init__(
        self, signature_secret: str, *, application_id: str | None = None, rate: int = 16000
    ) -> None:
        if not signature_secret:
            raise ValueError("the Vonage signature secret is empty")
        self._secret = signature_secret
        self._application_id = application_id or None
        self._content_type = content_type(rate)

    @property
    def name(self) -> str:
        return "vonage"

    def refusal(self, request: WebhookRequest) -> str | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return "no Authorization: Bearer token (are signed webhooks on for the application?)"
        try:
            with warnings.catch_warnings():
                # A short secret is the account's choice, not a reason to refuse its calls.
                warnings.simplefilter("ignore", jwt.InsecureKeyLengthWarning)
                claims = jwt.decode(
                    token,
                    self._secret,
                    algorithms=["HS256"],
                    # Time is checked below against request.now, not pyjwt's clock.
                    options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
                )
        except jwt.InvalidSignatureError:
            return "the token's signature does not verify with the signature secret"
        except jwt.InvalidTokenError as exc:  # the name only: the message may quote the token
            return f"the token is not a valid HS256 JWT ({type(exc).__name__})"
        return self._claims_refusal(claims, request)

    def _claims_refusal(self, claims: dict[str, object], request: WebhookRequest) -> str | None:
        if claims.get("iss") != ISSUER:
            return "the token's issuer is not Vonage"
        issued = _number(claims.get("iat"))
        if issued is None:
            return "the token has no iat"
        age = request.now - issued
        if age > MAX_AGE_S:
            return f"the token was issued {age:.0f} s ago (over {MAX_AGE_S:.0f} s)"
        if age < -MAX_SKEW_S:
            return "the token was issued in the future"
        if "exp" in claims:
            expires = _number(claims["exp"])
            if expires is None or request.now >= expires:
                return "the token has expired"
        application = claims.get("application_id")
        if self._application_id and application not in (None, self._application_id):
            return "the token is for another application"
        if request.method.upper() == "POST":
            claimed = claims.get("payload_hash")
            if not isinstance(claimed, str) or not claimed:
                return "the token has no payload_hash for the POST body"
            body_hash = hashlib.sha256(request.body).hexdigest()
            if not hmac.compare_digest(body_hash.encode(), claimed.lower().encode()):
                return "the body does not match the token's payload_hash"
        return None

    def call_id(self, request: WebhookRequest) -> str:
        """The call's ``uuid``: from the JSON body of a POST, else from the query string."""
        if request.method.upper() == "POST" and request.body.strip():
            try:
                body = orjson.loads(request.body)
            except orjson.JSONDecodeError:
                raise PhoneFormatError("the answer webhook's POST body is not JSON") from None
            if not isinstance(body, dict):
                raise PhoneFormatError("the answer webhook's POST body is not a JSON object")
            uuid = body.get("uuid")
        else:
            uuid = parse_qs(urlsplit(request.url).query).get("uuid", [None])[-1]
        if not isinstance(uuid, str) or not uuid:
            raise PhoneFormatError("the answer webhook has no uuid")
        return uuid

    def answer(self, stream_url: str, token: str, call_id: str) -> Answer:
        """An NCCO connecting the call to ``stream_url``, the uuid and token in its headers."""
        headers = {CALL_HEADER: call_id, TOKEN_HEADER: token}
        size = len(orjson.dumps(headers))
        if size > MAX_HEADERS_BYTES:
            raise ValueError(
                f"the websocket headers take {size} bytes; Vonage allows {MAX_HEADERS_BYTES}"
            )
        endpoint = {
            "type": "websocket",
            "uri": stream_url,
            "content-type": self._content_type,
            "headers": headers,
        }
        ncco = [{"action": "connect", "endpoint": [endpoint]}]
        return Answer(content_type="application/json", body=orjson.dumps(ncco).decode())


def _number(value: object) -> float | None:
    """A finite JSON number as a float; None for anything else (a string, a bool, NaN)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int of 400 digits
            return None
        return number if math.isfinite(number) else None
    return None
