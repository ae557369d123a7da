"""What every fake server shares: ``Served`` (``async with`` around its own ``start`` / ``stop``)
and ``run_until_signalled``, the command line's run loop."""

from __future__ import annotations

import asyncio
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Self

__all__ = ["Served", "run_until_signalled"]


class Served(ABC):
    """A server a test runs for the length of an ``async with`` block."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def run_until_signalled(server: Served, url: Callable[[], str]) -> None:
    """Start ``server``, print ``listening <url>`` and serve until SIGTERM or SIGINT."""
    async with server:
        print(f"listening {url()}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
