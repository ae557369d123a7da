"""Found by the soak (seed 2, 100 sessions): a client sent ``session.end`` as its node's drain
began. The end wrote the session's tombstone while the drain moved the session: the client got
``session.moving`` (not ``session.ended``), resumed with its token on the other node and was
told ``resume_failed`` (the record it resumed from had been ended behind its back).

An end and a move of one session now exclude each other: an end that began first ends the
session (no move); a move that began first moves it, and the client, told ``session.moving``,
asks again once it has resumed. Here the store holds either write until the other one is asked
for, so both orders happen on purpose."""

from __future__ import annotations

import asyncio
from typing import Any

from harness import Client, Gateway, GatewayFactory, token

from gateway.clock import SystemClock
from gateway.store import MemoryStore


class HeldStore(MemoryStore):
    """The in-memory store, shared (so sessions may move), which can hold its next tombstone
    (``end``) or its next parked save until told to go on."""

    shared = True

    def __init__(self) -> None:
        super().__init__(SystemClock())
        self.hold: str | None = None  # "end" or "park": the write to hold next
        self.held = asyncio.Event()  # that write was asked for, and waits
        self.go_on = asyncio.Event()

    async def _held(self, what: str) -> None:
        if self.hold == what:
            self.hold = None
            self.held.set()
            await self.go_on.wait()

    async def end(self, session_id: str, epoch: int) -> None:
        await self._held("end")
        await super().end(session_id, epoch)

    async def save(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("parked") and kwargs.get("token_hash"):  # a move's write
            await self._held("park")
        await super().save(*args, **kwargs)


async def resume(gateway: Gateway, started: dict[str, Any], resume_token: str) -> Client:
    ws = await gateway.http.ws_connect(
        f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {token('alice')}"}
    )
    again = Client(ws)
    resume_with = {"session_id": started["session_id"], "resume_token": resume_token}
    await again.send("session.start", mode="text", resume=resume_with)
    return again


async def test_an_end_that_began_first_ends_the_session_and_nothing_moves(
    gateway_factory: GatewayFactory,
) -> None:
    store = HeldStore()
    gateway = await gateway_factory(store=store, provider="local")
    async with gateway.session("text") as client:
        session = gateway.manager.sessions[client.started["session_id"]]
        store.hold = "end"
        await client.send("session.end")
        await store.held.wait()  # the end is writing its tombstone
        move = asyncio.create_task(gateway.manager.resumes.moves.move(session))
        await asyncio.sleep(0.05)  # the move has asked for the session meanwhile
        store.go_on.set()
        await move
        ended = await client.last("session.ended")
        assert ended["reason"] == "client"
        assert "session.moving" not in [e["type"] for e in client.events]
    assert gateway.metric("gateway_sessions_moved_total") == 0


async def test_a_move_that_began_first_moves_the_session_and_its_end_is_asked_again(
    gateway_factory: GatewayFactory,
) -> None:
    store = HeldStore()
    gateway = await gateway_factory(store=store, provider="local")
    async with gateway.session("text") as client:
        started = client.started
        session = gateway.manager.sessions[started["session_id"]]
        store.hold = "park"
        move = asyncio.create_task(gateway.manager.resumes.moves.move(session))
        await store.held.wait()  # the move is parking the record with the new token
        await client.send("session.end")
        await asyncio.sleep(0.05)  # the end has been asked for meanwhile
        store.go_on.set()
        await move
        moving = await client.last("session.moving")
        assert "session.ended" not in [e["type"] for e in client.events]
    again = await resume(gateway, started, moving["resume_token"])
    answer = await again.next()
    assert answer["type"] == "session.started", answer  # before: resume_failed (tombstoned)
    assert answer["resumed"] is True
    await again.send("session.end")
    assert (await again.last("session.ended"))["reason"] == "client"
    await again.ws.close()
