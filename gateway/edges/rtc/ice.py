"""ICE, as the operator sets it and as each side gets it. Pure.

- ``turn_credentials``: coturn's REST-API credentials (``use-auth-secret``): the username is
  ``<expiry>:<user>``, the password the base64 HMAC-SHA1 of it under the shared secret, so
  each browser's TURN access ends on its own and no long-lived password reaches a page;
- ``browser_ice_servers``: the list handed to a browser (TURN servers without a username get
  fresh credentials);
- ``announce_public_ip``: the answer's host candidates rewritten to the public address of a
  1:1 NAT (the ports are the same on both sides of such a NAT).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from gateway.rtc_settings import IceServer

__all__ = ["announce_public_ip", "browser_ice_servers", "turn_credentials"]


def turn_credentials(secret: str, user: str, now: float, ttl_s: int) -> tuple[str, str]:
    """coturn's time-limited credentials: (``<expiry>:<user>``, base64 HMAC-SHA1)."""
    username = f"{int(now) + ttl_s}:{user.replace(':', '_')}"
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return username, base64.b64encode(digest).decode()


def browser_ice_servers(
    servers: tuple[IceServer, ...], *, turn_secret: str | None, user: str, now: float, ttl_s: int
) -> list[dict[str, object]]:
    """What a browser's ``RTCPeerConnection`` gets: TURN servers listed without credentials
    get the user's own from ``turn_secret`` (and are left out when there is none)."""
    shown = []
    for server in servers:
        if server.is_turn and server.username is None:
            if turn_secret is None:
                continue
            username, credential = turn_credentials(turn_secret, user, now, ttl_s)
            shown.append(server.as_json(username, credential))
        else:
            shown.append(server.as_json())
    return shown


def announce_public_ip(sdp: str, public_ip: str) -> str:
    """The answer with each host candidate's address (and the ``c=`` lines) made ``public_ip``.
    Other candidates (server-reflexive, relayed) already carry public addresses."""
    lines = []
    for line in sdp.split("\r\n"):
        if line.startswith("a=candidate:") and " typ host" in line:
            parts = line.split(" ")
            if len(parts) > 5:
                parts[4] = public_ip
            line = " ".join(parts)
        elif line.startswith("c=IN IP4 ") and ":" not in public_ip:
            line = f"c=IN IP4 {public_ip}"
        lines.append(line)
    return "\r\n".join(lines)
