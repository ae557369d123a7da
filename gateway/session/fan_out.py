"""Store round trips for many sessions at once, a bounded number at a time.

A node goes over all its sessions when the store comes back after an outage (each recorded
again) and after a pause longer than its lease (each one's owner checked). One after another
that took a loaded node with ~80 sessions 3.6 s in the soak, longer than the lease within
which another node trusts it to have recorded its sessions again (a resume there was told
``resume_failed`` for a session alive on this node). ``STORE_FAN_OUT`` at a time stays well
inside the store's connection pool, so the sessions' own traffic keeps connections too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Final, TypeVar

from gateway.store import StoreUnavailable

__all__ = ["STORE_FAN_OUT", "for_each"]

STORE_FAN_OUT: Final = 16

T = TypeVar("T")


async def for_each(
    items: Iterable[T], work: Callable[[T], Awaitable[bool]], limit: int = STORE_FAN_OUT
) -> bool:
    """``work`` on every item, in order, at most ``limit`` at a time. Once one returns False or
    raises ``StoreUnavailable`` (the store is down again), the items not begun yet are skipped
    and the answer is False."""
    gate = asyncio.Semaphore(limit)
    down = False

    async def one(item: T) -> None:
        nonlocal down
        async with gate:
            if down:
                return
            try:
                if not await work(item):
                    down = True
            except StoreUnavailable:
                down = True

    await asyncio.gather(*(one(item) for item in items))
    return not down
