"""One tool batch's books and answers, as pure steps: plain data in, decisions as values out.

``ToolFlow`` is the async shell (tasks, awaits, the store, the runner); what it does with a
batch, and in which order, is decided here, without an event loop:

- ``BatchBook``: how far a batch got, call by call: a duplicate delivery (skipped), asked of the
  client, told ``tool.started``, decided, answered;
- ``plan_executions``: which executions go on in the background (acknowledged at once), which
  the batch waits for, and which of those nobody ran yet (the ledger says);
- ``after_outcome``: what follows a call's outcome (``tool.finished``, its intents, the
  confirmation it resolves); a call the provider cancelled closes for the client, nothing more;
- ``results_for_model``: what the model gets, in call order, each result once;
- ``rest_of_batch``: what a batch that failed half-way must still report;
- ``ResponseEnds``: which responses have a batch running, and the ends held back for them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Literal, TypeVar

from gateway.orchestrator import Execute, PendingConfirmation, Refuse
from gateway.protocol import ToolFinished
from gateway.registry import Registry
from gateway.session.tool_events import tool_finished_event
from gateway.store import LedgerEntry
from gateway.toolrun import AuditDecision, CallOutcome, ToolCall
from tools._core import Intent, ToolErrorType, ToolResponse
from transports.base import ToolResult
from transports.events import RequestedCall, ResponseDone

__all__ = [
    "ACKNOWLEDGEMENT",
    "CONFIRMATION_KEY_MARGIN_S",
    "GATEWAY_FAILED",
    "AfterOutcome",
    "Answer",
    "BatchBook",
    "ExecutionPlan",
    "InBackground",
    "ResponseEnds",
    "Route",
    "Unreported",
    "acknowledgement",
    "after_outcome",
    "answered_elsewhere",
    "audit_decision",
    "batch_calls",
    "confirmation_key_ttl_s",
    "gateway_failure",
    "internal_refusal",
    "model_result",
    "plan_executions",
    "refusal_audit",
    "rest_of_batch",
    "results_for_model",
    "reuses_id",
    "spent_budget",
]

GATEWAY_FAILED = "The gateway failed while handling this call; retry later."
ACKNOWLEDGEMENT = "Started; the result follows when ready. Tell the user it is under way."
# How long a confirmation's key in the store outlives the confirmation.
CONFIRMATION_KEY_MARGIN_S = 300.0

# What a call of a batch is: delivered again (answered once already), a tool of the client's
# own (the client runs it), or one the gateway's policy decides.
Route = Literal["duplicate", "client", "policy"]


def batch_calls(
    requested: Sequence[RequestedCall], new_call_id: Callable[[], str]
) -> list[ToolCall]:
    """The batch's calls, in the model's order; a call without an id gets a fresh one."""
    return [ToolCall(c.call_id or new_call_id(), c.name, c.arguments) for c in requested]


@dataclass(slots=True)
class BatchBook:
    """How far one batch got: what it still owes the client and the model, whatever fails."""

    calls: tuple[ToolCall, ...]
    skipped: set[str] = field(default_factory=set)  # duplicate deliveries
    started: set[str] = field(default_factory=set)  # told ``tool.started``
    asked: list[ToolCall] = field(default_factory=list)  # of the client (its own tools)
    executions: list[Execute] = field(default_factory=list)  # to run, in call order
    opened: list[PendingConfirmation] = field(default_factory=list)  # by refusals
    outcomes: dict[str, CallOutcome] = field(default_factory=dict)
    # Background calls' acknowledgements: the batch's answer for them.
    acknowledged: dict[str, ToolResult] = field(default_factory=dict)
    # Executions run here (not in the background): each result reaches the model once, when
    # the ledger says so (another node, or an earlier delivery, may have given it already).
    gated: tuple[str, ...] = ()

    def route(self, call: ToolCall, *, answered: bool, client_tool: bool) -> Route:
        """``answered``: the call id was run or answered already, or waits for the client's
        answer; ``client_tool``: the client declared the tool. A duplicate is skipped."""
        if answered:
            self.skipped.add(call.call_id)
            return "duplicate"
        return "client" if client_tool else "policy"

    def to_deliver(self) -> list[str]:
        """The calls whose delivery the ledger decides. A refusal of a reused id is not the
        earlier call's result: it goes whatever the ledger says of that id."""
        return [
            call_id
            for call_id in self.gated
            if call_id not in self.outcomes or not self.outcomes[call_id].reused_id
        ]


def spent_budget(refusal: Refuse) -> Literal["budget", "rounds"] | None:
    """The budget a refusal reports as spent (a metric counts them), if any."""
    if refusal.reason == "budget":
        return "budget"
    if refusal.reason == "rounds":
        return "rounds"
    return None


def refusal_audit(refusal: Refuse) -> AuditDecision:
    """What the audit records of a refusal: a confirmation it opened is pending, not blocked."""
    return AuditDecision.CONFIRMATION_PENDING if refusal.opened else AuditDecision.BLOCKED


def audit_decision(execution: Execute) -> AuditDecision:
    return AuditDecision.EXECUTED if execution.confirmation is None else AuditDecision.CONFIRMED


def internal_refusal(call: ToolCall) -> Refuse:
    """The decision for a call whose decision failed."""
    return Refuse(call, ToolErrorType.INTERNAL, GATEWAY_FAILED, "internal")


def answered_elsewhere(execution: Execute) -> Refuse:
    """A spoken yes for a confirmation another node closed first (approved, rejected, expired)."""
    assert execution.confirmation is not None
    confirmation_id = execution.confirmation.confirmation_id
    return Refuse(
        execution.call,
        ToolErrorType.VALIDATION,
        f"confirmation_not_found: '{confirmation_id}' was answered already",
        "confirmation_not_found",
        execution.args,
    )


def confirmation_key_ttl_s(expires_at: datetime, now: datetime) -> float:
    """A confirmation's key in the store: the owner closes it at expiry (the book decides);
    the key only outlives that."""
    return (expires_at - now).total_seconds() + CONFIRMATION_KEY_MARGIN_S


def reuses_id(entry: LedgerEntry | None, call: ToolCall) -> bool:
    """The ledger knows the call's id for a call of another tool (an upstream reusing ids)."""
    return entry is not None and bool(entry.tool_id) and entry.tool_id != call.tool_id


# -- running -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InBackground:
    """An execution that goes on beside the session; the model gets ``acknowledgement`` now."""

    execution: Execute
    acknowledgement: ToolResult
    # Started before (a duplicate delivery, or on another node): followed, never run again.
    entry: LedgerEntry | None


@dataclass(frozen=True, slots=True)
class ExecutionPlan:
    background: tuple[InBackground, ...]
    waited: tuple[Execute, ...]  # the batch waits for their outcomes, in call order
    fresh: tuple[Execute, ...]  # of those, the ones nobody ran yet: run here, now
    gated: tuple[str, ...]  # see ``BatchBook.gated``


def acknowledgement(call: ToolCall, registry_version: str) -> ToolResult:
    """The batch's answer for a call that goes on in the background."""
    meta = {
        "toolId": call.tool_id,
        "callId": call.call_id,
        "durationMs": 0,
        "registryVersion": registry_version,
    }
    started = ToolResponse.success({"status": "running", "message": ACKNOWLEDGEMENT})
    return ToolResult(call.call_id, call.tool_id, started.to_envelope(meta), acknowledgement=True)


def plan_executions(
    executions: Sequence[Execute], known: Mapping[str, LedgerEntry | None], registry: Registry
) -> ExecutionPlan:
    """``known``: what the ledger holds of these calls (started before, anywhere). A call under
    another tool's id is never acknowledged: it is waited for, and refused."""
    in_background = {
        e.call.call_id
        for e in executions
        if (spec := registry.get(e.call.tool_id)) is not None and spec.background
    }
    background: list[InBackground] = []
    waited: list[Execute] = []
    for execution in executions:
        call = execution.call
        entry = known.get(call.call_id)
        if call.call_id not in in_background or reuses_id(entry, call):
            waited.append(execution)
        else:
            ack = acknowledgement(call, registry.version)
            background.append(InBackground(execution, ack, entry))
    return ExecutionPlan(
        background=tuple(background),
        waited=tuple(waited),
        fresh=tuple(e for e in waited if known.get(e.call.call_id) is None),
        gated=tuple(e.call.call_id for e in executions if e.call.call_id not in in_background),
    )


@dataclass(frozen=True, slots=True)
class AfterOutcome:
    finished: ToolFinished  # to the client, always (a cancelled call's spinner stops too)
    intents: tuple[Intent, ...]  # to apply
    resolves: PendingConfirmation | None  # approved: ``confirmation.resolved``


def after_outcome(
    outcome: CallOutcome, confirmation: PendingConfirmation | None = None
) -> AfterOutcome:
    """What follows a waited call's outcome. One the provider cancelled only closes for the
    client: no intents, no resolution (and no result for the model: ``model_result``)."""
    finished = tool_finished_event(outcome)
    if outcome.cancelled:
        return AfterOutcome(finished, (), None)
    return AfterOutcome(finished, outcome.response.intents if outcome.ok else (), confirmation)


# -- answering ---------------------------------------------------------------------------------


def model_result(outcome: CallOutcome) -> ToolResult | None:
    """A call's result for the model; None for a call the provider cancelled."""
    if outcome.cancelled:
        return None
    return ToolResult(outcome.call.call_id, outcome.call.tool_id, outcome.envelope)


def results_for_model(book: BatchBook, delivered: Collection[str]) -> list[ToolResult]:
    """The batch's answer, in call order: each background call's acknowledgement, and each
    outcome the provider did not cancel; of a gated call, only when the ledger let it go
    (``delivered``). A duplicate delivery gets nothing (it was answered once)."""
    gated = set(book.to_deliver())
    results: list[ToolResult] = []
    for call in book.calls:
        call_id = call.call_id
        acknowledged = book.acknowledged.get(call_id)
        if acknowledged is not None:
            results.append(acknowledged)
            continue
        outcome = book.outcomes.get(call_id)
        if outcome is None or outcome.cancelled:
            continue
        if call_id in delivered or call_id not in gated:
            results.append(ToolResult(call_id, call.tool_id, outcome.envelope))
    return results


@dataclass(frozen=True, slots=True)
class Answer:
    """Its outcome is known: its result goes to the model as it is."""

    result: ToolResult


@dataclass(frozen=True, slots=True)
class Unreported:
    """Not yet reported: refused INTERNAL (audited). A call asked of the client is withdrawn
    (the client has no ``tool.*`` events for it); any other gets ``tool.finished``, and its
    ``tool.started`` first when ``unstarted``."""

    call: ToolCall
    asked: bool
    unstarted: bool


def rest_of_batch(book: BatchBook) -> list[Answer | Unreported]:
    """A batch failed half-way: what each call still gets, in call order. Nothing for a
    duplicate delivery, nor for a call the provider cancelled."""
    asked = {call.call_id for call in book.asked}
    rest: list[Answer | Unreported] = []
    for call in book.calls:
        call_id = call.call_id
        if call_id in book.skipped:
            continue
        outcome = book.outcomes.get(call_id)
        if outcome is None:
            rest.append(Unreported(call, call_id in asked, call_id not in book.started))
        elif (result := model_result(outcome)) is not None:
            rest.append(Answer(result))
    return rest


def gateway_failure(call: ToolCall) -> ToolResult:
    """The model's answer for a call that could not even be refused (the refusal failed)."""
    failure = ToolResponse.failure(ToolErrorType.INTERNAL, GATEWAY_FAILED)
    return ToolResult(call.call_id, call.tool_id, failure.to_envelope({"callId": call.call_id}))


# -- response ends -----------------------------------------------------------------------------

Batch = TypeVar("Batch", bound=Hashable)
Sender = TypeVar("Sender")


class ResponseEnds(Generic[Batch, Sender]):
    """Which responses have a tool batch running, and each one's end (``response.done``) held
    back until its batches have told the client all they will (the client hears of the calls
    first). ``Batch`` names a running batch; ``Sender`` sends a held end (kept, never called
    here)."""

    def __init__(self) -> None:
        self._running: dict[str, set[Batch]] = {}  # a chat response runs one per round
        self._held: dict[str, tuple[ResponseDone, Sender]] = {}

    def started(self, response_id: str, batch: Batch) -> None:
        self._running.setdefault(response_id, set()).add(batch)

    def holding(self, response_id: str) -> bool:
        """Its end is held for a batch still running (nothing of it streams any more)."""
        return response_id in self._held

    def hold(self, done: ResponseDone, send: Sender) -> bool:
        """Keep ``done`` back while a batch of its response runs; False when none does."""
        if done.response_id not in self._running:
            return False
        self._held[done.response_id] = (done, send)
        return True

    def reported(self, response_id: str, batch: Batch) -> tuple[ResponseDone, Sender] | None:
        """``batch`` told the client all it will (said twice: the second is nothing). The held
        end to send now: once no other batch of the response runs."""
        running = self._running.get(response_id)
        if running is None or batch not in running:
            return None
        running.discard(batch)
        if running:
            return None
        del self._running[response_id]
        return self._held.pop(response_id, None)

    def cancelled_batches(self) -> list[Batch]:
        """The batches a cancelled response's held end waits for: the next response may not
        start before that end (a response that completed may overlap the next)."""
        return [
            batch
            for response_id, (done, _) in self._held.items()
            if done.status == "cancelled"
            for batch in self._running.get(response_id, ())
        ]
