"""Confirmations inside a session: opened, answered by the client, expired; each closes once.

The policy (which call needs one, what a spoken yes may do) is pure (``gateway.orchestrator``);
this module carries out the client's answers and the clock's expiries, in the order the client
protocol promises (``confirmation.requested`` before ``confirmation.resolved``), and gives the
model the outcome as a late result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from typing import Any

from gateway.orchestrator import (
    LookupResult,
    PendingConfirmation,
    Refuse,
    availability_refusal,
    count_execution,
    redacted,
)
from gateway.protocol import (
    ConfirmationOutcome,
    ConfirmationRequested,
    ConfirmationResolved,
    ErrorCode,
)
from gateway.session.tool_events import ToolWiring, tool_finished_event, tool_started_event
from gateway.store import Fenced, LedgerEntry
from gateway.toolrun import ArgumentError, AuditDecision, CallOutcome, ToolCall, measure_arguments
from tools._core import ToolErrorType
from transports.base import ToolResult

__all__ = ["Approvals"]

Tracker = Callable[[Coroutine[Any, Any, None]], None]
FromLedger = Callable[[ToolCall, LedgerEntry], Awaitable[CallOutcome]]


def _answered_elsewhere(confirmation_id: str) -> tuple[ErrorCode, str]:
    return ErrorCode.CONFIRMATION_NOT_FOUND, f"confirmation {confirmation_id} was answered already"


class Approvals:
    def __init__(self, wiring: ToolWiring, track: Tracker, from_ledger: FromLedger) -> None:
        self._w = wiring
        self._track = track
        self._from_ledger = from_ledger

    async def respond(
        self, confirmation_id: str, approve: bool, parameters: dict[str, Any] | None
    ) -> tuple[ErrorCode, str] | None:
        """A client's answer; returns the error to send the client, or None when handled."""
        w = self._w
        book = w.conversation.book
        now = w.clock.now()
        await self.expire_due(now)
        found = book.lookup(confirmation_id, now)
        if found.result is LookupResult.NOT_FOUND:
            return ErrorCode.CONFIRMATION_NOT_FOUND, f"no open confirmation {confirmation_id}"
        if found.result is LookupResult.EXPIRED:
            if found.pending is not None:
                await self._expire(found.pending)
            return ErrorCode.CONFIRMATION_EXPIRED, f"confirmation {confirmation_id} expired"
        pending = found.pending
        assert pending is not None
        if not approve:
            book.take(confirmation_id, now)
            taken = await self._taken(confirmation_id)
            if not taken:
                return None if taken is None else _answered_elsewhere(confirmation_id)
            await self._reject(pending)
            return None
        # Asked again now: roles may have dropped (a resume with another token), the mode or
        # the session's tools may have changed since the model made the call.
        original = ToolCall(pending.call_id, pending.tool_id, pending.args)
        refusal = availability_refusal(original, w.host.call_policy())
        if refusal is not None:
            return await self._refuse_approval(pending, refusal)
        spec = w.registry.get(pending.tool_id)
        args = pending.args
        if parameters is not None and spec is not None:
            try:
                measure_arguments(parameters)
            except ArgumentError as exc:
                return ErrorCode.INVALID_EVENT, f"parameters: {exc}"
            problem = spec.validator.problem(parameters)
            if problem is not None:
                return ErrorCode.INVALID_EVENT, problem
            args = parameters
        book.take(confirmation_id, now)
        taken = await self._taken(confirmation_id)
        if not taken:
            return None if taken is None else _answered_elsewhere(confirmation_id)
        call = ToolCall(pending.call_id, pending.tool_id, args)
        if spec is not None:
            # An approval is explicit, so it is never refused here, but it spends the budget.
            count_execution(spec, w.conversation.turn)
        w.runner.forget(pending.call_id)
        w.host.emit(tool_started_event(w.registry, call, args))
        # The tool may run for seconds: the client's reader goes on (its later events are not
        # held up); the result follows as tool.finished and confirmation.resolved.
        self._track(self._run_approved(pending, call))
        return None

    async def _reject(self, pending: PendingConfirmation) -> None:
        w = self._w
        w.metrics.confirmations.labels("rejected").inc()
        refused = w.runner.refuse(
            ToolCall(pending.call_id, pending.tool_id, pending.args),
            w.host.caller(),
            ToolErrorType.FORBIDDEN,
            f"the user rejected confirmation {pending.confirmation_id}; nothing was done",
            decision=AuditDecision.REJECTED,
            reason="rejected",
            arguments=pending.args,
        )
        self.resolved(pending, ConfirmationOutcome.REJECTED, None)
        await w.transport.send_late_result(
            ToolResult(pending.call_id, pending.tool_id, refused.envelope)
        )

    async def _taken(self, confirmation_id: str) -> bool | None:
        """Closed in the store now (True), by another answer first (False), or None: another
        node took the session over meanwhile, and the answer is its to take (the session is
        let go here)."""
        try:
            return await self._w.ownership.take_confirmation(confirmation_id)
        except Fenced:
            self._w.host.lost()
            return None

    async def _refuse_approval(
        self, pending: PendingConfirmation, refusal: Refuse
    ) -> tuple[ErrorCode, str] | None:
        """An approval of a call the user may no longer make: closed, nothing runs; the model
        and the client are told why."""
        w = self._w
        w.conversation.book.take(pending.confirmation_id, w.clock.now())
        taken = await self._taken(pending.confirmation_id)
        if not taken:
            return None if taken is None else _answered_elsewhere(pending.confirmation_id)
        message = (
            f"{refusal.message}; checked again when confirmation {pending.confirmation_id} "
            "was approved, so nothing was done"
        )
        refused = w.runner.refuse(
            ToolCall(pending.call_id, pending.tool_id, pending.args),
            w.host.caller(),
            refusal.error_type,
            message,
            decision=AuditDecision.BLOCKED,
            reason=f"approval_{refusal.reason}",
            arguments=pending.args,
        )
        w.metrics.confirmations.labels("rejected").inc()
        self.resolved(pending, ConfirmationOutcome.REJECTED, None)
        await w.transport.send_late_result(
            ToolResult(pending.call_id, pending.tool_id, refused.envelope)
        )
        return ErrorCode.FORBIDDEN, message

    async def _run_approved(self, pending: PendingConfirmation, call: ToolCall) -> None:
        """Run once across nodes (the ledger), give the result to the model once."""
        w = self._w
        try:
            known = await w.ownership.start_calls([(call.call_id, call.tool_id)])
            entry = known.get(call.call_id)
            if entry is None:
                outcome = await w.runner.run(
                    call, w.host.caller(), decision=AuditDecision.CONFIRMED
                )
                await w.ownership.finish_calls([(call.call_id, outcome.envelope)])
            else:
                outcome = await self._from_ledger(call, entry)
            w.host.emit(tool_finished_event(outcome))
            if outcome.ok and outcome.response.intents:
                w.host.apply_intents(outcome.response.intents)
            self.resolved(pending, ConfirmationOutcome.APPROVED, outcome)
            async with w.ownership.delivering([call.call_id]) as allowed:
                if allowed:
                    await w.transport.send_late_result(
                        ToolResult(pending.call_id, pending.tool_id, outcome.envelope)
                    )
        except Fenced:
            w.host.lost()

    async def expire_due(self, now: datetime | None = None) -> None:
        for pending in self._w.conversation.book.expire_due(now or self._w.clock.now()):
            await self._expire(pending)

    async def _expire(self, pending: PendingConfirmation) -> None:
        """Closed by expiry: audited, the client gets ``confirmation.resolved``, the model told
        (unless another node closed it first, or owns the session now)."""
        w = self._w
        try:
            if not await w.ownership.take_confirmation(pending.confirmation_id):
                return
        except Fenced:
            w.host.lost()
            return
        w.metrics.confirmations.labels("expired").inc()
        w.runner.refuse(
            ToolCall(pending.call_id, pending.tool_id, pending.args),
            w.host.caller(),
            ToolErrorType.FORBIDDEN,
            f"confirmation {pending.confirmation_id} expired; nothing was done",
            decision=AuditDecision.EXPIRED,
            reason="expired",
            arguments=pending.args,
        )
        self.resolved(pending, ConfirmationOutcome.EXPIRED, None)
        await w.transport.add_context(
            f"Confirmation {pending.confirmation_id} for {pending.tool_id} expired; "
            "nothing was done."
        )

    # -- events to the client ----------------------------------------------------------------

    def requested(self, pending: PendingConfirmation) -> None:
        if self._w.trace is not None:
            self._w.trace.confirmation_asked(pending.confirmation_id, pending.tool_id)
        self._w.host.emit(
            ConfirmationRequested(
                confirmation_id=pending.confirmation_id,
                call_id=pending.call_id,
                tool=pending.tool_id,
                prompt=pending.prompt,
                parameters=redacted(self._w.registry.get(pending.tool_id), pending.args),
                sensitivity=pending.sensitivity,
                expires_at=pending.expires_at,
            )
        )

    def resolved(
        self,
        pending: PendingConfirmation,
        decision: ConfirmationOutcome,
        outcome: CallOutcome | None,
    ) -> None:
        if decision is ConfirmationOutcome.APPROVED:
            self._w.metrics.confirmations.labels("approved").inc()
        if self._w.trace is not None:
            self._w.trace.confirmation_resolved(pending.confirmation_id, decision.value)
        self._w.host.emit(
            ConfirmationResolved(
                confirmation_id=pending.confirmation_id,
                decision=decision,
                result=None if outcome is None else tool_finished_event(outcome),
            )
        )
