"""docs/protocol.md section 4 item 5: a client that lost its socket resumes its session.

The socket is dropped abruptly (TCP shutdown, no close frame, no ``session.end``). Nothing on
the wire tells a client when the gateway has noticed the drop, so the tests wait (bounded) for
the session's record to appear in the store the gateway parks it in.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import Client, ConnectionClosed, GatewayFactory, first, types

from gateway.clock import SystemClock
from gateway.store import MemoryStore

CALENDAR = '/tool calendar_create_event {"title":"Dentist","start":"2026-12-01T10:00:00+01:00"}'
CALENDAR_ARGS = {"title": "Dentist", "start": "2026-12-01T10:00:00+01:00"}


def Store() -> MemoryStore:
    return MemoryStore(SystemClock())


async def eventually(predicate: Callable[[], bool], within: float = 3.0) -> None:
    """Wait (bounded) for gateway state no event announces."""
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def drop(client: Client) -> None:
    """Lose the socket: shut the TCP connection down without a WebSocket close frame."""
    sock = client.ws.get_extra_info("socket")
    assert sock is not None
    sock.shutdown(socket.SHUT_RDWR)
    try:
        while True:
            await client.next(within=2)
    except ConnectionClosed:
        pass


async def resume(
    client: Client, session_id: str, resume_token: str, event_id: str = "resume-1"
) -> dict[str, Any]:
    """Send a resume ``session.start``; the first answer (``session.started`` or ``error``)."""
    await client.send(
        "session.start",
        mode="text",
        resume={"session_id": session_id, "resume_token": resume_token},
        event_id=event_id,
    )
    answer = await client.next()
    if answer["type"] == "session.started":
        client.started = answer
    return answer


def assert_resume_failed(answer: dict[str, Any], event_id: str = "resume-1") -> None:
    assert answer["type"] == "error", answer
    assert answer["code"] == "resume_failed"
    assert answer["fatal"] is False
    assert answer.get("event_id") == event_id


def scenario(tmp_path: Path, name: str, steps: list[dict[str, Any]]) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "steps": steps}))
    return path


def kb(query: str) -> dict[str, Any]:
    return {"name": "kb_search", "arguments": {"query": query}}


BOOK = {"name": "calendar_create_event", "arguments": CALENDAR_ARGS}
# Before the drop: two retrieval calls (the whole text budget when it is 2) and a booking that
# needs confirmation, all in the user's one turn.
BEFORE_DROP = [
    {"expect": {"text": "book the dentist"}, "reply": {"tools": [kb("dentist"), kb("fee"), BOOK]}},
    {
        "expect": {"tool_results": ["kb_search", "kb_search", "calendar_create_event"]},
        "reply": {"say": "Shall I book it?"},
    },
]
# After the approval (still the same user turn): one more retrieval call, then an answer.
AFTER_APPROVAL = [
    {"expect": {"tool_results": ["calendar_create_event"]}, "reply": {"tools": [kb("map")]}},
    {"expect": {"tool_results": ["kb_search"]}, "reply": {"say": "Booked."}},
]


async def approve_and_check_budget(client: Client, confirmation_id: str) -> None:
    """Approve the booking; it runs, then the model's third retrieval call of the turn is
    refused because the two spent before the drop still count."""
    await client.send("confirmation.respond", confirmation_id=confirmation_id, decision="approve")
    events = await client.until_reply()
    resolved = first(events, "confirmation.resolved")
    assert resolved["decision"] == "approved"
    assert resolved["result"]["ok"] is True
    assert resolved["result"]["name"] == "calendar_create_event"
    finished = [e for e in events if e["type"] == "tool.finished"]
    assert [(f["name"], f["ok"]) for f in finished] == [
        ("calendar_create_event", True),
        ("kb_search", False),
    ]
    assert finished[1]["error"]["type"] == "BUDGET_EXCEEDED"
    assert events[-1]["text"] == "Booked."


# -- same gateway ------------------------------------------------------------------------------


async def test_resume_keeps_confirmation_and_history_and_rotates_the_token(
    gateway_factory: GatewayFactory,
) -> None:
    store = Store()
    gateway = await gateway_factory(resume_window_s=2, store=store)
    async with gateway.session() as first_client:
        session_id = first_client.started["session_id"]
        first_token = first_client.started["resume_token"]
        tools_before = first_client.started["tools"]
        assert (await first_client.say("hello"))[-1]["text"] == "You said: hello"
        await first_client.send("text.send", text=CALENDAR)
        requested = first(await first_client.until_reply(), "confirmation.requested")
        await drop(first_client)
    await eventually(lambda: store.parked() == 1)
    assert session_id in gateway.manager.sessions  # parked, not ended
    assert gateway.metric("gateway_active_sessions") == 1

    async with gateway.connect() as client:
        started = await resume(client, session_id, first_token)
        assert started["type"] == "session.started"
        assert started["resumed"] is True
        assert started["session_id"] == session_id
        assert started["resume_token"] != first_token
        assert started["mode"] == "text"
        assert started["tools"] == tools_before
        second_token = started["resume_token"]

        # The pending confirmation survived: approving it runs the tool exactly once.
        await client.send(
            "confirmation.respond",
            confirmation_id=requested["confirmation_id"],
            decision="approve",
        )
        events = await client.until_reply()
        resolved = first(events, "confirmation.resolved")
        assert resolved["decision"] == "approved"
        assert resolved["result"]["ok"] is True
        assert resolved["result"]["data"]["title"] == "Dentist"
        assert events[-1]["text"].startswith("Tool results: calendar_create_event=")
        assert gateway.decisions("calendar_create_event") == [
            ("calendar_create_event", "confirmation_pending"),
            ("calendar_create_event", "confirmed"),
        ]
        # The conversation survived: the model has the turns from before the drop.
        history = gateway.manager.sessions[session_id].transport.history  # type: ignore[attr-defined]
        assert ("user", "hello") in history
        assert ("assistant", "You said: hello") in history
        assert gateway.metric("gateway_session_resumes_total") == 1
        await drop(client)
    await eventually(lambda: store.parked() == 1)

    # The first token was replaced by the second: it no longer resumes anything.
    async with gateway.connect() as client:
        assert_resume_failed(await resume(client, session_id, first_token))
        started = await resume(client, session_id, second_token, event_id="resume-2")
        assert started["type"] == "session.started"
        assert started["resumed"] is True
        assert started["session_id"] == session_id
        assert (await client.say("still me"))[-1]["text"] == "You said: still me"
    assert gateway.decisions("calendar_create_event")[-1] == ("calendar_create_event", "confirmed")
    assert len(gateway.decisions("calendar_create_event")) == 2


async def test_spent_budget_survives_a_resume_within_the_turn(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    store = Store()
    gateway = await gateway_factory(
        resume_window_s=2,
        store=store,
        text_retrieval_calls=2,
        local_scenario=scenario(tmp_path, "budget", BEFORE_DROP + AFTER_APPROVAL),
    )
    async with gateway.session() as client:
        session_id = client.started["session_id"]
        resume_token = client.started["resume_token"]
        events = await client.say("book the dentist")
        finished = [e for e in events if e["type"] == "tool.finished"]
        assert sorted((f["name"], f["ok"]) for f in finished) == [
            ("calendar_create_event", False),
            ("kb_search", True),
            ("kb_search", True),
        ]
        requested = first(events, "confirmation.requested")
        assert events[-1]["text"] == "Shall I book it?"
        await drop(client)
    await eventually(lambda: store.parked() == 1)
    async with gateway.connect() as client:
        started = await resume(client, session_id, resume_token)
        assert started["resumed"] is True
        await approve_and_check_budget(client, requested["confirmation_id"])
    assert [d for _, d in gateway.decisions("kb_search")] == ["executed", "executed", "blocked"]


async def test_wrong_token_or_other_user_cannot_resume(gateway_factory: GatewayFactory) -> None:
    store = Store()
    gateway = await gateway_factory(resume_window_s=2, store=store)
    async with gateway.session(sub="alice") as client:
        session_id = client.started["session_id"]
        resume_token = client.started["resume_token"]
        # While the owner is connected, another user cannot take the session, even with the
        # token, nor can anyone with a wrong token.
        async with gateway.connect(sub="mallory") as thief:
            assert_resume_failed(await resume(thief, session_id, resume_token))
        async with gateway.connect(sub="alice") as thief:
            assert_resume_failed(await resume(thief, session_id, resume_token + "x"))
        # The owner coming back on a new socket while the old one still looks open (a network
        # switch) takes the session over: the old socket is let go.
        async with gateway.connect(sub="alice") as second:
            started = await resume(second, session_id, resume_token)
            assert started["resumed"] is True
            assert started["session_id"] == session_id
            assert await client.wait_closed() == 1000
            resume_token = started["resume_token"]
            reply = await second.say("mine")
            assert reply[-1]["text"] == "You said: mine"
            await drop(second)
    await eventually(lambda: store.parked() == 1)

    async with gateway.connect(sub="alice") as client:
        assert_resume_failed(await resume(client, session_id, resume_token + "x"))
        assert_resume_failed(
            await resume(client, "sess_unknown", resume_token, "resume-2"), "resume-2"
        )
    async with gateway.connect(sub="mallory") as client:
        assert_resume_failed(await resume(client, session_id, resume_token))
        # Not fatal: the other user can start a session of their own.
        started = await client.start("text")
        assert started["resumed"] is False
        assert started["session_id"] != session_id
    # The failed attempts left the session resumable by its owner.
    async with gateway.connect(sub="alice") as client:
        started = await resume(client, session_id, resume_token)
        assert started["type"] == "session.started"
        assert started["resumed"] is True
        assert started["session_id"] == session_id


async def test_session_ends_when_the_resume_window_passes(
    gateway_factory: GatewayFactory,
) -> None:
    store = Store()
    gateway = await gateway_factory(resume_window_s=0.3, store=store)
    async with gateway.session() as client:
        session_id = client.started["session_id"]
        resume_token = client.started["resume_token"]
        await client.send("text.send", text=CALENDAR)
        await client.until_reply()
        await drop(client)
    await eventually(lambda: session_id not in gateway.manager.sessions)
    assert store.parked() == 0
    assert gateway.metric("gateway_active_sessions") == 0
    async with gateway.connect() as client:
        assert_resume_failed(await resume(client, session_id, resume_token))
        started = await client.start("text")
        assert started["resumed"] is False
    # Nothing ran for the confirmation that was pending when the session ended.
    assert "confirmed" not in [d for _, d in gateway.decisions("calendar_create_event")]


async def test_audio_produced_while_away_is_dropped(gateway_factory: GatewayFactory) -> None:
    store = Store()
    gateway = await gateway_factory(resume_window_s=2, store=store)
    async with gateway.session("voice") as client:
        session_id = client.started["session_id"]
        resume_token = client.started["resume_token"]
        await client.send("text.send", text="/slow 300 spoken while you were away")
        await drop(client)
    session = gateway.manager.sessions[session_id]
    await eventually(lambda: store.parked() == 1)
    # The answer is produced (and spoken) while no client is attached.
    spoken = ("assistant", "spoken while you were away")
    await eventually(lambda: spoken in session.transport.history)  # type: ignore[attr-defined]
    async with gateway.connect() as client:
        await client.send(
            "session.start",
            mode="voice",
            resume={"session_id": session_id, "resume_token": resume_token},
        )
        started = await client.next()
        assert started["type"] == "session.started"
        assert started["resumed"] is True
        assert started["mode"] == "voice"
        await client.send("ping", id="back")
        assert (await client.next())["type"] == "pong"
        assert client.audio == []
        assert types(client.events) == ["session.started", "pong"]


# -- across gateways sharing one store ------------------------------------------------------


async def test_resume_on_another_gateway(gateway_factory: GatewayFactory, tmp_path: Path) -> None:
    store = Store()
    common: dict[str, Any] = {"resume_window_s": 2, "store": store, "text_retrieval_calls": 2}
    gateway_a = await gateway_factory(
        local_scenario=scenario(tmp_path, "node_a", BEFORE_DROP), **common
    )
    gateway_b = await gateway_factory(
        local_scenario=scenario(tmp_path, "node_b", AFTER_APPROVAL), **common
    )
    async with gateway_a.session() as client:
        session_id = client.started["session_id"]
        resume_token = client.started["resume_token"]
        tools_before = client.started["tools"]
        events = await client.say("book the dentist")
        requested = first(events, "confirmation.requested")
        await drop(client)
    await eventually(lambda: store.parked() == 1)

    async with gateway_b.connect() as client:
        started = await resume(client, session_id, resume_token)
        assert started["type"] == "session.started"
        assert started["resumed"] is True
        assert started["session_id"] == session_id
        assert started["resume_token"] != resume_token
        assert started["tools"] == tools_before
        # The new upstream on B was given the conversation held on A.
        session_b = gateway_b.manager.sessions[session_id]
        history = session_b.transport.history  # type: ignore[attr-defined]
        assert ("user", "book the dentist") in history
        assert ("assistant", "Shall I book it?") in history
        # The pending confirmation moved with it, and so did the spent retrieval budget.
        await approve_and_check_budget(client, requested["confirmation_id"])
    assert gateway_b.decisions("calendar_create_event") == [("calendar_create_event", "confirmed")]
    assert gateway_a.decisions("calendar_create_event") == [
        ("calendar_create_event", "confirmation_pending")
    ]


async def test_cross_node_resume_token_is_single_use(
    gateway_factory: GatewayFactory,
) -> None:
    store = Store()
    gateway_a = await gateway_factory(resume_window_s=2, store=store)
    gateway_b = await gateway_factory(resume_window_s=2, store=store)
    async with gateway_a.session() as client:
        session_id = client.started["session_id"]
        resume_token = client.started["resume_token"]
        await drop(client)
    await eventually(lambda: store.parked() == 1)
    async with gateway_b.connect() as client:
        assert (await resume(client, session_id, resume_token))["resumed"] is True
        # The same token on A (which still holds its parked copy) resumes nothing.
        async with gateway_a.connect() as other:
            assert_resume_failed(await resume(other, session_id, resume_token))
        assert (await client.say("on b"))[-1]["text"] == "You said: on b"


async def test_first_node_window_does_not_cancel_a_later_park_elsewhere(
    gateway_factory: GatewayFactory,
) -> None:
    store = Store()
    gateway_a = await gateway_factory(resume_window_s=1.2, store=store)
    gateway_b = await gateway_factory(resume_window_s=1.2, store=store)
    async with gateway_a.session() as client:
        session_id = client.started["session_id"]
        resume_token = client.started["resume_token"]
        await drop(client)
    await eventually(lambda: store.parked() == 1)
    async with gateway_b.connect() as client:
        started = await resume(client, session_id, resume_token)
        assert started["resumed"] is True
        resume_token = started["resume_token"]
        await asyncio.sleep(0.5)  # deliberately later than A's park
        await drop(client)
    await eventually(lambda: store.parked() == 1)
    # A's window (from its own park) passes before B's (from the later park) does.
    await eventually(lambda: session_id not in gateway_a.manager.sessions)
    assert session_id in gateway_b.manager.sessions
    assert store.parked() == 1  # the record B parked
    async with gateway_b.connect() as client:
        started = await resume(client, session_id, resume_token)
        assert started["type"] == "session.started", started
        assert started["resumed"] is True
