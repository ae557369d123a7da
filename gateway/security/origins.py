"""Which web pages and which ``Host`` names may reach the gateway. Pure functions.

A browser lets any page open a WebSocket to any address, the gateway's loopback port included,
and sends the page's origin in ``Origin``. With auth on, a page still needs a token; with auth
off (the embedded default) the origin and the ``Host`` are all that stand between a hostile
page and the user's tools:

- ``Origin``: absent (not a browser) or a page served from this machine
  (``http(s)://localhost|127.0.0.1|[::1]`` on any port), plus any origin the operator listed;
- ``Host``: a loopback name, so that a DNS-rebinding page (``evil.example`` resolved to
  127.0.0.1, ``Host: evil.example:8080``) is refused even for plain HTTP.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from urllib.parse import urlsplit

__all__ = ["is_local_origin", "is_loopback_host_header", "is_loopback_name", "origin_allowed"]


def is_loopback_name(host: str) -> bool:
    """``localhost`` (and its subdomains, RFC 6761) or a loopback IP address."""
    name = host.strip().rstrip(".").lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _split_host_port(value: str) -> str | None:
    """The host part of ``host[:port]`` (IPv6 in brackets), or None when malformed."""
    value = value.strip()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        rest = value[end + 1 :]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return value[: end + 1]
    host, sep, port = value.rpartition(":")
    if not sep:
        return value
    if not port.isdigit() or ":" in host:
        return None  # a bare IPv6 address without brackets is not a valid Host
    return host


def is_loopback_host_header(host_header: str | None) -> bool:
    """True for a ``Host`` header naming this machine (any port)."""
    if host_header is None:
        return False
    host = _split_host_port(host_header)
    return host is not None and is_loopback_name(host)


def is_local_origin(origin: str) -> bool:
    """A page served from this machine: ``http``/``https`` on a loopback name, any port."""
    try:
        parts = urlsplit(origin.strip())
        hostname = parts.hostname
        _ = parts.port  # raises ValueError for a malformed port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or hostname is None:
        return False
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return False
    return is_loopback_name(hostname)


def origin_allowed(origin: str | None, *, allowed: Collection[str], auth_enabled: bool) -> bool:
    """May a request carrying this ``Origin`` go on?

    - No ``Origin``: not a browser page (CLI clients, SDKs, Twilio): yes.
    - Listed in ``allowed`` (``GATEWAY_ALLOWED_ORIGINS``): yes.
    - Auth off: only a page of this machine.
    - Auth on with no list: yes (the token is the gate; the start-up log says so).
    """
    if origin is None:
        return True
    normalized = origin.strip().rstrip("/")
    if normalized in allowed:
        return True
    if not auth_enabled:
        return is_local_origin(normalized)
    return not allowed
