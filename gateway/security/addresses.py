"""The client's address, seen through trusted proxies, and a per-address rate of new
connections. Pure: time comes from the caller.

Behind a load balancer every TCP peer is the balancer, so a per-peer limit would lump all users
together. When the peer is one of ``GATEWAY_TRUSTED_PROXIES`` (addresses or networks), the
client is the right-most address of ``X-Forwarded-For`` that is not itself a trusted proxy
(the left part of the header is whatever the client wrote, so it is never believed). From any
other peer the header is ignored.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["ConnectionRateLimiter", "TrustedProxies", "parse_networks"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Past this many remembered client addresses, the quiet ones are forgotten.
PRUNE_AT = 4096
WINDOW_S = 60.0


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """``10.0.0.1``, ``10.0.0.0/8``, ``::1``; raises ``ValueError`` naming a bad entry."""
    networks: list[Network] = []
    for value in values:
        text = value.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"not an IP address or network: {text!r}") from None
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = text.strip()
    if value.startswith("[") and "]" in value:  # [v6]:port
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # v4:port
        value = value.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True, slots=True)
class TrustedProxies:
    networks: Sequence[Network] = ()

    def trusts(self, peer: str | None) -> bool:
        address = None if peer is None else _address(peer)
        return address is not None and any(address in net for net in self.networks)

    def client_address(self, peer: str | None, forwarded_for: str | None) -> str:
        """The address to attribute a request to (``?`` when nothing is known)."""
        if peer is None:
            return "?"
        if not forwarded_for or not self.trusts(peer):
            return peer
        hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
        for hop in reversed(hops):
            address = _address(hop)
            if address is None:
                return peer  # a hop we cannot read: attribute the request to the proxy
            if not any(address in net for net in self.networks):
                return str(address)
        return peer  # every hop is a proxy of ours


@dataclass(slots=True)
class ConnectionRateLimiter:
    """At most ``per_minute`` admissions per address in any 60 s window."""

    per_minute: int
    _recent: dict[str, deque[float]] = field(default_factory=dict)

    def admit(self, address: str, now: float) -> bool:
        window = self._recent.get(address)
        if window is None:
            if len(self._recent) >= PRUNE_AT:
                self._prune(now)
            window = self._recent[address] = deque()
        while window and now - window[0] >= WINDOW_S:
            window.popleft()
        if len(window) >= self.per_minute:
            return False
        window.append(now)
        return True

    def _prune(self, now: float) -> None:
        for key in [k for k, w in self._recent.items() if not w or now - w[-1] >= WINDOW_S]:
            del self._recent[key]

    def __len__(self) -> int:
        return len(self._recent)
