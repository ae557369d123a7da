"""Helpers for tests that drive a transport shell: a recorder of its neutral events.

Importable from any test module (``tests/`` is on ``sys.path`` through the root conftest).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from transports import events as ev


class Running:
    """A connected transport whose ``events()`` are recorded; waits wake on a condition."""

    def __init__(self, sdk: Any, transport: Any) -> None:
        self.sdk = sdk
        self.transport = transport
        self.events: list[ev.UpstreamEvent] = []
        self._arrived = asyncio.Condition()
        self._task = asyncio.create_task(self._consume())

    async def _consume(self) -> None:
        async for event in self.transport.events():
            async with self._arrived:
                self.events.append(event)
                self._arrived.notify_all()

    def count(self, kind: type) -> int:
        return sum(isinstance(e, kind) for e in self.events)

    def saw(self, kind: type) -> bool:
        return self.count(kind) > 0

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(3), self._arrived:
            await self._arrived.wait_for(predicate)

    async def until_any(self, *kinds: type) -> None:
        await self.until(lambda: any(self.saw(k) for k in kinds))

    async def recovered(self, times: int) -> None:
        await self.until(
            lambda: self.count(ev.UpstreamRecovered) >= times or self.saw(ev.UpstreamFailed)
        )

    async def close(self) -> None:
        await self.transport.close()
        await asyncio.wait_for(self._task, 3)
