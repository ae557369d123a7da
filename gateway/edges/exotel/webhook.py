"""The Voicebot applet's dynamic URL: Exotel asks the gateway where to stream a call. Pure.

Theory of operation. A Voicebot (or Stream) applet's URL is either a ``wss://`` URL, connected
as is, or an ``https://`` endpoint that Exotel calls when the call reaches the applet and that
must answer JSON with the key ``url``: ``{"url": "wss://…"}``; Exotel then opens the stream to
that URL. The query parameters of a stream URL come back in the stream's
``start.custom_parameters`` (up to 3 pairs, 256 characters in all, say the pages), so the
answer is ``{"url": "wss://<host>/phone/media?token=<stream token>"}`` and the token reaches
``StreamStarted.token``. With a line rate of 16 kHz the URL also says ``sample-rate=16000``
(Exotel's own query parameter; 8000 is its default and is not written).

How Exotel calls the endpoint is not spelled out for this applet. Exotel's other dynamic URLs
(the Connect applet's, Passthru) are ``GET`` requests with the call's details as URL-encoded
query parameters (``CallSid``, ``CallFrom``, ``CallTo``, ``Direction``, …); a newer page shows
Passthru POSTing JSON with ``CallSid``. ``call_id`` reads ``CallSid`` from the query, else from
a form or JSON body.

Authentication. Exotel signs none of its HTTP requests: no signature header, no timestamp, so
there is nothing to hold against replay. What the operator can put in the applet's URL is a
shared secret (``EXOTEL_ANSWER_SECRET``), carried either as a query parameter
(``https://<host>/exotel/answer?secret=<secret>``, which Exotel sends as configured) or as HTTP
basic credentials (``https://exotel:<secret>@<host>/exotel/answer``: Exotel documents this form,
sent as ``Authorization: Basic``, for the stream URL; the user name is not checked). Either is
compared in constant time; a request with neither, or a wrong one, is refused. Exotel also
offers IP allowlisting (through its support), which a proxy in front of the gateway can add.
The secret is in the URL: the answer route must not log that URL's query string.

Sources:
- https://developer.exotel.com/docs/agentstream/stream-voicebot-applet (URL or HTTPS endpoint
  returning the WSS URL; basic auth and IP allowlisting; sample-rate; custom parameters)
- https://docs.exotel.com/exotel-agentstream/stream-applet (the endpoint returns
  ``{"url": "wss://…"}``; dynamic custom parameters)
- https://support.exotel.com/support/solutions/articles/3000096873-working-with-connect-applet-dynamic-url-
  (Exotel's dynamic URLs: GET, call details as query parameters)
- https://developer.exotel.com/docs/agentstream/passthru-applet (a JSON body with ``CallSid``)
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from gateway.edges.phone.webhook import Answer, WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError

__all__ = [
    "CUSTOM_PARAMETERS_MAX_CHARS",
    "SECRET_PARAMETER",
    "ExotelAnswerWebhook",
    "stream_url_with_token",
]

SECRET_PARAMETER = "secret"
"""The query parameter of the applet's URL that carries ``EXOTEL_ANSWER_SECRET``."""

CUSTOM_PARAMETERS_MAX_CHARS = 256
"""Exotel's documented bound on a stream URL's custom parameters (``k=v&k=v``, in all)."""

SAMPLE_RATE_PARAMETER = "sample-rate"
_CALL_SID = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


class ExotelAnswerWebhook:
    """``secret``: ``EXOTEL_ANSWER_SECRET`` (None: every request is refused, the setting is
    missing); ``sample_rate``: the line rate to ask Exotel for, 8000 (its default) or 16000."""

    def __init__(self, secret: str | None, *, sample_rate: int = 8000) -> None:
        if secret is not None and not secret:
            raise ValueError("an empty EXOTEL_ANSWER_SECRET would accept anyone; leave it unset")
        if sample_rate not in (8000, 16000):
            raise ValueError(f"the line rate is 8000 or 16000 Hz, not {sample_rate}")
        self._secret = secret
        self.sample_rate = sample_rate

    @property
    def name(self) -> str:
        return "exotel"

    def refusal(self, request: WebhookRequest) -> str | None:
        if self._secret is None:
            return "EXOTEL_ANSWER_SECRET is not set"
        presented = [
            *parse_qs(urlsplit(request.url).query, keep_blank_values=True).get(
                SECRET_PARAMETER, []
            ),
            *_basic_password(request.headers.get("authorization")),
        ]
        if not presented:
            return f"no secret: neither a {SECRET_PARAMETER!r} query parameter nor basic auth"
        expected = self._secret.encode()
        # Each one compared in full, constant-time; one right one is enough.
        matches = [hmac.compare_digest(expected, candidate.encode()) for candidate in presented]
        return None if any(matches) else "wrong secret"

    def call_id(self, request: WebhookRequest) -> str:
        call_sid = _call_sid(request)
        if call_sid is None:
            raise PhoneFormatError("CallSid is missing (not in the query, nor in the body)")
        if not _CALL_SID.fullmatch(call_sid):
            raise PhoneFormatError("CallSid is not 1-128 letters, digits, '_', '.' or '-'")
        return call_sid

    def answer(self, stream_url: str, token: str, call_id: str) -> Answer:
        """``{"url": stream_url + "?token=…"}``. ``call_id`` is not written: ``start.call_sid``
        names the call. Note that a token longer than about 245 characters exceeds what Exotel
        documents for custom parameters (``CUSTOM_PARAMETERS_MAX_CHARS``)."""
        url = stream_url_with_token(stream_url, token, sample_rate=self.sample_rate)
        return Answer("application/json", orjson.dumps({"url": url}).decode())


def stream_url_with_token(stream_url: str, token: str, *, sample_rate: int = 8000) -> str:
    """``stream_url`` (``ws``/``wss``) with ``sample-rate`` (when not 8000) and the token as
    query parameters, after any it already has."""
    parts = urlsplit(stream_url)
    if parts.scheme not in ("ws", "wss"):
        raise ValueError("the stream URL must be ws:// or wss://")
    query = parse_qsl(parts.query, keep_blank_values=True)
    if sample_rate != 8000:
        query.append((SAMPLE_RATE_PARAMETER, str(sample_rate)))
    query.append(("token", token))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _basic_password(header: str | None) -> list[str]:
    """The password of ``Authorization: Basic …``, as a list of 0 or 1 (the user is not
    checked: the secret alone authenticates)."""
    if header is None:
        return []
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return []
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return []
    _, colon, password = decoded.partition(":")
    return [password] if colon else []


def _call_sid(request: WebhookRequest) -> str | None:
    found = parse_qs(urlsplit(request.url).query).get("CallSid")
    if found:
        return found[0]
    if not request.body:
        return None
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type == "application/x-www-form-urlencoded":
        try:
            form = parse_qs(request.body.decode("utf-8"))
        except UnicodeDecodeError:
            raise PhoneFormatError("the form body is not UTF-8") from None
        values = form.get("CallSid")
        return values[0] if values else None
    if content_type == "application/json":
        try:
            parsed = orjson.loads(request.body)
        except orjson.JSONDecodeError:
            raise PhoneFormatError("the JSON body is not JSON") from None
        value = parsed.get("CallSid") if isinstance(parsed, dict) else None
        return value if isinstance(value, str) and value else None
    return None
