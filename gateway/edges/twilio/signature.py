"""Twilio webhooks: the ``X-Twilio-Signature`` check, and the TwiML that opens a Media Stream.

Twilio signs each webhook request with HMAC-SHA1 keyed by the account's auth token, over the full
URL it requested (query string included) followed by every POST parameter as ``key + value``,
sorted by key, and sends the base64 digest in ``X-Twilio-Signature``. A key sent several times
contributes each distinct value in sorted order, as Twilio's own SDK computes it. The caller
passes the URL exactly as Twilio called it (behind a proxy: the public scheme, host and path).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape, quoteattr

__all__ = ["connect_twiml", "twilio_signature", "valid_signature"]

Params = Mapping[str, str | Sequence[str]]


def twilio_signature(auth_token: str, url: str, params: Params) -> str:
    """The signature Twilio sends for a request to ``url`` with POST ``params``."""
    parts = [url]
    for key in sorted(params):
        value = params[key]
        values = [value] if isinstance(value, str) else sorted(set(value))
        parts.extend(key + item for item in values)
    digest = hmac.new(auth_token.encode(), "".join(parts).encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def valid_signature(auth_token: str, url: str, params: Params, signature: str | None) -> bool:
    """Whether ``signature`` (the header, None if absent) is Twilio's; constant-time."""
    if not signature:
        return False
    expected = twilio_signature(auth_token, url, params)
    return hmac.compare_digest(expected.encode(), signature.encode())


def connect_twiml(stream_url: str, parameters: Mapping[str, str], farewell: str = "") -> str:
    """TwiML answering a call: connect it to a bidirectional Media Stream at ``stream_url``.

    Each of ``parameters`` becomes a ``<Parameter>``, which Twilio hands back in the stream's
    ``start.customParameters`` (the bridge's auth token travels this way). ``farewell``, when
    given, is said by Twilio if the stream ends from our side while the caller is still there
    (``<Connect>`` without an action goes on to the next verb): a call ended by a shutdown or a
    failure hears it instead of silence.
    """
    parameter_tags = "".join(
        f"<Parameter name={quoteattr(name)} value={quoteattr(value)}/>"
        for name, value in parameters.items()
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Response><Connect><Stream url={quoteattr(stream_url)}>{parameter_tags}</Stream>"
        "</Connect>"
        f"{f'<Say>{escape(farewell)}</Say>' if farewell else ''}</Response>"
    )
