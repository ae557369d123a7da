"""Found with budgets (a session ended on its budget just after a response): the end wrote the
session's tombstone while a snapshot of the response's boundary was on its way; that write,
fenced by the tombstone, made the session believe another node had taken it, which let it go
quietly: the client's socket closed without ``session.ended``. A session that is ending now
knows a fenced write for what it is, and the client hears of the end.

The store here holds the boundary's snapshot until the end's tombstone is written, and the end
until the fenced snapshot has come back."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from harness import GatewayFactory

from gateway.clock import SystemClock
from gateway.store import Fenced, MemoryStore


class HeldStore(MemoryStore):
    """Shared (snapshots are written at each boundary); holds the next live snapshot, and the
    next end once its tombstone is written."""

    shared = True

    def __init__(self) -> None:
        super().__init__(SystemClock())
        self.hold_save = False
        self.save_held = asyncio.Event()
        self.save_go = asyncio.Event()
        self.save_fenced = asyncio.Event()
        self.hold_end = False
        self.end_written = asyncio.Event()
        self.end_go = asyncio.Event()

    async def save(self, *args: Any, **kwargs: Any) -> None:
        if self.hold_save and not kwargs.get("parked"):
            self.hold_save = False
            self.save_held.set()
            await self.save_go.wait()
            try:
                await super().save(*args, **kwargs)
            except Fenced:
                self.save_fenced.set()
                raise
            return
        await super().save(*args, **kwargs)

    async def end(self, session_id: str, epoch: int) -> None:
        await super().end(session_id, epoch)
        if self.hold_end:
            self.hold_end = False
            self.end_written.set()
            await self.end_go.wait()


async def test_a_snapshot_fenced_by_the_sessions_own_end_does_not_lose_session_ended(
    gateway_factory: GatewayFactory,
) -> None:
    store = HeldStore()
    gateway = await gateway_factory(store=store, provider="local")
    async with gateway.session("text") as client:
        session = gateway.manager.sessions[client.started["session_id"]]
        store.hold_save = True
        await client.send("text.send", text="hello")
        await store.save_held.wait()  # the turn's snapshot waits
        store.hold_end = True
        await client.send("session.end")
        await store.end_written.wait()  # the tombstone is written; the end waits
        store.save_go.set()
        await store.save_fenced.wait()  # the snapshot came back fenced
        with contextlib.suppress(TimeoutError):  # before: the session let itself go here
            await asyncio.wait_for(session.ended.wait(), 0.5)
        store.end_go.set()
        ended = await client.last("session.ended")
        assert ended["reason"] == "client"
        assert not session.ownership.handed_off
