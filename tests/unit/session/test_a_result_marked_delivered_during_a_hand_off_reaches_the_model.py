"""A result the ledger marks delivered while the session is being handed off still reaches the
model: the hand-off waits for it before the upstream closes (the new owner leaves delivered
calls alone, and the snapshot carries no tool results, so nobody else would give it).

The soak saw it (seed 7): a drain moved a session 5 ms after its approved call finished; the
approval's ``LEDGER_DELIVER`` answered after the hand-off had begun, the result went to an
upstream already closing (dropped), and the new owner, finding the call delivered, did not adopt
it: the client saw it finish, the model never got it. No sockets (``tests/session_kit.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from session_kit import RecordingTransport, Rig, make_session

from gateway.clock import ManualClock
from gateway.registry import Registry
from gateway.store import MemoryStore
from transports.base import ToolResult
from transports.events import RequestedCall, ToolCallsRequested


class SlowDelivery(MemoryStore):
    """``ledger_deliver`` answers only when the test says (once ``gated``)."""

    def __init__(self) -> None:
        super().__init__(ManualClock())
        self.gated = False
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def ledger_deliver(
        self, session_id: str, epoch: int, call_ids: Sequence[str]
    ) -> set[str]:
        if self.gated:
            self.asked.set()
            await self.answer.wait()
        return await super().ledger_deliver(session_id, epoch, call_ids)


@dataclass
class ClosingTransport(RecordingTransport):
    """Like the real transports: nothing reaches the model once it is closed."""

    closed: bool = False

    async def close(self) -> None:
        self.closed = True
        await super().close()

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        if not self.closed:
            await super().send_tool_results(results)

    async def send_late_result(self, result: ToolResult) -> None:
        if not self.closed:
            await super().send_late_result(result)


async def hand_off_while_delivering(rig: Rig, store: SlowDelivery) -> None:
    """The session is handed off while its ``LEDGER_DELIVER`` is under way, which then answers."""
    await asyncio.wait_for(store.asked.wait(), 5)
    hand_off = asyncio.create_task(rig.session.hand_off())
    await asyncio.wait({hand_off}, timeout=0.2)  # as far as it goes before the answer
    store.answer.set()
    await asyncio.wait_for(hand_off, 5)


async def delivered(store: SlowDelivery, call_id: str) -> bool:
    return call_id not in {entry.call_id for entry in await store.ledger_open("sess_test")}


async def test_a_batch_result_marked_delivered_is_given_before_the_upstream_closes(
    full_registry: Registry, tmp_path: Path
) -> None:
    store, transport = SlowDelivery(), ClosingTransport()
    rig = make_session(full_registry, tmp_path, store=store, transport=transport)
    store.gated = True
    call = RequestedCall("call_1", "echo", '{"text":"x"}')
    batch = asyncio.create_task(rig.session.tools.handle_batch(ToolCallsRequested("r1", (call,))))
    await hand_off_while_delivering(rig, store)
    await asyncio.wait_for(batch, 5)
    assert await delivered(store, "call_1")
    assert [r.call_id for r in transport.results] == ["call_1"]  # reached the model, once


async def test_an_approved_result_marked_delivered_is_given_before_the_upstream_closes(
    full_registry: Registry, tmp_path: Path
) -> None:
    store, transport = SlowDelivery(), ClosingTransport()
    rig = make_session(full_registry, tmp_path, store=store, transport=transport)
    arguments = '{"title": "Dentist", "start": "2026-12-01T10:00:00+01:00"}'
    call = RequestedCall("call_1", "calendar_create_event", arguments)
    await rig.session.tools.handle_batch(ToolCallsRequested("r1", (call,)))
    requested = await rig.outbound.wait_for("confirmation.requested")
    store.gated = True
    approvals = rig.session.tools.approvals
    assert await approvals.respond(requested["confirmation_id"], True, None) is None
    await hand_off_while_delivering(rig, store)
    await asyncio.wait_for(rig.session.tools.wait_running(), 5)
    assert await delivered(store, "call_1")
    assert [r.call_id for r in transport.late_results] == ["call_1"]  # reached the model, once
