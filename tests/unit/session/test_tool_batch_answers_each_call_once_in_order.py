"""A tool batch's books and answers (``gateway.session.tool_batch``): pure, no event loop.

What the model gets back is the batch in call order, each call answered once: a refusal and a
client's answer always, a call run here only when the ledger lets its result go, a background
call's acknowledgement at once, nothing for a duplicate delivery or a call the provider
cancelled. A batch that fails half-way still owes every call not yet reported its refusal.
Outcomes are built directly; the registry is the runner fixtures plus ``slow_job``, a copy of
``sleepy`` that runs in the background.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from registry_kit import write_artifact

from gateway.orchestrator import Execute, PendingConfirmation, Refuse
from gateway.registry import Registry, load_registry
from gateway.session.tool_batch import (
    ACKNOWLEDGEMENT,
    CONFIRMATION_KEY_MARGIN_S,
    GATEWAY_FAILED,
    Answer,
    BatchBook,
    Unreported,
    after_outcome,
    answered_elsewhere,
    audit_decision,
    batch_calls,
    confirmation_key_ttl_s,
    gateway_failure,
    internal_refusal,
    model_result,
    plan_executions,
    refusal_audit,
    rest_of_batch,
    results_for_model,
    reuses_id,
    spent_budget,
)
from gateway.store import LedgerEntry, LedgerState
from gateway.toolrun import AuditDecision, CallOutcome, ToolCall
from tools._core import EndVoiceSession, Intent, ToolErrorType, ToolResponse
from transports.base import ToolResult
from transports.events import RequestedCall

RUNNER_TOOLS = Path(__file__).resolve().parents[2] / "fixtures" / "runner_tools"
NOW = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    root = tmp_path_factory.mktemp("batch")
    folder = root / "extra" / "slow_job"
    shutil.copytree(RUNNER_TOOLS / "sleepy", folder, ignore=shutil.ignore_patterns("__pycache__"))
    schema = json.loads((folder / "schema.json").read_text())
    schema.update(toolId="slow_job", execution="background")
    (folder / "schema.json").write_text(json.dumps(schema))
    registry = load_registry(write_artifact([RUNNER_TOOLS, root / "extra"], root / "out.json"))
    slow_job, echo = registry.get("slow_job"), registry.get("echo")
    assert slow_job is not None
    assert slow_job.background
    assert echo is not None
    assert not echo.background
    return registry


def numbered(prefix: str) -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"{prefix}{n}"


def call(call_id: str, tool_id: str = "echo") -> ToolCall:
    return ToolCall(call_id, tool_id, {"text": call_id})


def outcome(
    of: ToolCall,
    *,
    ok: bool = True,
    cancelled: bool = False,
    reused_id: bool = False,
    intents: tuple[Intent, ...] = (),
) -> CallOutcome:
    response = (
        ToolResponse.success({"text": of.call_id}, intents)
        if ok
        else replace(
            ToolResponse.failure(ToolErrorType.TRANSIENT, "the service is down"), intents=intents
        )
    )
    return CallOutcome(
        call=of,
        response=response,
        envelope=response.to_envelope({"toolId": of.tool_id, "callId": of.call_id}),
        client_data={"text": of.call_id} if ok else {},
        arguments=None,
        duration_ms=12.0,
        decision=AuditDecision.EXECUTED,
        cancelled=cancelled,
        reused_id=reused_id,
    )


def entry(of: ToolCall, tool_id: str | None = None) -> LedgerEntry:
    return LedgerEntry(
        call_id=of.call_id,
        tool_id=of.tool_id if tool_id is None else tool_id,
        state=LedgerState.STARTED,
        node="node-b",
        epoch=1,
        started_at=0.0,
    )


def pending(of: ToolCall) -> PendingConfirmation:
    return PendingConfirmation(
        confirmation_id="conf-1",
        call_id=of.call_id,
        tool_id=of.tool_id,
        args={"text": of.call_id},
        args_hash="h",
        sensitivity="medium",
        prompt="Confirm?",
        expires_at=NOW + timedelta(seconds=120),
    )


def ids(results: list[ToolResult]) -> list[str]:
    return [result.call_id for result in results]


def envelope_of(result: ToolResult) -> dict[str, Any]:
    return dict(result.envelope)


# -- the batch's calls ---------------------------------------------------------------------------


def test_calls_keep_the_model_s_order_and_a_call_without_an_id_gets_a_fresh_one() -> None:
    fresh = numbered("call_new_")
    requested = (
        RequestedCall("c1", "echo", '{"text": "a"}'),
        RequestedCall("", "echo", None),
        RequestedCall("c3", "kb_search", {"query": "x"}),
        RequestedCall("", "echo", None),
    )
    calls = batch_calls(requested, lambda: next(fresh))
    assert [(c.call_id, c.tool_id) for c in calls] == [
        ("c1", "echo"),
        ("call_new_1", "echo"),
        ("c3", "kb_search"),
        ("call_new_2", "echo"),
    ]
    assert calls[0].arguments == '{"text": "a"}'
    assert calls[2].arguments == {"query": "x"}


def test_a_duplicate_delivery_is_skipped_before_anything_else_is_asked() -> None:
    book = BatchBook((call("c1"), call("c2"), call("c3")))
    # A duplicate of a client tool's call (still waiting for its answer) is a duplicate too.
    assert book.route(call("c1"), answered=True, client_tool=True) == "duplicate"
    assert book.route(call("c2"), answered=False, client_tool=True) == "client"
    assert book.route(call("c3"), answered=False, client_tool=False) == "policy"
    assert book.skipped == {"c1"}


# -- refusals and confirmations ------------------------------------------------------------------


def test_a_refusal_that_opened_a_confirmation_is_audited_as_pending_not_blocked() -> None:
    c = call("c1")
    opened = Refuse(
        c, ToolErrorType.CONFIRMATION_REQUIRED, "ask", "confirmation", opened=pending(c)
    )
    blocked = Refuse(c, ToolErrorType.FORBIDDEN, "no", "forbidden")
    assert refusal_audit(opened) is AuditDecision.CONFIRMATION_PENDING
    assert refusal_audit(blocked) is AuditDecision.BLOCKED


@pytest.mark.parametrize(
    ("reason", "spent"),
    [("budget", "budget"), ("rounds", "rounds"), ("validation", None), ("confirmation", None)],
)
def test_only_budget_and_rounds_refusals_count_as_a_spent_budget(
    reason: str, spent: str | None
) -> None:
    refusal = Refuse(call("c1"), ToolErrorType.BUDGET_EXCEEDED, "spent", reason)
    assert spent_budget(refusal) == spent


def test_a_confirmed_execution_is_audited_as_confirmed() -> None:
    c = call("c1")
    assert audit_decision(Execute(c, {})) is AuditDecision.EXECUTED
    assert audit_decision(Execute(c, {}, confirmation=pending(c))) is AuditDecision.CONFIRMED


def test_a_spoken_yes_another_node_answered_first_is_refused_with_its_arguments() -> None:
    c = call("c1")
    refusal = answered_elsewhere(Execute(c, {"text": "c1"}, confirmation=pending(c)))
    assert refusal.call == c
    assert refusal.error_type is ToolErrorType.VALIDATION
    assert refusal.reason == "confirmation_not_found"
    assert "'conf-1' was answered already" in refusal.message
    assert refusal.args == {"text": "c1"}
    assert refusal.opened is None


def test_a_decision_that_failed_is_an_internal_refusal() -> None:
    refusal = internal_refusal(call("c1"))
    assert (refusal.error_type, refusal.message, refusal.reason) == (
        ToolErrorType.INTERNAL,
        GATEWAY_FAILED,
        "internal",
    )


def test_a_confirmation_s_key_outlives_the_confirmation_by_the_margin() -> None:
    expires_at = NOW + timedelta(seconds=120)
    assert confirmation_key_ttl_s(expires_at, NOW) == 120 + CONFIRMATION_KEY_MARGIN_S
    assert confirmation_key_ttl_s(expires_at, expires_at) == CONFIRMATION_KEY_MARGIN_S


# -- running -------------------------------------------------------------------------------------


def test_an_id_the_ledger_knows_for_another_tool_is_a_reused_id() -> None:
    c = call("c1", "echo")
    assert not reuses_id(None, c)
    assert not reuses_id(entry(c), c)
    assert not reuses_id(entry(c, tool_id=""), c)  # an entry older than tool ids in the ledger
    assert reuses_id(entry(c, tool_id="kb_search"), c)


def test_background_calls_are_acknowledged_and_the_rest_run_or_come_from_the_ledger(
    registry: Registry,
) -> None:
    new_bg, known_bg, reused_bg = (
        call("b1", "slow_job"),
        call("b2", "slow_job"),
        call("b3", "slow_job"),
    )
    new_fg, known_fg = call("f1"), call("f2")
    executions = [Execute(c, {}) for c in (new_bg, new_fg, known_bg, reused_bg, known_fg)]
    known = {
        "b2": entry(known_bg),
        "b3": entry(reused_bg, tool_id="echo"),
        "f2": entry(known_fg),
    }
    plan = plan_executions(executions, known, registry)

    assert [(b.execution.call.call_id, b.entry) for b in plan.background] == [
        ("b1", None),  # nobody ran it: runs beside the session
        ("b2", known["b2"]),  # started before: followed, never run again
    ]
    # A background call under another tool's id is waited for (and refused), never acknowledged.
    assert [e.call.call_id for e in plan.waited] == ["f1", "b3", "f2"]
    assert [e.call.call_id for e in plan.fresh] == ["f1"]
    # The ledger lets each result run here go once; a background call's result goes later.
    assert plan.gated == ("f1", "f2")


def test_a_background_call_s_acknowledgement_says_it_is_under_way(registry: Registry) -> None:
    plan = plan_executions([Execute(call("b1", "slow_job"), {})], {}, registry)
    (started,) = plan.background
    ack = started.acknowledgement
    assert (ack.call_id, ack.name, ack.acknowledgement) == ("b1", "slow_job", True)
    envelope = envelope_of(ack)
    assert envelope["ok"] is True
    assert envelope["data"] == {"status": "running", "message": ACKNOWLEDGEMENT}
    assert envelope["meta"]["registryVersion"] == registry.version
    assert envelope["meta"]["callId"] == "b1"
    assert envelope["meta"]["durationMs"] == 0


def test_after_an_outcome_the_client_hears_of_it_and_its_intents_and_confirmation_follow() -> None:
    c = call("c1")
    confirmation = pending(c)
    done = after_outcome(outcome(c, intents=(EndVoiceSession(),)), confirmation)
    assert done.finished.call_id == "c1"
    assert done.finished.ok
    assert done.finished.intents == ("END_VOICE_SESSION",)
    assert done.intents == (EndVoiceSession(),)
    assert done.resolves is confirmation


def test_a_failed_call_applies_no_intents_but_still_resolves_its_confirmation() -> None:
    c = call("c1")
    done = after_outcome(outcome(c, ok=False, intents=(EndVoiceSession(),)), pending(c))
    assert not done.finished.ok
    assert done.finished.error is not None
    assert done.intents == ()
    assert done.resolves == pending(c)


def test_a_call_the_provider_cancelled_only_closes_for_the_client() -> None:
    c = call("c1")
    cancelled = outcome(c, cancelled=True, intents=(EndVoiceSession(),))
    done = after_outcome(cancelled, pending(c))
    assert done.finished.call_id == "c1"  # its spinner stops
    assert (done.intents, done.resolves) == ((), None)
    assert model_result(cancelled) is None
    assert model_result(outcome(c)) == ToolResult("c1", "echo", outcome(c).envelope)


# -- what the model gets -------------------------------------------------------------------------


def test_the_model_gets_every_call_once_in_call_order() -> None:
    refused, ran, bg, client, cancelled, dup, not_yet = (
        call("refused"),
        call("ran"),
        call("bg", "slow_job"),
        call("client", "client_lookup"),
        call("cancelled"),
        call("dup"),
        call("not_yet"),
    )
    book = BatchBook((refused, ran, bg, client, cancelled, dup, not_yet))
    book.skipped.add("dup")
    ack = ToolResult("bg", "slow_job", {"ok": True}, acknowledgement=True)
    book.acknowledged["bg"] = ack
    book.outcomes.update(
        {
            "refused": outcome(refused, ok=False),
            "ran": outcome(ran),
            "client": outcome(client),
            "cancelled": outcome(cancelled, cancelled=True),
            "not_yet": outcome(not_yet),
        }
    )
    book.gated = ("ran", "cancelled", "not_yet")
    assert book.to_deliver() == ["ran", "cancelled", "not_yet"]

    results = results_for_model(book, delivered={"ran", "cancelled"})
    assert ids(results) == ["refused", "ran", "bg", "client"]
    assert results[2] is ack
    assert results[0].envelope == book.outcomes["refused"].envelope
    # "not_yet": the ledger says its result went already (another node, an earlier delivery).


def test_a_refusal_of_a_reused_id_goes_whatever_the_ledger_says_of_that_id() -> None:
    reused, ran = call("r1"), call("r2")
    book = BatchBook((reused, ran))
    book.outcomes.update({"r1": outcome(reused, ok=False, reused_id=True), "r2": outcome(ran)})
    book.gated = ("r1", "r2")
    # The ledger is not asked about it (its answer is about the other tool's call) ...
    assert book.to_deliver() == ["r2"]
    # ... and it goes even though the ledger would not let that id's result go again.
    assert ids(results_for_model(book, delivered=set())) == ["r1"]


def test_a_gated_call_without_an_outcome_is_asked_of_the_ledger() -> None:
    book = BatchBook((call("c1"),), gated=("c1",))
    assert book.to_deliver() == ["c1"]
    assert results_for_model(book, delivered={"c1"}) == []


# -- a batch that failed half-way ----------------------------------------------------------------


def test_a_failed_batch_still_reports_every_call_not_yet_reported_in_call_order() -> None:
    answered, cancelled, dup, asked, started, untold = (
        call("answered"),
        call("cancelled"),
        call("dup"),
        call("asked", "client_lookup"),
        call("started"),
        call("untold"),
    )
    book = BatchBook((answered, cancelled, dup, asked, started, untold))
    book.skipped.add("dup")
    book.asked.append(asked)
    book.started.update({"answered", "cancelled", "started"})
    book.outcomes["answered"] = outcome(answered)
    book.outcomes["cancelled"] = outcome(cancelled, cancelled=True)

    assert rest_of_batch(book) == [
        Answer(ToolResult("answered", "echo", book.outcomes["answered"].envelope)),
        Unreported(asked, asked=True, unstarted=True),
        Unreported(started, asked=False, unstarted=False),
        Unreported(untold, asked=False, unstarted=True),
    ]


def test_a_call_that_could_not_even_be_refused_gets_the_gateway_s_failure() -> None:
    result = gateway_failure(call("c1"))
    assert (result.call_id, result.name, result.acknowledgement) == ("c1", "echo", False)
    envelope = envelope_of(result)
    assert envelope["ok"] is False
    assert envelope["error"]["type"] == ToolErrorType.INTERNAL.value
    assert envelope["error"]["message"] == GATEWAY_FAILED
    assert envelope["meta"] == {"callId": "c1"}
