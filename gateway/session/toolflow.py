"""Tool calls inside a session: decide, run, report to the client, answer the model.

The policy is pure (``gateway.orchestrator``); this module only carries its decisions out, in
the order the client protocol promises: ``tool.started`` before ``tool.finished``,
``confirmation.requested`` before ``confirmation.resolved``, and exactly one result per call id
for the model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from gateway.orchestrator import (
    CallPolicy,
    Execute,
    LookupResult,
    PendingConfirmation,
    Refuse,
    availability_refusal,
    count_execution,
    decide_call,
    redacted,
)
from gateway.protocol import (
    ConfirmationOutcome,
    ConfirmationRequested,
    ConfirmationResolved,
    ErrorCode,
    ToolErrorInfo,
    ToolFinished,
    ToolStarted,
)
from gateway.toolrun import (
    ArgumentError,
    AuditDecision,
    CallOutcome,
    ToolCall,
    measure_arguments,
)
from tools._core import ToolErrorType, ToolResponse
from transports.base import ToolResult
from transports.events import ToolCallsRequested

if TYPE_CHECKING:
    from gateway.session.session import Session

__all__ = ["ToolFlow", "tool_finished_event"]

_log = structlog.get_logger("session.tools")


def tool_finished_event(outcome: CallOutcome) -> ToolFinished:
    fields = outcome.tool_finished_fields()
    error = fields.get("error")
    return ToolFinished(
        call_id=fields["call_id"],
        name=fields["name"],
        ok=fields["ok"],
        duration_ms=round(fields["duration_ms"]),
        intents=tuple(fields["intents"]),
        data=fields.get("data"),
        error=None
        if error is None
        else ToolErrorInfo(type=error["type"], message=error["message"]),
    )


_GATEWAY_FAILED = "The gateway failed while handling this call; retry later."


@dataclass(slots=True)
class _BatchProgress:
    """How far a batch got: what a failure half-way must still report."""

    started: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)
    outcomes: dict[str, CallOutcome] = field(default_factory=dict)


class ToolFlow:
    def __init__(self, session: Session, new_id: Callable[[], str] | None = None) -> None:
        self._s = session
        self._new_id = new_id or (lambda: f"conf_{uuid.uuid4().hex[:16]}")

    async def handle_batch(self, event: ToolCallsRequested) -> None:
        """Decide, run and answer one batch. Whatever fails, every call gets its
        ``tool.started``, ``tool.finished``, audit line and one result for the model."""
        calls = [
            ToolCall(c.call_id or f"call_{uuid.uuid4().hex}", c.name, c.arguments)
            for c in event.calls
        ]
        progress = _BatchProgress()
        try:
            await self._handle(calls, progress)
        except Exception:
            _log.exception("tool_batch_failed")
            await self._fail_rest(calls, progress)

    async def _handle(self, calls: list[ToolCall], progress: _BatchProgress) -> None:
        s = self._s
        # Expiry always goes through one path (client, audit and model told) before decisions,
        # at the same instant the decisions use.
        now = s.clock.now()
        await self.expire_due(now)
        s.turn.begin_round()
        policy = s.call_policy()
        executions: list[Execute] = []
        outcomes = progress.outcomes
        opened: list[PendingConfirmation] = []
        for call in calls:
            if s.runner.seen(call.call_id):
                progress.skipped.add(call.call_id)
                continue  # duplicate delivery: it was (or is being) answered once already
            decision = self._decide(call, policy, now)
            if isinstance(decision, Refuse):
                if decision.reason in ("budget", "rounds"):
                    s.metrics.budget_refusals.labels(decision.reason).inc()
                outcome = s.runner.refuse(
                    call,
                    s.caller(),
                    decision.error_type,
                    decision.message,
                    decision=(
                        AuditDecision.CONFIRMATION_PENDING
                        if decision.opened
                        else AuditDecision.BLOCKED
                    ),
                    reason=decision.reason,
                    arguments=decision.args,
                    **decision.extra,
                )
                self._started(call, decision.args, progress)
                outcomes[call.call_id] = outcome
                s.emit(tool_finished_event(outcome))
                if decision.opened is not None:
                    opened.append(decision.opened)
            else:
                self._started(call, decision.args, progress)
                executions.append(decision)
        if executions:
            ran = await s.runner.run_batch(
                [e.call for e in executions],
                s.caller(),
                decisions=[
                    AuditDecision.EXECUTED if e.confirmation is None else AuditDecision.CONFIRMED
                    for e in executions
                ],
            )
            for execution, outcome in zip(executions, ran, strict=True):
                outcomes[execution.call.call_id] = outcome
                # A call the provider cancelled still closes for the client (its spinner
                # stops); the provider gets no result for it.
                s.emit(tool_finished_event(outcome))
                if outcome.cancelled:
                    continue
                self._apply_intents(outcome)
                if execution.confirmation is not None:
                    self._resolved(execution.confirmation, ConfirmationOutcome.APPROVED, outcome)
        for pending in opened:
            self._requested(pending)
        results = [
            ToolResult(call.call_id, call.tool_id, outcomes[call.call_id].envelope)
            for call in calls
            if call.call_id in outcomes and not outcomes[call.call_id].cancelled
        ]
        if results:
            await s.transport.send_tool_results(results)

    def _decide(self, call: ToolCall, policy: CallPolicy, now: datetime) -> Execute | Refuse:
        s = self._s
        try:
            return decide_call(call, policy, s.turn, s.book, now=now, new_id=self._new_id)
        except Exception:
            _log.exception("tool_decision_failed", call_id=call.call_id)
            return Refuse(call, ToolErrorType.INTERNAL, _GATEWAY_FAILED, "internal")

    async def _fail_rest(self, calls: list[ToolCall], progress: _BatchProgress) -> None:
        """The batch failed half-way: each call not yet reported is refused INTERNAL (audited,
        told to the client), and the model gets a result for every call, the real one where the
        call ran (a failed send is tried once more; transports drop an answer for a call
        already answered)."""
        s = self._s
        results = []
        for call in calls:
            if call.call_id in progress.skipped:
                continue
            outcome = progress.outcomes.get(call.call_id)
            if outcome is None:
                try:
                    outcome = s.runner.refuse(
                        call, s.caller(), ToolErrorType.INTERNAL, _GATEWAY_FAILED, reason="internal"
                    )
                    if call.call_id not in progress.started:
                        self._started(call, None, progress)
                    s.emit(tool_finished_event(outcome))
                except Exception:
                    _log.exception("tool_call_report_failed", call_id=call.call_id)
                    failure = ToolResponse.failure(ToolErrorType.INTERNAL, _GATEWAY_FAILED)
                    envelope = failure.to_envelope({"callId": call.call_id})
                    results.append(ToolResult(call.call_id, call.tool_id, envelope))
                    continue
            if not outcome.cancelled:
                results.append(ToolResult(call.call_id, call.tool_id, outcome.envelope))
        if results:
            try:
                await s.transport.send_tool_results(results)
            except Exception:
                _log.exception("tool_batch_answer_failed")

    async def respond(
        self,
        confirmation_id: str,
        approve: bool,
        parameters: dict[str, Any] | None,
    ) -> tuple[ErrorCode, str] | None:
        """A client's answer; returns the error to send the client, or None when handled."""
        s = self._s
        now = s.clock.now()
        await self.expire_due(now)
        found = s.book.lookup(confirmation_id, now)
        if found.result is LookupResult.NOT_FOUND:
            return ErrorCode.CONFIRMATION_NOT_FOUND, f"no open confirmation {confirmation_id}"
        if found.result is LookupResult.EXPIRED:
            if found.pending is not None:
                await self._expire(found.pending)
            return ErrorCode.CONFIRMATION_EXPIRED, f"confirmation {confirmation_id} expired"
        pending = found.pending
        assert pending is not None
        spec = s.registry.get(pending.tool_id)
        args = pending.args
        if approve:
            # Asked again now: roles may have dropped (a resume with another token), the mode or
            # the session's tools may have changed since the model made the call.
            call = ToolCall(pending.call_id, pending.tool_id, pending.args)
            refusal = availability_refusal(call, s.call_policy())
            if refusal is not None:
                return await self._refuse_approval(pending, refusal)
        if approve and parameters is not None and spec is not None:
            try:
                measure_arguments(parameters)
            except ArgumentError as exc:
                return ErrorCode.INVALID_EVENT, f"parameters: {exc}"
            problem = spec.validator.problem(parameters)
            if problem is not None:
                return ErrorCode.INVALID_EVENT, problem
            args = parameters
        s.book.take(confirmation_id, now)
        if not approve:
            s.metrics.confirmations.labels("rejected").inc()
            refused = s.runner.refuse(
                ToolCall(pending.call_id, pending.tool_id, pending.args),
                s.caller(),
                ToolErrorType.FORBIDDEN,
                f"the user rejected confirmation {confirmation_id}; nothing was done",
                decision=AuditDecision.REJECTED,
                reason="rejected",
                arguments=pending.args,
            )
            self._resolved(pending, ConfirmationOutcome.REJECTED, None)
            await s.transport.send_late_result(
                ToolResult(pending.call_id, pending.tool_id, refused.envelope)
            )
            return None
        call = ToolCall(pending.call_id, pending.tool_id, args)
        if spec is not None:
            # An approval is explicit, so it is never refused here, but it spends the budget.
            count_execution(spec, s.turn)
        s.runner.forget(pending.call_id)
        self._started(call, args)
        # The tool may run for seconds: the client's reader goes on (its later events are not
        # held up); the result follows as tool.finished and confirmation.resolved.
        s.track(self._run_approved(pending, call))
        return None

    async def _refuse_approval(
        self, pending: PendingConfirmation, refusal: Refuse
    ) -> tuple[ErrorCode, str]:
        """An approval of a call the user may no longer make: closed, nothing runs; the model
        and the client are told why."""
        s = self._s
        s.book.take(pending.confirmation_id, s.clock.now())
        message = (
            f"{refusal.message}; checked again when confirmation {pending.confirmation_id} "
            "was approved, so nothing was done"
        )
        refused = s.runner.refuse(
            ToolCall(pending.call_id, pending.tool_id, pending.args),
            s.caller(),
            refusal.error_type,
            message,
            decision=AuditDecision.BLOCKED,
            reason=f"approval_{refusal.reason}",
            arguments=pending.args,
        )
        s.metrics.confirmations.labels("rejected").inc()
        self._resolved(pending, ConfirmationOutcome.REJECTED, None)
        await s.transport.send_late_result(
            ToolResult(pending.call_id, pending.tool_id, refused.envelope)
        )
        return ErrorCode.FORBIDDEN, message

    async def _run_approved(self, pending: PendingConfirmation, call: ToolCall) -> None:
        s = self._s
        outcome = await s.runner.run(call, s.caller(), decision=AuditDecision.CONFIRMED)
        s.emit(tool_finished_event(outcome))
        self._apply_intents(outcome)
        self._resolved(pending, ConfirmationOutcome.APPROVED, outcome)
        await s.transport.send_late_result(
            ToolResult(pending.call_id, pending.tool_id, outcome.envelope)
        )

    async def expire_due(self, now: datetime | None = None) -> None:
        for pending in self._s.book.expire_due(now or self._s.clock.now()):
            await self._expire(pending)

    # -- events to the client ----------------------------------------------------------------

    def _started(
        self, call: ToolCall, args: dict[str, Any] | None, progress: _BatchProgress | None = None
    ) -> None:
        if progress is not None:
            progress.started.add(call.call_id)
        shown = redacted(self._s.registry.get(call.tool_id), args)
        self._s.emit(ToolStarted(call_id=call.call_id, name=call.tool_id, arguments=shown))

    def _requested(self, pending: PendingConfirmation) -> None:
        self._s.emit(
            ConfirmationRequested(
                confirmation_id=pending.confirmation_id,
                call_id=pending.call_id,
                tool=pending.tool_id,
                prompt=pending.prompt,
                parameters=redacted(self._s.registry.get(pending.tool_id), pending.args),
                sensitivity=pending.sensitivity,
                expires_at=pending.expires_at,
            )
        )

    def _resolved(
        self,
        pending: PendingConfirmation,
        decision: ConfirmationOutcome,
        outcome: CallOutcome | None,
    ) -> None:
        if decision is ConfirmationOutcome.APPROVED:
            self._s.metrics.confirmations.labels("approved").inc()
        self._s.emit(
            ConfirmationResolved(
                confirmation_id=pending.confirmation_id,
                decision=decision,
                result=None if outcome is None else tool_finished_event(outcome),
            )
        )

    async def _expire(self, pending: PendingConfirmation) -> None:
        """Closed by expiry: audited, the client gets ``confirmation.resolved``, the model told."""
        s = self._s
        s.metrics.confirmations.labels("expired").inc()
        s.runner.refuse(
            ToolCall(pending.call_id, pending.tool_id, pending.args),
            s.caller(),
            ToolErrorType.FORBIDDEN,
            f"confirmation {pending.confirmation_id} expired; nothing was done",
            decision=AuditDecision.EXPIRED,
            reason="expired",
            arguments=pending.args,
        )
        self._resolved(pending, ConfirmationOutcome.EXPIRED, None)
        await s.transport.add_context(
            f"Confirmation {pending.confirmation_id} for {pending.tool_id} expired; "
            "nothing was done."
        )

    def _apply_intents(self, outcome: CallOutcome) -> None:
        if outcome.ok and outcome.response.intents:
            self._s.apply_intents(outcome.response.intents)

    def cancel(self, call_ids: Sequence[str]) -> None:
        for call_id in call_ids:
            if self._s.runner.cancel(call_id):
                _log.info("tool_call_cancelled", call_id=call_id)
