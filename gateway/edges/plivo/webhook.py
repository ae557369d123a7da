"""Plivo's answer URL: the ``X-Plivo-Signature-V3`` check, the call's ``CallUUID`` and the
``<Stream>`` XML that connects the call to the gateway. Pure: no I/O, no clock.

Signature V3. Plivo signs every request it makes with HMAC-SHA256 keyed by the auth token and
sends the base64 digest in ``X-Plivo-Signature-V3`` (by the account's or subaccount's token)
and ``X-Plivo-Signature-Ma-V3`` (by the main account's), with the random nonce it signed in
``X-Plivo-Signature-V3-Nonce``. What is signed, as Plivo's docs describe it and its SDKs
(``validate_v3_signature`` in plivo-python and plivo-node) compute it:

- the URL's scheme, host (with port) and path, then its query parameters sorted by name (and
  each name's values sorted), as ``?name=value&name=value``, the values decoded;
- for a POST with parameters: ``?`` (when the URL has no query) or ``.`` (after the query), then
  every form parameter sorted by name, as ``namevalue`` with nothing between;
- then ``.`` and the nonce.

A header may hold several signatures separated by commas (one per auth token active on the
account): any one matching passes. The comparison is constant-time, and a refusal never names
the expected signature. V3 has no timestamp, so no age can be checked here; the nonce is unique
per request, and refusing a nonce seen before needs state, which the routes would keep.

The answer is Plivo XML: a bidirectional ``<Stream>`` with ``keepCallAlive="true"`` (the stream
is the only element run until it ends), µ-law at 8 kHz, and the stream token in
``extraHeaders`` (packed to letters and digits, see ``wire.pack_header_value``), which Plivo
hands back in the ``start`` message's ``extra_headers``. A farewell, when set, is a ``<Speak>``
after the stream: Plivo runs it when the stream ends with the caller still on the line.

Sources: https://docs.plivo.com/docs/voice/concepts/signature-validation/,
https://docs.plivo.com/docs/voice/xml/request/validation,
https://github.com/plivo/plivo-python (``plivo/utils/signature_v3.py``),
https://github.com/plivo/plivo-node (``lib/utils/v3Security.js``),
https://docs.plivo.com/docs/voice/xml/request (the parameters: ``CallUUID``),
https://docs.plivo.com/docs/account/api/application (the answer URL),
https://docs.plivo.com/docs/voice/xml/audiostream (``<Stream>``'s attributes),
https://docs.plivo.com/docs/voice/audio-streaming/overview-doc (the XML of a bidirectional stream).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from urllib.parse import parse_qs, urlparse, urlunparse
from xml.sax.saxutils import escape, quoteattr

from gateway.edges.phone.webhook import Answer, WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError
from gateway.edges.plivo.wire import TOKEN_HEADER, pack_header_value

__all__ = [
    "MAX_EXTRA_HEADERS_BYTES",
    "PlivoAnswerWebhook",
    "signed_text",
    "stream_xml",
    "v3_signature",
]

MAX_EXTRA_HEADERS_BYTES = 512
"""Plivo's limit on the ``extraHeaders`` attribute."""

SIGNATURE_HEADERS = ("x-plivo-signature-v3", "x-plivo-signature-ma-v3")
NONCE_HEADER = "x-plivo-signature-v3-nonce"
CONTENT_TYPE = "audio/x-mulaw;rate=8000"

Params = Mapping[str, Sequence[str]]


def signed_text(method: str, url: str, params: Params) -> str:
    """What Plivo signs for a request to ``url`` with form ``params`` (empty for a GET),
    before the nonce."""
    parsed = urlparse(url)
    base = urlunparse((parsed.scheme, parsed.netloc, parsed.path, "", "", ""))
    query = "&".join(
        f"{name}={value}"
        for name, values in sorted(_form(parsed.query).items())
        for value in sorted(values)
    )
    has_form = method.upper() == "POST" and any(params.values())
    if query or has_form:
        base += "?" + query
    if query and has_form:
        base += "."
    if has_form:
        base += "".join(
            f"{name}{value}" for name, values in sorted(params.items()) for value in sorted(values)
        )
    return base


def v3_signature(auth_token: str, method: str, url: str, params: Params, nonce: str) -> str:
    """The ``X-Plivo-Signature-V3`` Plivo sends for this request."""
    text = f"{signed_text(method, url, params)}.{nonce}"
    digest = hmac.new(auth_token.encode(), text.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def stream_xml(stream_url: str, token: str, *, farewell: str = "") -> str:
    """The answer: a bidirectional µ-law stream to ``stream_url`` with ``token`` in
    ``extraHeaders`` (none when ``token`` is empty: stream auth off)."""
    attributes = {
        "bidirectional": "true",
        "keepCallAlive": "true",
        "audioTrack": "inbound",
        "contentType": CONTENT_TYPE,
    }
    if token:
        headers = f"{TOKEN_HEADER}={pack_header_value(token)}"
        if len(headers.encode()) > MAX_EXTRA_HEADERS_BYTES:
            # Said without the token: it is a secret.
            raise ValueError(
                f"the stream token packs to {len(headers)} bytes of extraHeaders, over "
                f"Plivo's {MAX_EXTRA_HEADERS_BYTES}"
            )
        attributes["extraHeaders"] = headers
    attrs = "".join(f" {name}={quoteattr(value)}" for name, value in attributes.items())
    speak = f"<Speak>{escape(farewell)}</Speak>" if farewell else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Response><Stream{attrs}>{escape(stream_url)}</Stream>{speak}</Response>"
    )


class PlivoAnswerWebhook:
    """Plivo's answer URL (``POST``, or ``GET`` when the application says so)."""

    def __init__(self, auth_token: str, *, farewell: str = "") -> None:
        if not auth_token:
            raise ValueError("PLIVO_AUTH_TOKEN is empty")
        self._auth_token = auth_token
        self._farewell = farewell

    def __repr__(self) -> str:
        return "PlivoAnswerWebhook(auth_token=***)"

    @property
    def name(self) -> str:
        return "plivo"

    def refusal(self, request: WebhookRequest) -> str | None:
        headers = {name.lower(): value for name, value in request.headers.items()}
        signatures = [headers[name] for name in SIGNATURE_HEADERS if headers.get(name)]
        if not signatures:
            return "unsigned: no X-Plivo-Signature-V3 header"
        nonce = headers.get(NONCE_HEADER)
        if not nonce:
            return "no X-Plivo-Signature-V3-Nonce header"
        method = request.method.upper()
        if method not in ("GET", "POST"):
            return "Plivo signs GET and POST requests only"
        try:
            params = _params(request)
        except PhoneFormatError as exc:
            return str(exc)
        expected = v3_signature(self._auth_token, method, request.url, params, nonce).encode()
        matched = False
        for header in signatures:
            for candidate in header.split(","):
                # Every candidate is compared, so the time taken does not tell which failed.
                matched |= hmac.compare_digest(expected, candidate.strip().encode())
        if not matched:
            return "X-Plivo-Signature-V3 does not match (another auth token, or another URL)"
        return None

    def call_id(self, request: WebhookRequest) -> str:
        values = _params(request).get("CallUUID") or _form(urlparse(request.url).query).get(
            "CallUUID", []
        )
        if not values or not values[0]:
            raise PhoneFormatError("CallUUID is missing from the answer request")
        return values[0]

    def connects(self, request: WebhookRequest) -> bool:
        """Whether the request asks for the call to be connected: Plivo also sends the call's
        hang-up notice to the answer URL when the application names no hang-up URL
        (``CallStatus`` ``completed``), which is only acknowledged."""
        status = _params(request).get("CallStatus") or _form(urlparse(request.url).query).get(
            "CallStatus", []
        )
        return not status or status[-1] not in ("completed", "hangup")

    def answer(self, stream_url: str, token: str, call_id: str) -> Answer:
        # call_id is not needed: Plivo names the call in the stream's start.callId itself.
        return Answer("application/xml", stream_xml(stream_url, token, farewell=self._farewell))


def _params(request: WebhookRequest) -> dict[str, list[str]]:
    """A POST's form parameters (a GET's are in its URL)."""
    if request.method.upper() != "POST" or not request.body:
        return {}
    try:
        return _form(request.body.decode())
    except UnicodeDecodeError:
        raise PhoneFormatError("the request body is not UTF-8 form data") from None


def _form(text: str) -> dict[str, list[str]]:
    return parse_qs(text, keep_blank_values=True)
