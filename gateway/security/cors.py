"""CORS for the HTTP routes a page of another origin calls with ``fetch`` (OpenAI's WebRTC
interface: ``/v1/realtime/client_secrets``, ``/v1/realtime/calls``). Pure.

Only an origin ``origin_allowed`` lets in gets CORS headers, the rule of every socket: listed in
``GATEWAY_ALLOWED_ORIGINS``, or, with auth off, a page of this machine; with auth on and no
list, any origin (its bearer credential is the gate, and the start-up log says so). The
credential is a header, never a cookie, so no ``Access-Control-Allow-Credentials``. A
preflight from any other origin gets no CORS headers at all (the browser then refuses the
request), and the request itself is refused 403 by admission.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from gateway.security.origins import origin_allowed

__all__ = ["PREFLIGHT_MAX_AGE_S", "cors_headers", "preflight_headers"]

PREFLIGHT_MAX_AGE_S = 600
_METHODS = "POST, OPTIONS"
_EXPOSED = "Location"  # the call's URL, which OpenAI's answer carries
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")  # an HTTP token


def cors_headers(
    origin: str | None, *, allowed: Collection[str], auth_enabled: bool
) -> dict[str, str]:
    """The headers of an answer to a page of ``origin`` (none for no ``Origin``, or one
    refused)."""
    if origin is None or not origin_allowed(origin, allowed=allowed, auth_enabled=auth_enabled):
        return {}
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": _EXPOSED,
        "Vary": "Origin",
    }


def preflight_headers(
    origin: str | None,
    requested_headers: str | None,
    *,
    allowed: Collection[str],
    auth_enabled: bool,
) -> dict[str, str] | None:
    """The answer to ``OPTIONS`` from ``origin`` asking for ``requested_headers``
    (``Access-Control-Request-Headers``); None: not an allowed origin."""
    headers = cors_headers(origin, allowed=allowed, auth_enabled=auth_enabled)
    if not headers:
        return None
    headers["Access-Control-Allow-Methods"] = _METHODS
    # The request's own headers are allowed as asked (Authorization, Content-Type, an SDK's
    # x-stainless-*): with no cookie involved, a header grants nothing by itself.
    names = (h.strip() for h in (requested_headers or "").split(",")[:32])
    asked = ", ".join(name for name in names if _HEADER_NAME.match(name))
    headers["Access-Control-Allow-Headers"] = asked or "Authorization, Content-Type"
    headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE_S)
    return headers
