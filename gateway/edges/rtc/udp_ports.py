"""The UDP ports of the gateway's ICE candidates, kept in ``GATEWAY_WEBRTC_UDP_PORTS``.

aioice (under aiortc) binds each host candidate to port 0, whatever the kernel picks, and has
no setting for a range (aioice#47), so a firewall in front of the gateway would have to open
every ephemeral port. ``bind_in_range`` wraps the running loop's ``create_datagram_endpoint``:
a bind to port 0 on a local address (what aioice asks for, and nothing else in the gateway
does) tries the range's ports from a rotating start until one is free. Other calls pass
through untouched. ``PortsExhausted`` (an ``OSError``, as a failed bind is) when none is free:
aioice leaves that address out, and the offer fails for want of candidates.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
from collections.abc import Callable
from typing import Any

__all__ = ["PortsExhausted", "bind_in_range"]


class PortsExhausted(OSError):
    def __init__(self, low: int, high: int) -> None:
        super().__init__(errno.EADDRINUSE, f"no free UDP port in {low}-{high}")


_INSTALLED = "_gateway_udp_ports"


def bind_in_range(loop: asyncio.AbstractEventLoop, low: int, high: int) -> None:
    """From now on, this loop's datagram endpoints bound to port 0 take a port of the range."""
    original: Callable[..., Any] = getattr(loop, _INSTALLED, None) or loop.create_datagram_endpoint
    size = high - low + 1
    turns = itertools.count()

    async def create_datagram_endpoint(
        protocol_factory: Callable[[], asyncio.DatagramProtocol],
        local_addr: tuple[str, int] | None = None,
        remote_addr: tuple[str, int] | None = None,
        **options: Any,
    ) -> tuple[asyncio.DatagramTransport, asyncio.DatagramProtocol]:
        if local_addr is None or local_addr[1] != 0 or remote_addr is not None:
            return await original(  # type: ignore[no-any-return]
                protocol_factory, local_addr=local_addr, remote_addr=remote_addr, **options
            )
        start = next(turns)
        for step in range(size):
            port = low + (start + step) % size
            try:
                return await original(  # type: ignore[no-any-return]
                    protocol_factory, local_addr=(local_addr[0], port), **options
                )
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                    raise
        raise PortsExhausted(low, high)

    setattr(loop, _INSTALLED, original)
    setattr(loop, "create_datagram_endpoint", create_datagram_endpoint)  # noqa: B010
