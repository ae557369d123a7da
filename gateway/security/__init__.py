"""What keeps hostile clients, pages and peers out: origins and hosts, tokens, client addresses.

Pure code; ``gateway.admission`` applies it to requests. ``SECURITY.md`` has the threat model.
"""

from gateway.security.addresses import ConnectionRateLimiter, TrustedProxies, parse_networks
from gateway.security.origins import (
    is_local_origin,
    is_loopback_host_header,
    is_loopback_name,
    origin_allowed,
)
from gateway.security.tokens import TokenAuthority, TokenRefused, VerifiedToken

__all__ = [
    "ConnectionRateLimiter",
    "TokenAuthority",
    "TokenRefused",
    "TrustedProxies",
    "VerifiedToken",
    "is_local_origin",
    "is_loopback_host_header",
    "is_loopback_name",
    "origin_allowed",
    "parse_networks",
]
