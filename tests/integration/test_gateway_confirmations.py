"""The confirmation matrix (docs/protocol.md section 7, docs/tools.md 7.4).

Over real sockets against the local model, text mode. The model's view is the local model's
``Tool results: NAME=<envelope JSON>`` reply; executions are counted in the tools' own sqlite
files (``calendar.sqlite``, ``care.sqlite``) under the gateway's data directory.
"""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from harness import (
    Client,
    Gateway,
    GatewayFactory,
    first,
    model_results,
    registry_with_variant,
    types,
)

from gateway.registry import Registry

EVENT = {"title": "Dentist", "start": "2026-12-01T10:00:00+01:00", "attendees": ["Bob"]}
# What the gateway validated and binds the confirmation to: the schema's defaults filled in.
EVENT_ARGS = {**EVENT, "duration_minutes": 30}
CARE = {"patient_id": "pat_1042", "note": "please log that she ate well", "severity": "low"}


# -- helpers -------------------------------------------------------------------------------------


def only_result(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The single envelope of the model's final reply in ``events``, for tool ``name``."""
    results = model_results(events[-1]["text"])
    assert [n for n, _ in results] == [name], results
    return results[0][1]


def rows(gateway: Gateway, db: str, table: str) -> list[tuple[Any, ...]]:
    path = gateway.settings.data_dir / db
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        return list(conn.execute(f"SELECT * FROM {table}"))


def calendar_rows(gateway: Gateway) -> list[tuple[Any, ...]]:
    return rows(gateway, "calendar.sqlite", "events")


def tool_command(name: str, args: dict[str, Any]) -> str:
    return f"/tool {name} {json.dumps(args)}"


async def request(
    client: Client, name: str = "calendar_create_event", args: dict[str, Any] = EVENT
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Call a tool that needs confirmation: (tool.started, confirmation.requested, the model's
    envelope, all events up to the model's reply)."""
    await client.send("text.send", text=tool_command(name, args))
    events = await client.until_reply()
    started = first(events, "tool.started")
    finished = first(events, "tool.finished")
    requested = first(events, "confirmation.requested")
    assert finished["call_id"] == started["call_id"]
    assert finished["error"]["type"] == "CONFIRMATION_REQUIRED"
    assert events.index(started) < events.index(finished) < events.index(requested)
    envelope = only_result(events, name)
    assert envelope["ok"] is False
    assert envelope["error"]["type"] == "CONFIRMATION_REQUIRED"
    assert envelope["error"]["confirmationId"] == requested["confirmation_id"]
    assert envelope["meta"]["callId"] == started["call_id"]
    return started, requested, envelope, events


async def respond(client: Client, confirmation_id: str, decision: str, **fields: Any) -> None:
    await client.send(
        "confirmation.respond", confirmation_id=confirmation_id, decision=decision, **fields
    )


def resolved_after_requested(client: Client, confirmation_id: str) -> None:
    """``confirmation.requested`` precedes ``confirmation.resolved``, each exactly once."""
    kinds = [
        e["type"]
        for e in client.events
        if e["type"].startswith("confirmation.") and e.get("confirmation_id") == confirmation_id
    ]
    assert kinds == ["confirmation.requested", "confirmation.resolved"], kinds


def no_confirmation_id_in_arguments(client: Client) -> None:
    for event in client.events:
        if event["type"] == "tool.started":
            assert "confirmation_id" not in event["arguments"], event


def payload(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != "type"}


# -- approve -------------------------------------------------------------------------------------


async def test_approve_runs_once_and_the_model_gets_the_result(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        started, requested, envelope, _ = await request(client)
        assert started["arguments"] == EVENT_ARGS
        assert requested["call_id"] == started["call_id"]
        assert requested["tool"] == "calendar_create_event"
        assert requested["parameters"] == EVENT_ARGS
        assert requested["sensitivity"] == "medium"
        assert isinstance(requested["prompt"], str)
        assert "Dentist" in requested["prompt"]
        assert envelope["error"]["prompt"] == requested["prompt"]
        expires = datetime.fromisoformat(requested["expires_at"].replace("Z", "+00:00"))
        assert expires > datetime.now(UTC)
        assert calendar_rows(gateway) == []

        await respond(client, requested["confirmation_id"], "approve", event_id="ok-1")
        events = await client.until_reply()
        assert "error" not in types(events)
        assert types(events)[:3] == ["tool.started", "tool.finished", "confirmation.resolved"]
        run_started, finished, resolved = events[:3]
        assert run_started["call_id"] == started["call_id"]
        assert run_started["arguments"] == EVENT_ARGS
        assert finished["ok"] is True
        assert finished["data"]["title"] == "Dentist"
        assert "attendees" not in finished["data"]  # outside the allowlist
        assert resolved["confirmation_id"] == requested["confirmation_id"]
        assert resolved["decision"] == "approved"
        assert resolved["result"] == payload(finished)
        # The model gets the whole result and tells the user.
        result = only_result(events, "calendar_create_event")
        assert result["ok"] is True
        assert result["data"]["event_id"] == finished["data"]["event_id"]
        assert result["data"]["attendees"] == ["Bob"]
        assert result["meta"]["callId"] == started["call_id"]
        resolved_after_requested(client, requested["confirmation_id"])
        no_confirmation_id_in_arguments(client)
    assert len(calendar_rows(gateway)) == 1
    assert gateway.decisions("calendar_create_event") == [
        ("calendar_create_event", "confirmation_pending"),
        ("calendar_create_event", "confirmed"),
    ]
    assert gateway.metric("gateway_confirmations_total", decision="approved") == 1


# -- reject --------------------------------------------------------------------------------------


async def test_reject_runs_nothing_and_the_model_is_told(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        started, requested, _, _ = await request(client)
        confirmation = requested["confirmation_id"]
        await respond(client, confirmation, "reject", event_id="no-1")
        events = await client.until_reply()
        assert "tool.started" not in types(events)
        assert "error" not in types(events)
        resolved = first(events, "confirmation.resolved")
        assert resolved["decision"] == "rejected"
        assert "result" not in resolved
        told = only_result(events, "calendar_create_event")
        assert told["ok"] is False
        assert confirmation in told["error"]["message"]
        assert told["meta"]["callId"] == started["call_id"]
        resolved_after_requested(client, confirmation)
        # A rejected id cannot be approved afterwards.
        await respond(client, confirmation, "approve", event_id="late-yes")
        error = await client.last("error")
        assert error["code"] == "confirmation_not_found"
        assert error["event_id"] == "late-yes"
    assert calendar_rows(gateway) == []
    assert gateway.decisions("calendar_create_event") == [
        ("calendar_create_event", "confirmation_pending"),
        ("calendar_create_event", "rejected"),
    ]
    assert gateway.metric("gateway_confirmations_total", decision="rejected") == 1


# -- modify --------------------------------------------------------------------------------------


async def test_approve_with_modified_parameters_runs_them(gateway: Gateway) -> None:
    modified = {"title": "Dentist", "start": "2026-12-01T15:00:00+01:00", "duration_minutes": 45}
    async with gateway.session("text") as client:
        _, requested, _, _ = await request(client)
        await respond(client, requested["confirmation_id"], "approve", parameters=modified)
        events = await client.until_reply()
        assert "error" not in types(events)
        assert first(events, "tool.started")["arguments"] == modified
        finished = first(events, "tool.finished")
        assert finished["data"]["start"] == "2026-12-01T15:00:00+01:00"
        assert finished["data"]["end"] == "2026-12-01T15:45:00+01:00"
        assert first(events, "confirmation.resolved")["decision"] == "approved"
        result = only_result(events, "calendar_create_event")
        assert result["data"]["start"] == "2026-12-01T15:00:00+01:00"
        assert result["data"]["attendees"] == []  # the modified arguments, not the original
    stored = calendar_rows(gateway)
    assert len(stored) == 1
    assert "2026-12-01T15:00:00+01:00" in stored[0]


async def test_invalid_modified_parameters_leave_the_confirmation_pending(
    gateway: Gateway,
) -> None:
    async with gateway.session("text") as client:
        _, requested, _, _ = await request(client)
        confirmation = requested["confirmation_id"]
        bad = {"title": "Dentist", "start": "2026-12-01T10:00:00+01:00", "duration_minutes": 1}
        await respond(client, confirmation, "approve", parameters=bad, event_id="bad-1")
        events = await client.until("error")
        assert events[-1]["code"] == "invalid_event"
        assert events[-1]["event_id"] == "bad-1"
        assert "duration_minutes" in events[-1]["message"]
        assert events[-1]["fatal"] is False
        assert "tool.started" not in types(events)
        # Parameters that are not an object at all.
        await respond(client, confirmation, "approve", parameters=["x"], event_id="bad-2")
        error = await client.last("error")
        assert error["code"] == "invalid_event"
        assert error["event_id"] == "bad-2"
        assert "parameters" in error["message"]
        assert calendar_rows(gateway) == []
        # Still pending: a plain approve runs the original arguments once.
        await respond(client, confirmation, "approve", event_id="good")
        events = await client.until_reply()
        assert "error" not in types(events)
        assert first(events, "tool.started")["arguments"] == EVENT_ARGS
        assert first(events, "confirmation.resolved")["decision"] == "approved"
        resolved_after_requested(client, confirmation)
    assert len(calendar_rows(gateway)) == 1


# -- expire --------------------------------------------------------------------------------------


async def test_expiry_resolves_by_itself_and_late_answers_fail(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(confirmation_ttl_s=0.5)
    async with gateway.session("text") as client:
        _, requested, _, _ = await request(client)
        confirmation = requested["confirmation_id"]
        asked = time.monotonic()
        resolved = await client.last("confirmation.resolved", within=3.0)
        assert time.monotonic() - asked >= 0.35
        assert resolved["confirmation_id"] == confirmation
        assert resolved["decision"] == "expired"
        assert "result" not in resolved
        # The model is told, naming the confirmation (context given to the local model).
        session = gateway.manager.sessions[client.started["session_id"]]
        notes = getattr(session.transport, "context_notes", [])
        assert any(confirmation in note and "expired" in note for note in notes), notes
        # A late client answer.
        await respond(client, confirmation, "approve", event_id="late")
        error = await client.last("error")
        assert error["code"] == "confirmation_expired"
        assert error["event_id"] == "late"
        # A late spoken yes: the model re-calls with the expired id; nothing runs.
        await client.send("text.send", text="yes")
        events = await client.until_reply()
        started = first(events, "tool.started")
        assert "confirmation_id" not in started["arguments"]
        finished = first(events, "tool.finished")
        assert finished["ok"] is False
        assert "expired" in finished["error"]["message"]
        assert "confirmation.resolved" not in types(events)
        resolved_after_requested(client, confirmation)
    assert calendar_rows(gateway) == []
    decisions = [d for _, d in gateway.decisions("calendar_create_event")]
    assert decisions[:2] == ["confirmation_pending", "expired"]
    assert "executed" not in decisions
    assert "confirmed" not in decisions
    assert gateway.metric("gateway_confirmations_total", decision="expired") == 1


# -- spoken yes ----------------------------------------------------------------------------------


async def test_spoken_yes_runs_once(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        started, requested, _, _ = await request(client)
        await client.send("text.send", text="yes")
        events = await client.until_reply()
        assert "error" not in types(events)
        recall = first(events, "tool.started")
        assert recall["name"] == "calendar_create_event"
        assert recall["call_id"] != started["call_id"]
        assert recall["arguments"] == EVENT_ARGS  # without confirmation_id
        finished = first(events, "tool.finished")
        assert finished["call_id"] == recall["call_id"]
        assert finished["ok"] is True
        resolved = first(events, "confirmation.resolved")
        assert resolved["confirmation_id"] == requested["confirmation_id"]
        assert resolved["decision"] == "approved"
        assert resolved["result"] == payload(finished)
        assert events.index(finished) < events.index(resolved)
        result = only_result(events, "calendar_create_event")
        assert result["ok"] is True
        assert result["meta"]["callId"] == recall["call_id"]
        resolved_after_requested(client, requested["confirmation_id"])
        no_confirmation_id_in_arguments(client)
        # Nothing is pending any more: another "yes" is just words, and the id is spent.
        assert (await client.say("yes"))[-1]["text"] == "You said: yes"
        await respond(client, requested["confirmation_id"], "approve", event_id="again")
        error = await client.last("error")
        assert error["code"] == "confirmation_not_found"
        assert error["event_id"] == "again"
    assert len(calendar_rows(gateway)) == 1
    decisions = [d for _, d in gateway.decisions("calendar_create_event")]
    assert decisions[0] == "confirmation_pending"
    assert len(decisions) == 2
    assert gateway.metric("gateway_confirmations_total", decision="approved") == 1


async def test_spoken_yes_is_audited_as_confirmed(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        await request(client)
        await client.say("yes")
    assert gateway.decisions("calendar_create_event") == [
        ("calendar_create_event", "confirmation_pending"),
        ("calendar_create_event", "confirmed"),
    ]


async def test_spoken_yes_is_refused_for_a_critical_tool(gateway: Gateway) -> None:
    async with gateway.session("text", roles=["caregiver"]) as client:
        started, requested, envelope, _ = await request(client, "create_care_log", CARE)
        confirmation = requested["confirmation_id"]
        assert requested["sensitivity"] == "critical"
        assert "device" in requested["prompt"]
        assert "device" in envelope["error"]["message"]

        await client.send("text.send", text="yes")
        events = await client.until_reply()
        recall = first(events, "tool.started")
        assert recall["arguments"] == CARE
        refused = first(events, "tool.finished")
        assert refused["error"]["type"] == "CONFIRMATION_REQUIRED"
        assert "device" in refused["error"]["message"]
        told = only_result(events, "create_care_log")
        assert told["error"]["type"] == "CONFIRMATION_REQUIRED"
        assert told["error"]["confirmationId"] == confirmation
        assert "confirmation.resolved" not in types(events)
        assert rows(gateway, "care.sqlite", "care_log") == []

        # Still pending for the client: its approval runs the call once.
        await respond(client, confirmation, "approve", event_id="device")
        events = await client.until_reply()
        assert "error" not in types(events)
        assert [e["type"] for e in events if e["type"].startswith("tool.")] == [
            "tool.started",
            "tool.finished",
        ]
        assert first(events, "tool.started")["call_id"] == started["call_id"]
        finished = first(events, "tool.finished")
        assert finished["ok"] is True
        assert set(finished["data"]) <= {"log_id", "patient_id", "severity", "created_at"}
        resolved = first(events, "confirmation.resolved")
        assert resolved["decision"] == "approved"
        assert only_result(events, "create_care_log")["ok"] is True
        resolved_after_requested(client, confirmation)
        no_confirmation_id_in_arguments(client)
    assert len(rows(gateway, "care.sqlite", "care_log")) == 1
    assert gateway.decisions("create_care_log") == [
        ("create_care_log", "confirmation_pending"),
        ("create_care_log", "blocked"),
        ("create_care_log", "confirmed"),
    ]


async def test_spoken_yes_with_other_arguments_is_refused_and_stays_pending(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    other = {**EVENT, "title": "Something else"}
    scenario = tmp_path / "other_arguments.json"
    scenario.write_text(
        json.dumps(
            {
                "name": "other_arguments",
                "steps": [
                    {
                        "expect": {"text": "book"},
                        "reply": {"tools": [{"name": "calendar_create_event", "arguments": EVENT}]},
                    },
                    {
                        "expect": {"tool_results": ["calendar_create_event"]},
                        "reply": {"say": "Shall I?"},
                    },
                    {
                        "expect": {"text": "yes"},
                        "reply": {
                            "tools": [
                                {
                                    "name": "calendar_create_event",
                                    "arguments": other,
                                    "with_confirmation": True,
                                }
                            ]
                        },
                    },
                    {
                        "expect": {"tool_results": ["calendar_create_event"]},
                        "reply": {"say": "Please approve it."},
                    },
                    {
                        "expect": {"tool_results": ["calendar_create_event"]},
                        "reply": {"say": "Booked."},
                    },
                ],
            }
        )
    )
    gateway = await gateway_factory(local_scenario=scenario)
    async with gateway.session("text") as client:
        events = await client.say("book")
        requested = first(events, "confirmation.requested")
        events = await client.say("yes")
        assert events[-1]["text"] == "Please approve it."
        assert first(events, "tool.started")["arguments"]["title"] == "Something else"
        refused = first(events, "tool.finished")
        assert refused["ok"] is False
        assert refused["error"]["type"] == "VALIDATION"
        assert "confirmation.resolved" not in types(events)
        assert calendar_rows(gateway) == []
        # The confirmation is bound to the original arguments and still open for the client.
        await respond(client, requested["confirmation_id"], "approve")
        events = await client.until_reply()
        assert events[-1]["text"] == "Booked."
        assert first(events, "tool.finished")["data"]["title"] == "Dentist"
        assert first(events, "confirmation.resolved")["decision"] == "approved"
    assert len(calendar_rows(gateway)) == 1


# -- unknown and reused ids ----------------------------------------------------------------------


async def test_unknown_confirmation_id(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        await respond(client, "conf_does_not_exist", "approve", event_id="u1")
        error = await client.last("error")
        assert error["code"] == "confirmation_not_found"
        assert error["event_id"] == "u1"
        assert error["fatal"] is False
        await respond(client, "conf_does_not_exist", "reject", event_id="u2")
        error = await client.last("error")
        assert error["code"] == "confirmation_not_found"
        assert error["event_id"] == "u2"
        assert (await client.say("still here"))[-1]["text"] == "You said: still here"
    assert gateway.decisions() == []


async def test_an_id_works_once(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        _, requested, _, _ = await request(client)
        confirmation = requested["confirmation_id"]
        await respond(client, confirmation, "approve", event_id="first")
        await client.until_reply()
        for attempt, decision in (("second", "approve"), ("third", "reject")):
            await respond(client, confirmation, decision, event_id=attempt)
            events = await client.until("error")
            assert events[-1]["code"] == "confirmation_not_found"
            assert events[-1]["event_id"] == attempt
            assert "tool.started" not in types(events)
        resolved_after_requested(client, confirmation)
    assert len(calendar_rows(gateway)) == 1
    assert [d for _, d in gateway.decisions("calendar_create_event")] == [
        "confirmation_pending",
        "confirmed",
    ]


# -- budgets -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def confirmed_lookup_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """The runner fixtures plus ``confirmed_lookup``: a retrieval tool that needs confirmation."""
    root = tmp_path_factory.mktemp("confirmed_tools")
    return registry_with_variant(root, "sleepy", "confirmed_lookup", requiresConfirmation=True)


async def test_approved_retrieval_call_spends_the_retrieval_budget(
    gateway_factory: GatewayFactory, confirmed_lookup_registry: Registry, tmp_path: Path
) -> None:
    def calls(*names: str) -> dict[str, Any]:
        return {"tools": [{"name": n, "arguments": {"ms": 0}} for n in names]}

    scenario = tmp_path / "confirmed_lookup.json"
    scenario.write_text(
        json.dumps(
            {
                "name": "confirmed_lookup",
                "steps": [
                    {"expect": {"text": "look"}, "reply": calls("confirmed_lookup")},
                    {
                        "expect": {"tool_results": ["confirmed_lookup"]},
                        "reply": {"say": "Shall I?"},
                    },
                    # After the client's approval, in the same user turn: one more lookup.
                    {"expect": {"tool_results": ["confirmed_lookup"]}, "reply": calls("sleepy")},
                    {"expect": {"tool_results": ["sleepy"]}, "reply": {"say": "done"}},
                ],
            }
        )
    )
    gateway = await gateway_factory(
        registry=confirmed_lookup_registry, local_scenario=scenario, text_retrieval_calls=1
    )
    async with gateway.session("text") as client:
        events = await client.say("look")
        assert events[-1]["text"] == "Shall I?"
        requested = first(events, "confirmation.requested")
        await respond(client, requested["confirmation_id"], "approve")
        events = await client.until_reply()
        assert events[-1]["text"] == "done"
        finished = [e for e in events if e["type"] == "tool.finished"]
        assert [(f["name"], f["ok"]) for f in finished] == [
            ("confirmed_lookup", True),
            ("sleepy", False),
        ]
        assert finished[1]["error"]["type"] == "BUDGET_EXCEEDED"
    assert gateway.metric("gateway_tool_budget_refusals_total", reason="budget") == 1


# -- expiry noticed by an answer before the gateway's timer --------------------------------------

# With a TTL of 1 µs a confirmation is expired the moment it opens; the gateway's timer notices it
# within a quarter second, but an answer that arrives first finds it expired itself. Each test
# tries a few fresh sessions so that at least one answer beats the timer (all of them do, almost
# always; the expected behaviour is the same whichever path notices the expiry).
ATTEMPTS = 3


async def test_expired_when_the_client_answers_first_the_model_is_still_told(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(confirmation_ttl_s=1e-6)
    for attempt in range(ATTEMPTS):
        async with gateway.session("text") as client:
            await client.send("text.send", text=tool_command("calendar_create_event", EVENT))
            requested = await client.last("confirmation.requested")
            confirmation = requested["confirmation_id"]
            await respond(client, confirmation, "approve", event_id=f"late-{attempt}")
            events = await client.until("error")
            assert events[-1]["code"] == "confirmation_expired"
            assert events[-1]["event_id"] == f"late-{attempt}"
            resolved = [e for e in client.events if e["type"] == "confirmation.resolved"]
            assert [r["decision"] for r in resolved] == ["expired"]
            session = gateway.manager.sessions[client.started["session_id"]]
            notes = getattr(session.transport, "context_notes", [])
            assert any(confirmation in note for note in notes), notes
    assert calendar_rows(gateway) == []


async def test_expired_when_the_user_says_yes_first_the_client_still_gets_resolved(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(confirmation_ttl_s=1e-6)
    for _ in range(ATTEMPTS):
        async with gateway.session("text") as client:
            _, requested, _, _ = await request(client)
            confirmation = requested["confirmation_id"]
            await client.send("text.send", text="yes")
            events = await client.until_reply()
            refused = first(events, "tool.finished")
            assert refused["ok"] is False
            assert "expired" in refused["error"]["message"]
            resolved = [
                e
                for e in client.events
                if e["type"] == "confirmation.resolved" and e["confirmation_id"] == confirmation
            ]
            assert [r["decision"] for r in resolved] == ["expired"]
    assert calendar_rows(gateway) == []
    assert [d for _, d in gateway.decisions("calendar_create_event")].count("expired") == ATTEMPTS


async def test_retrieval_tool_needing_confirmation_is_refused_once_the_budget_is_spent(
    gateway_factory: GatewayFactory, confirmed_lookup_registry: Registry
) -> None:
    gateway = await gateway_factory(registry=confirmed_lookup_registry, text_retrieval_calls=1)
    async with gateway.session("text") as client:
        events = await client.say('/tools sleepy {"ms":0} ;; confirmed_lookup {"ms":0}')
        finished = [e for e in events if e["type"] == "tool.finished"]
        assert [(f["name"], f["ok"]) for f in finished] == [
            ("confirmed_lookup", False),
            ("sleepy", True),
        ]
        assert finished[0]["error"]["type"] == "BUDGET_EXCEEDED"
        assert "confirmation.requested" not in types(events)
        results = model_results(events[-1]["text"])
        assert [(n, e["ok"]) for n, e in results] == [("sleepy", True), ("confirmed_lookup", False)]
    assert gateway.decisions("confirmed_lookup") == [("confirmed_lookup", "blocked")]
