"""A client's approval that reaches the node the session is being taken from (another node has
claimed it: the store answers ``Fenced``) is left to the new owner: the old node lets the
session go, runs nothing, and says nothing of an internal error. Found by the soak: the
approval's ``Fenced`` escaped as ``client_event_failed`` with a traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from harness import GatewayFactory

from gateway.clock import SystemClock
from gateway.store import Fenced, MemoryStore

EVENT = {"title": "Dentist", "start": "2026-12-01T10:00:00+01:00", "attendees": ["Bob"]}


class ClaimedStore(MemoryStore):
    """Shared; once ``claimed``, taking a confirmation finds another node owns the session."""

    shared = True

    def __init__(self) -> None:
        super().__init__(SystemClock())
        self.claimed = False

    async def take_confirmation(self, *args: Any, **kwargs: Any) -> bool:
        if self.claimed:
            raise Fenced("the session is owned by another node")
        return await super().take_confirmation(*args, **kwargs)


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_an_answer_fenced_by_a_takeover_lets_the_session_go_quietly(
    gateway_factory: GatewayFactory, decision: str
) -> None:
    store = ClaimedStore()
    gateway = await gateway_factory(store=store, provider="local")
    async with gateway.session("text") as client:
        session = gateway.manager.sessions[client.started["session_id"]]
        await client.send("text.send", text=f"/tool calendar_create_event {json.dumps(EVENT)}")
        requested = await client.last("confirmation.requested")
        await client.until_reply()
        store.claimed = True
        await client.send(
            "confirmation.respond",
            confirmation_id=requested["confirmation_id"],
            decision=decision,
            event_id="answer-1",
        )
        # Let go: the socket closes as for any session another node took (the client resumes
        # there, where the approval is the new owner's to take).
        assert await client.wait_closed() == 1012
    assert session.ownership.handed_off
    assert not [e for e in client.events if e["type"] == "error"]
    assert not [e for e in client.events if e["type"] == "tool.started"][1:]  # nothing ran
    data = gateway.settings.data_dir / "calendar.sqlite"
    assert not data.exists() or "Dentist" not in data.read_bytes().decode(errors="ignore")
