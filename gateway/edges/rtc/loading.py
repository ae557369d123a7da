"""The media stack, loaded at an edge's first call: ``MediaLoader``.

Importing aiortc and PyAV takes a third of a second of CPU: done in a thread, once per process
whichever WebRTC edge is called first, so a gateway nobody calls over WebRTC neither starts
slower nor holds them. The first load also builds the ``PeerOptions`` every peer connection of
the process shares (ICE servers, the public address, the timeout, the gauge) and, with
``GATEWAY_WEBRTC_UDP_PORTS``, binds the loop's ICE sockets within the range. This module
imports neither library itself.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gateway.rtc_settings import RtcSettings

__all__ = ["MediaLoader"]


class MediaLoader:
    def __init__(self, settings: RtcSettings, count: Callable[[int], None]) -> None:
        self._settings = settings
        self._count = count
        self._lock = asyncio.Lock()
        self._modules: dict[str, ModuleType] = {}
        self.options: Any = None  # PeerOptions, once loaded

    async def load(self, edge_module: str) -> ModuleType:
        """``edge_module`` (an edge's call module, which imports aiortc), imported once and
        off the event loop; the shared options built at the first load."""
        module = self._modules.get(edge_module)
        if module is not None:
            return module
        async with self._lock:
            if edge_module not in self._modules:
                loaded = await asyncio.to_thread(importlib.import_module, edge_module)
                if self.options is None:
                    self._configure()
                self._modules[edge_module] = loaded
        return self._modules[edge_module]

    def _configure(self) -> None:
        settings = self._settings
        peer = importlib.import_module("gateway.edges.rtc.peer")
        self.options = peer.PeerOptions(
            settings.webrtc_ice_servers,
            public_ip=settings.webrtc_public_ip,
            connect_timeout_s=settings.webrtc_connect_timeout_s,
            count=self._count,
        )
        if settings.webrtc_udp_ports is not None:
            udp_ports = importlib.import_module("gateway.edges.rtc.udp_ports")
            udp_ports.bind_in_range(asyncio.get_running_loop(), *settings.webrtc_udp_ports)
