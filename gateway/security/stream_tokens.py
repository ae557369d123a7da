"""Phone-stream tokens: short, so that every carrier can carry one.

A carrier hands the token back in its stream's first messages, from wherever the answer document
put it, and some carriers have little room: Exotel takes at most 256 characters of custom
parameters, Vonage's and Plivo's headers 512 bytes (Plivo's letters and digits only). A JWT
carrying a call id, roles and times does not fit, so a stream token is

    <id>.<expiry>.<mac>

``id`` 16 random URL-safe characters (the stream may be opened once: the store remembers used
ids), ``expiry`` Unix seconds, ``mac`` the unpadded URL-safe base64 of HMAC-SHA256, keyed by
``GATEWAY_AUTH_SECRET``, over a domain label, the call's id, the token id and the expiry: 76
characters at most. A token opens a stream of the call it was minted for only, until it
expires; nothing else is in it. What the caller may do is the phone's roles
(``GATEWAY_PHONE_ROLES``), read when the stream opens. It looks nothing like a JWT, so neither
kind is ever taken for the other.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
import secrets
from dataclasses import dataclass

from gateway.security.tokens import TokenRefused

__all__ = ["StreamGrant", "StreamTokens"]

_DOMAIN = b"realtime-gateway/phone-stream/v1\x00"
_SHAPE = re.compile(r"^([A-Za-z0-9_-]{16})\.([0-9]{1,12})\.([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True, slots=True)
class StreamGrant:
    """A verified stream token: its id (to be claimed once) and when it expires."""

    token_id: str
    expires_at: float


class StreamTokens:
    def __init__(self, secret: str, *, max_lifetime_s: float) -> None:
        self._key = secret.encode()
        self.max_lifetime_s = max_lifetime_s

    def mint(self, call_id: str, *, now: float, ttl_s: float) -> str:
        """A token for one stream of call ``call_id``, valid ``ttl_s`` (at most the maximum
        lifetime)."""
        token_id = secrets.token_urlsafe(12)  # 16 characters
        expires = math.ceil(now + min(ttl_s, self.max_lifetime_s))
        return f"{token_id}.{expires}.{self._mac(call_id, token_id, expires)}"

    def verify(self, token: str | None, now: float, *, call_id: str) -> StreamGrant:
        """The token's grant; ``TokenRefused`` (safe to log: never the token) when it is not a
        stream token of this gateway for ``call_id``, or has expired."""
        if not token:
            raise TokenRefused("missing stream token")
        shape = _SHAPE.match(token)
        if shape is None:
            raise TokenRefused("this token is not a phone-stream token")
        token_id, expiry, mac = shape.groups()
        expected = self._mac(call_id, token_id, int(expiry))
        if not hmac.compare_digest(expected.encode(), mac.encode()):
            # A forged token and one minted for another call look alike, by design.
            raise TokenRefused("the token was not made for this call")
        if now >= int(expiry):
            raise TokenRefused("the stream token has expired")
        return StreamGrant(token_id, float(expiry))

    def _mac(self, call_id: str, token_id: str, expires: int) -> str:
        message = _DOMAIN + f"{call_id}\x00{token_id}\x00{expires}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
