"""Tool calls inside a session: decide, run, report to the client, answer the model.

The policy is pure (``gateway.orchestrator``); this module only carries its decisions out, in
the order the client protocol promises: ``tool.started`` before ``tool.finished``, and exactly
one result per call id for the model, whatever fails. It also keeps the session's books on
batches: which responses have a batch still running (their ``response.done`` waits for it, so
the client hears of the calls first), and the tasks that run tool work beside the readers.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import structlog

from gateway.orchestrator import CallPolicy, Execute, PendingConfirmation, Refuse, decide_call
from gateway.protocol import ConfirmationOutcome
from gateway.session.approvals import Approvals
from gateway.session.background import BackgroundCalls, ModelTurns
from gateway.session.client_tool_calls import ClientToolCalls
from gateway.session.client_tools import ClientToolBook
from gateway.session.holding import HoldingCues, TonePlayer
from gateway.session.ledger_outcomes import outcome_from_ledger, reuses_id
from gateway.session.tool_events import ToolWiring, tool_finished_event, tool_started_event
from gateway.store import Fenced, LedgerEntry
from gateway.toolrun import AuditDecision, CallOutcome, ToolCall
from tools._core import ToolErrorType, ToolResponse
from transports.base import ToolResult
from transports.events import ResponseDone, ToolCallsRequested

__all__ = ["HELD_RESPONSE_WAIT_S", "ToolFlow"]

_log = structlog.get_logger("session.tools")

# A cancelled tool batch finishes within its calls' hard timeouts; past this the next response
# starts anyway (its order is then the provider's).
HELD_RESPONSE_WAIT_S = 6.0
_GATEWAY_FAILED = "The gateway failed while handling this call; retry later."
# How long a confirmation's key in the store outlives the confirmation.
CONFIRMATION_KEY_MARGIN_S = 300.0

Finish = Callable[[ResponseDone], Awaitable[None]]
# Called by a batch once it has told the client all it will before the client's own answers:
# the response's end, held for the batch, may go (a client answers after it, as on OpenAI).
Reported = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class _BatchProgress:
    """How far a batch got: what a failure half-way must still report."""

    started: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)
    asked: set[str] = field(default_factory=set)  # of the client (its own tools)
    outcomes: dict[str, CallOutcome] = field(default_factory=dict)


class SessionTurns(ModelTurns, TonePlayer, Protocol):
    """What the tool flow needs of the session's replies: when the model is idle (background
    results), and the reply a holding tone is played in."""


class ToolFlow:
    def __init__(
        self,
        wiring: ToolWiring,
        turns: SessionTurns,
        new_id: Callable[[], str] | None = None,
        client_tools: ClientToolBook | None = None,
    ) -> None:
        self._w = wiring
        self._new_id = new_id or (lambda: f"conf_{uuid.uuid4().hex[:16]}")
        self._tasks: set[asyncio.Task[None]] = set()
        # Running batches per response (a chat response runs one per round).
        self._batches: dict[str, set[asyncio.Task[None]]] = {}
        # Response ends held back until that response's batches have reported to the client.
        self._held: dict[str, tuple[ResponseDone, Finish]] = {}
        self.approvals = Approvals(wiring, self.track, self.result_from_ledger)
        self.background = BackgroundCalls(wiring, turns, self.track, self.result_from_ledger)
        self._holding = HoldingCues(wiring, turns, wiring.holding)
        self.client_calls = ClientToolCalls(wiring, client_tools or ClientToolBook())

    # -- the session's books ---------------------------------------------------------------------

    def track(self, work: Coroutine[Any, Any, None]) -> None:
        """Run tool work beside the readers; cancelled when the session ends (``stop``)."""
        task = asyncio.create_task(self._logged(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _logged(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception:
            _log.exception("tool_work_failed")

    def start_batch(self, event: ToolCallsRequested) -> None:
        task = asyncio.create_task(self._run_batch(event))
        self._batches.setdefault(event.response_id, set()).add(task)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def holding(self, response_id: str) -> bool:
        """Its end is held for a batch still running (nothing of it streams any more)."""
        return response_id in self._held

    def hold(self, done: ResponseDone, finish: Finish) -> bool:
        """Keep ``done`` back while a batch of its response runs; False when none does."""
        if done.response_id not in self._batches:
            return False
        self._held[done.response_id] = (done, finish)
        return True

    async def wait_for_cancelled(self) -> None:
        """A new response may not start before a cancelled one's ``response.done``: if that is
        held for its batch, still finishing the calls just cancelled, wait for it. (A response
        that completed normally may overlap the next, as providers allow.)"""
        running = [
            task
            for rid, (done, _) in self._held.items()
            if done.status == "cancelled"
            for task in self._batches.get(rid, ())
        ]
        if running:
            await asyncio.wait(running, timeout=HELD_RESPONSE_WAIT_S)

    async def _run_batch(self, event: ToolCallsRequested) -> None:
        try:
            await self.handle_batch(event, self._reported)  # answers every call, whatever fails
        finally:
            await self._reported(event.response_id)

    async def _reported(self, response_id: str) -> None:
        """The running batch told the client all it will: the response's end, if held, goes
        once no other batch of it runs (a later batch of the same response reports first)."""
        running = self._batches.get(response_id)
        task = asyncio.current_task()
        if running is None or task not in running:
            return  # said already
        running.discard(task)
        if not running:
            self._batches.pop(response_id, None)
            held = self._held.pop(response_id, None)
            if held is not None:
                done, finish = held
                await finish(done)

    def cancel(self, call_ids: Sequence[str]) -> None:
        for call_id in call_ids:
            if self._w.runner.cancel(call_id):
                _log.info("tool_call_cancelled", call_id=call_id)
        self.client_calls.cancel(call_ids)

    def stop(self) -> None:
        """The session ended: every call and every piece of tool work is cancelled."""
        self._w.runner.cancel_all()
        for task in list(self._tasks):
            if task is not asyncio.current_task():
                task.cancel()

    async def expire_due(self, now: datetime | None = None) -> None:
        await self.approvals.expire_due(now)
        self.client_calls.expire_due()

    def running(self) -> bool:
        return any(not task.done() for task in self._tasks)

    async def wait_running(self) -> None:
        """Until the tool work running now has finished (a handed-off session's calls), and
        the work it starts meanwhile (a batch under way starts its background calls)."""
        while running := [task for task in self._tasks if not task.done()]:
            await asyncio.wait(running)

    def adopt_open_calls(self) -> None:
        """The session came from another node: each call its ledger holds open reaches the
        model once (its result, or a failure when its node died while it ran), and the
        client gets its ``tool.finished``."""
        self.track(self._adopt())

    async def _adopt(self) -> None:
        w = self._w
        for entry in await w.ownership.open_calls():
            self.track(self._adopt_one(entry))

    async def _adopt_one(self, entry: LedgerEntry) -> None:
        w = self._w
        call = ToolCall(entry.call_id, entry.tool_id, None)
        try:
            outcome = await self.result_from_ledger(call, entry)
            w.host.emit(tool_finished_event(outcome))
            if outcome.ok and outcome.response.intents:
                w.host.apply_intents(outcome.response.intents)
            spec = w.registry.get(call.tool_id)
            if spec is not None and spec.background:
                await self.background.give(outcome, spec.delivery)
                return
            async with w.ownership.delivering([call.call_id]) as allowed:
                if allowed:
                    result = ToolResult(call.call_id, call.tool_id, outcome.envelope)
                    await w.transport.send_late_result(result)
        except Fenced:
            w.host.lost()

    # -- one batch -------------------------------------------------------------------------------

    async def handle_batch(
        self, event: ToolCallsRequested, reported: Reported | None = None
    ) -> None:
        """Decide, run and answer one batch. Whatever fails, every call gets its
        ``tool.started``, ``tool.finished`` (a call of the client's own tools: its
        ``client_tool.requested``), audit line and one result for the model; unless another
        node took the session over (``Fenced``): then nothing more is done here."""
        calls = [
            ToolCall(c.call_id or f"call_{uuid.uuid4().hex}", c.name, c.arguments)
            for c in event.calls
        ]
        progress = _BatchProgress()
        try:
            await self._handle(calls, progress, event.response_id, reported)
        except Fenced:
            _log.info("tool_batch_fenced", session_id=self._w.ownership.session_id)
            self._w.host.lost()
        except Exception:
            _log.exception("tool_batch_failed")
            await self._fail_rest(calls, progress)

    async def _handle(
        self,
        calls: list[ToolCall],
        progress: _BatchProgress,
        response_id: str,
        reported: Reported | None,
    ) -> None:
        w = self._w
        # Expiry always goes through one path (client, audit and model told) before decisions,
        # at the same instant the decisions use.
        now = w.clock.now()
        await self.approvals.expire_due(now)
        w.conversation.turn.begin_round()
        policy = w.host.call_policy()
        executions: list[Execute] = []
        outcomes = progress.outcomes
        opened: list[PendingConfirmation] = []
        asked: list[ToolCall] = []
        for call in calls:
            if w.runner.seen(call) or self.client_calls.is_waiting(call.call_id):
                progress.skipped.add(call.call_id)
                continue  # duplicate delivery: it was (or is being) answered once already
            if self.client_calls.declares(call.tool_id):
                # The client's own: no policy of ours applies; the client runs it.
                refused = self.client_calls.ask(call, response_id)
                if refused is None:
                    asked.append(call)
                    progress.asked.add(call.call_id)
                else:
                    outcomes[call.call_id] = refused
                continue
            decision = await self._confirmed_once(self._decide(call, policy, now))
            self._started(call, decision.args, progress)
            if isinstance(decision, Execute):
                executions.append(decision)
                continue
            if decision.reason in ("budget", "rounds"):
                w.metrics.budget_refusals.labels(decision.reason).inc()
            outcome = w.runner.refuse(
                call,
                w.host.caller(),
                decision.error_type,
                decision.message,
                decision=(
                    AuditDecision.CONFIRMATION_PENDING if decision.opened else AuditDecision.BLOCKED
                ),
                reason=decision.reason,
                arguments=decision.args,
                **decision.extra,
            )
            outcomes[call.call_id] = outcome
            w.host.emit(tool_finished_event(outcome))
            if decision.opened is not None:
                opened.append(decision.opened)
        for pending in opened:
            # The owner closes it at expiry (the book decides); the key only outlives that.
            ttl_s = (pending.expires_at - now).total_seconds() + CONFIRMATION_KEY_MARGIN_S
            await w.ownership.open_confirmation(pending.confirmation_id, ttl_s)
        in_background = {
            e.call.call_id for e in executions if self.background.is_background(e.call.tool_id)
        }
        executed = [e.call.call_id for e in executions if e.call.call_id not in in_background]
        acknowledged = (
            await self._execute(executions, outcomes, in_background, policy) if executions else {}
        )
        for pending in opened:
            self.approvals.requested(pending)
        if asked:
            if reported is not None:
                await reported(response_id)
            outcomes.update(await self.client_calls.answers(asked))
        executed = [c for c in executed if c not in outcomes or not outcomes[c].reused_id]
        # each result reaches the model once: those the ledger marks delivered here are given
        # here, even when the session is handed off meanwhile (its upstream waits for them)
        async with w.ownership.delivering(executed) as allowed:
            if w.ownership.handed_off and not allowed:
                return  # the new owner delivers what ran here (it is in the ledger)
            results = [
                acknowledged.get(call.call_id)
                or ToolResult(call.call_id, call.tool_id, outcomes[call.call_id].envelope)
                for call in calls
                if call.call_id in acknowledged
                or (
                    call.call_id in outcomes
                    and not outcomes[call.call_id].cancelled
                    and (call.call_id in allowed or call.call_id not in executed)
                )
            ]
            if results:
                await w.transport.send_tool_results(results)

    async def _confirmed_once(self, decision: Execute | Refuse) -> Execute | Refuse:
        """A spoken yes runs the call only if this node closes the confirmation in the store
        (another node may have closed it: approved, rejected or expired there)."""
        if not isinstance(decision, Execute) or decision.confirmation is None:
            return decision
        confirmation_id = decision.confirmation.confirmation_id
        if await self._w.ownership.take_confirmation(confirmation_id):
            return decision
        return Refuse(
            decision.call,
            ToolErrorType.VALIDATION,
            f"confirmation_not_found: '{confirmation_id}' was answered already",
            "confirmation_not_found",
            decision.args,
        )

    async def _execute(
        self,
        executions: list[Execute],
        outcomes: dict[str, CallOutcome],
        in_background: set[str],
        policy: CallPolicy,
    ) -> dict[str, ToolResult]:
        """Run what the ledger says has not run (anywhere); take the results of the others from
        it; record every result in it. Background calls go on beside the session: their
        acknowledgements are returned, by call id."""
        w = self._w
        known = await w.ownership.start_calls(
            [(e.call.call_id, e.call.tool_id) for e in executions]
        )
        acknowledged: dict[str, ToolResult] = {}
        waited: list[Execute] = []
        for execution in executions:
            call = execution.call
            entry = known.get(call.call_id)
            # A call under another tool's id is refused at once, never acknowledged.
            if call.call_id not in in_background or reuses_id(entry, call):
                waited.append(execution)
                continue
            acknowledged[call.call_id] = self.background.acknowledge(call)
            if entry is not None:
                self.background.follow(call, entry)
            else:
                confirmed = execution.confirmation is not None
                self.background.run(
                    call, AuditDecision.CONFIRMED if confirmed else AuditDecision.EXECUTED
                )
        executions = waited
        fresh = [e for e in executions if known.get(e.call.call_id) is None]
        holding = self._holding.watch(
            [e.call for e in fresh],
            voice=policy.mode == "voice",
            soft_limit_ms=policy.budget.soft_limit_ms,
            track=self.track,
        )
        try:
            ran = await w.runner.run_batch(
                [e.call for e in fresh],
                w.host.caller(),
                decisions=[
                    AuditDecision.EXECUTED if e.confirmation is None else AuditDecision.CONFIRMED
                    for e in fresh
                ],
            )
        finally:
            if holding is not None:
                holding.cancel()
        await w.ownership.finish_calls((o.call.call_id, o.envelope) for o in ran)
        by_id = {o.call.call_id: o for o in ran}
        for execution in executions:
            call_id = execution.call.call_id
            entry = known.get(call_id)
            outcome = by_id.get(call_id)
            if outcome is None and entry is not None:
                outcome = await self.result_from_ledger(execution.call, entry)
            assert outcome is not None
            outcomes[call_id] = outcome
            # A call the provider cancelled still closes for the client (its spinner stops);
            # the provider gets no result for it.
            w.host.emit(tool_finished_event(outcome))
            if outcome.cancelled:
                continue
            if outcome.ok and outcome.response.intents:
                w.host.apply_intents(outcome.response.intents)
            if execution.confirmation is not None:
                approved = ConfirmationOutcome.APPROVED
                self.approvals.resolved(execution.confirmation, approved, outcome)
        return acknowledged

    async def result_from_ledger(self, call: ToolCall, entry: LedgerEntry) -> CallOutcome:
        """A call started before (``ledger_outcomes``): its result, its node's failure, or
        the refusal of an id reused for another tool."""
        return await outcome_from_ledger(self._w, call, entry)

    def _decide(self, call: ToolCall, policy: CallPolicy, now: datetime) -> Execute | Refuse:
        conversation = self._w.conversation
        try:
            return decide_call(
                call, policy, conversation.turn, conversation.book, now=now, new_id=self._new_id
            )
        except Exception:
            _log.exception("tool_decision_failed", call_id=call.call_id)
            return Refuse(call, ToolErrorType.INTERNAL, _GATEWAY_FAILED, "internal")

    def _started(
        self, call: ToolCall, args: dict[str, Any] | None, progress: _BatchProgress
    ) -> None:
        progress.started.add(call.call_id)
        self._w.host.emit(tool_started_event(self._w.registry, call, args))

    async def _fail_rest(self, calls: list[ToolCall], progress: _BatchProgress) -> None:
        """The batch failed half-way: each call not yet reported is refused INTERNAL (audited,
        told to the client), and the model gets a result for every call, the real one where the
        call ran (a failed send is tried once more; transports drop an answer for a call
        already answered)."""
        w = self._w
        results = []
        for call in calls:
            if call.call_id in progress.skipped:
                continue
            outcome = progress.outcomes.get(call.call_id)
            if outcome is None:
                asked = call.call_id in progress.asked
                try:
                    if asked:  # the client is told no answer is wanted (it has no tool.* events)
                        self.client_calls.cancel([call.call_id])
                    outcome = w.runner.refuse(
                        call,
                        w.host.caller(),
                        ToolErrorType.INTERNAL,
                        _GATEWAY_FAILED,
                        reason="internal",
                    )
                    if not asked:
                        if call.call_id not in progress.started:
                            self._started(call, None, progress)
                        w.host.emit(tool_finished_event(outcome))
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
                await w.transport.send_tool_results(results)
            except Exception:
                _log.exception("tool_batch_answer_failed")
