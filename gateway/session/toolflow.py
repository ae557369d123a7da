"""Tool calls inside a session: decide, run, report to the client, answer the model.

The policy is pure (``gateway.orchestrator``), and so are the batch's books and answers
(``tool_batch``: which calls run, wait or were answered, what goes back to the model in which
order, what a batch that failed half-way still owes); this module is the async shell that
carries them out, in the order the client protocol promises: ``tool.started`` before
``tool.finished``, and exactly one result per call id for the model, whatever fails. It runs
the tasks of tool work beside the readers, and holds a response's ``response.done`` while a
batch of it runs (``ResponseEnds``), so the client hears of the calls first.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, Protocol

import structlog

from gateway.orchestrator import CallPolicy, Execute, Refuse, decide_call
from gateway.protocol import ConfirmationOutcome
from gateway.session.approvals import Approvals
from gateway.session.background import BackgroundCalls, ModelTurns
from gateway.session.client_tool_calls import ClientToolCalls
from gateway.session.client_tools import ClientToolBook
from gateway.session.holding import HoldingCues, TonePlayer
from gateway.session.ledger_outcomes import outcome_from_ledger
from gateway.session.tool_batch import (
    GATEWAY_FAILED,
    Answer,
    BatchBook,
    ResponseEnds,
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
    spent_budget,
)
from gateway.session.tool_events import ToolWiring, tool_finished_event, tool_started_event
from gateway.store import Fenced, LedgerEntry
from gateway.toolrun import CallOutcome, ToolCall
from tools._core import ToolErrorType
from transports.base import ToolResult
from transports.events import ResponseDone, ToolCallsRequested

__all__ = ["HELD_RESPONSE_WAIT_S", "ToolFlow"]

_log = structlog.get_logger("session.tools")

# A cancelled tool batch finishes within its calls' hard timeouts; past this the next response
# starts anyway (its order is then the provider's).
HELD_RESPONSE_WAIT_S = 6.0

Finish = Callable[[ResponseDone], Awaitable[None]]
# Called by a batch once it has told the client all it will before the client's own answers:
# the response's end, held for the batch, may go (a client answers after it, as on OpenAI).
Reported = Callable[[str], Awaitable[None]]


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex}"


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
        self._ends: ResponseEnds[asyncio.Task[None], Finish] = ResponseEnds()
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
        self._ends.started(event.response_id, task)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def holding(self, response_id: str) -> bool:
        """Its end is held for a batch still running (nothing of it streams any more)."""
        return self._ends.holding(response_id)

    def hold(self, done: ResponseDone, finish: Finish) -> bool:
        """Keep ``done`` back while a batch of its response runs; False when none does."""
        return self._ends.hold(done, finish)

    async def wait_for_cancelled(self) -> None:
        """A new response may not start before a cancelled one's ``response.done``: if that is
        held for its batch, still finishing the calls just cancelled, wait for it. (A response
        that completed normally may overlap the next, as providers allow.)"""
        running = self._ends.cancelled_batches()
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
        task = asyncio.current_task()
        held = None if task is None else self._ends.reported(response_id, task)
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
        book = BatchBook(tuple(batch_calls(event.calls, _new_call_id)))
        try:
            await self._handle(book, event.response_id, reported)
        except Fenced:
            _log.info("tool_batch_fenced", session_id=self._w.ownership.session_id)
            self._w.host.lost()
        except Exception:
            _log.exception("tool_batch_failed")
            await self._fail_rest(book)

    async def _handle(self, book: BatchBook, response_id: str, reported: Reported | None) -> None:
        w = self._w
        # Expiry always goes through one path (client, audit and model told) before decisions,
        # at the same instant the decisions use.
        now = w.clock.now()
        await self.approvals.expire_due(now)
        w.conversation.turn.begin_round()
        policy = w.host.call_policy()
        for call in book.calls:
            answered = w.runner.seen(call) or self.client_calls.is_waiting(call.call_id)
            route = book.route(
                call, answered=answered, client_tool=self.client_calls.declares(call.tool_id)
            )
            if route == "duplicate":
                continue  # it was (or is being) answered once already
            if route == "client":  # no policy of ours applies; the client runs it
                refused = self.client_calls.ask(call, response_id)
                if refused is None:
                    book.asked.append(call)
                else:
                    book.outcomes[call.call_id] = refused
                continue
            decision = await self._confirmed_once(self._decide(call, policy, now))
            self._started(call, decision.args, book)
            if isinstance(decision, Execute):
                book.executions.append(decision)
            else:
                self._refuse(decision, book)
        for pending in book.opened:
            ttl_s = confirmation_key_ttl_s(pending.expires_at, now)
            await w.ownership.open_confirmation(pending.confirmation_id, ttl_s)
        if book.executions:
            await self._execute(book, policy)
        for pending in book.opened:
            self.approvals.requested(pending)
        if book.asked:
            if reported is not None:
                await reported(response_id)
            book.outcomes.update(await self.client_calls.answers(book.asked))
        # each result reaches the model once: those the ledger marks delivered here are given
        # here, even when the session is handed off meanwhile (its upstream waits for them)
        async with w.ownership.delivering(book.to_deliver()) as delivered:
            if w.ownership.handed_off and not delivered:
                return  # the new owner delivers what ran here (it is in the ledger)
            results = results_for_model(book, delivered)
            if results:
                await w.transport.send_tool_results(results)

    def _refuse(self, decision: Refuse, book: BatchBook) -> None:
        w = self._w
        spent = spent_budget(decision)
        if spent is not None:
            w.metrics.budget_refusals.labels(spent).inc()
        call = decision.call
        outcome = w.runner.refuse(
            call,
            w.host.caller(),
            decision.error_type,
            decision.message,
            decision=refusal_audit(decision),
            reason=decision.reason,
            arguments=decision.args,
            **decision.extra,
        )
        book.outcomes[call.call_id] = outcome
        w.host.emit(tool_finished_event(outcome))
        if decision.opened is not None:
            book.opened.append(decision.opened)

    async def _confirmed_once(self, decision: Execute | Refuse) -> Execute | Refuse:
        """A spoken yes runs the call only if this node closes the confirmation in the store
        (another node may have closed it: approved, rejected or expired there)."""
        if not isinstance(decision, Execute) or decision.confirmation is None:
            return decision
        if await self._w.ownership.take_confirmation(decision.confirmation.confirmation_id):
            return decision
        return answered_elsewhere(decision)

    async def _execute(self, book: BatchBook, policy: CallPolicy) -> None:
        """Run what the ledger says has not run (anywhere); take the results of the others from
        it; record every result in it. Background calls go on beside the session: the batch
        answers them with their acknowledgements."""
        w = self._w
        known = await w.ownership.start_calls(
            [(e.call.call_id, e.call.tool_id) for e in book.executions]
        )
        plan = plan_executions(book.executions, known, w.registry)
        book.gated = plan.gated
        for started in plan.background:
            call = started.execution.call
            if started.entry is not None:
                self.background.follow(call, started.entry)
            else:
                self.background.run(call, audit_decision(started.execution))
        fresh = [e.call for e in plan.fresh]
        holding = self._holding.watch(
            fresh,
            voice=policy.mode == "voice",
            soft_limit_ms=policy.budget.soft_limit_ms,
            track=self.track,
        )
        try:
            ran = await w.runner.run_batch(
                fresh, w.host.caller(), decisions=[audit_decision(e) for e in plan.fresh]
            )
        finally:
            if holding is not None:
                holding.cancel()
        await w.ownership.finish_calls((o.call.call_id, o.envelope) for o in ran)
        by_id = {o.call.call_id: o for o in ran}
        for execution in plan.waited:
            call_id = execution.call.call_id
            outcome = by_id.get(call_id)
            if outcome is None:  # started before: the ledger knows it
                entry = known.get(call_id)
                assert entry is not None
                outcome = await self.result_from_ledger(execution.call, entry)
            book.outcomes[call_id] = outcome
            after = after_outcome(outcome, execution.confirmation)
            w.host.emit(after.finished)
            if after.intents:
                w.host.apply_intents(after.intents)
            if after.resolves is not None:
                self.approvals.resolved(after.resolves, ConfirmationOutcome.APPROVED, outcome)
        book.acknowledged.update(
            (started.execution.call.call_id, started.acknowledgement) for started in plan.background
        )

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
            return internal_refusal(call)

    def _started(self, call: ToolCall, args: dict[str, Any] | None, book: BatchBook) -> None:
        book.started.add(call.call_id)
        self._w.host.emit(tool_started_event(self._w.registry, call, args))

    async def _fail_rest(self, book: BatchBook) -> None:
        """The batch failed half-way (``rest_of_batch``): each call not yet reported is refused
        INTERNAL (audited, told to the client), and the model gets a result for every call, the
        real one where the call ran (a failed send is tried once more; transports drop an answer
        for a call already answered)."""
        w = self._w
        results: list[ToolResult] = []
        for step in rest_of_batch(book):
            if isinstance(step, Answer):
                results.append(step.result)
                continue
            call = step.call
            try:
                if step.asked:  # the client is told no answer is wanted (it has no tool.* events)
                    self.client_calls.cancel([call.call_id])
                outcome = w.runner.refuse(
                    call, w.host.caller(), ToolErrorType.INTERNAL, GATEWAY_FAILED, reason="internal"
                )
                if not step.asked:
                    if step.unstarted:
                        self._started(call, None, book)
                    w.host.emit(tool_finished_event(outcome))
            except Exception:
                _log.exception("tool_call_report_failed", call_id=call.call_id)
                results.append(gateway_failure(call))
                continue
            if (result := model_result(outcome)) is not None:
                results.append(result)
        if results:
            try:
                await w.transport.send_tool_results(results)
            except Exception:
                _log.exception("tool_batch_answer_failed")
