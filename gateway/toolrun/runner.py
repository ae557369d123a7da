"""The single tool runner: parse, validate, deadline, execute, envelope, cache, audit.

Every tool execution in the gateway goes through ``ToolRunner.run``; refusals decided before
execution (by the orchestrator) go through ``ToolRunner.refuse`` so they are audited and shaped the
same way. The model always gets exactly one envelope per call id, whatever happened.

One runner serves one session: call ids (for dedupe and cancellation) are unique per session.
The registry, the result cache and the audit sink are shared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from opentelemetry.trace import use_span

from gateway.clock import Clock, SystemClock
from gateway.registry import Registry, ToolSpec
from gateway.toolrun.arguments import (
    ArgumentError,
    ParsedArguments,
    arguments_hash,
    canonical_json,
    parse_arguments,
)
from gateway.toolrun.audit import AuditDecision, AuditRecord, AuditSink
from gateway.toolrun.cache import ResultCache
from gateway.toolrun.call_memory import CallMemory
from gateway.toolrun.limits import DEFAULT_BUDGETS, Mode, ModeBudget
from gateway.toolrun.outcome import Caller, CallOutcome, ToolCall
from gateway.toolrun.projection import project
from gateway.toolrun.spans import end_call_span, start_call_span
from tools._core import EnvelopeError, ToolContext, ToolError, ToolErrorType, ToolResponse
from tools._core import normalize_envelope as _normalize

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from gateway.observability.tracing import Tracing

__all__ = ["RunObserver", "ToolRunner"]

_log = structlog.get_logger("toolrun")


class RunObserver(Protocol):
    """Metrics hooks; the observability package implements them with Prometheus."""

    def call_finished(self, tool_id: str, outcome: str, duration_s: float) -> None: ...

    def soft_limit_exceeded(self, tool_id: str, mode: str) -> None: ...


class ToolRunner:
    def __init__(
        self,
        registry: Registry,
        *,
        data_dir: Path,
        audit: AuditSink,
        clock: Clock | None = None,
        cache: ResultCache | None = None,
        budgets: Mapping[Mode, ModeBudget] = DEFAULT_BUDGETS,
        observer: RunObserver | None = None,
        dedupe_window: int = 1024,
        tracing: Tracing | None = None,
    ) -> None:
        self.registry = registry
        self._data_dir = data_dir
        self._audit = audit
        self._clock = clock or SystemClock()
        self._cache = cache
        self._budgets = budgets
        self._observer = observer
        self._tracing = tracing
        # Each call id's outcome and tool; finished ones kept (bounded) to answer duplicates.
        self._calls = CallMemory(dedupe_window)
        # call id → the task running its handler (the batch's, or the call's own in a batch)
        self._running: dict[str, asyncio.Task[Any]] = {}
        # Calls of a batch that have not started yet (waiting for a call they depend on).
        self._queued: set[str] = set()
        self._cancel_requested: set[str] = set()

    # -- public API ------------------------------------------------------------------------

    def hard_timeout_ms(self, spec: ToolSpec, mode: Mode) -> int:
        return spec.timeout_ms or self._budgets[mode].hard_timeout_ms

    async def run(
        self,
        call: ToolCall,
        caller: Caller,
        *,
        decision: AuditDecision = AuditDecision.EXECUTED,
    ) -> CallOutcome:
        """Execute one call; a duplicate delivery of a call id waits for and shares the first.
        The same id for another tool is no duplicate: it is refused, and nothing runs."""
        earlier = self._calls.future(call.call_id)
        if earlier is not None:
            if self._calls.tool_of(call.call_id) != call.tool_id:
                return self.refuse_reused_id(call, caller)
            first = await asyncio.shield(earlier)
            return replace(first, duplicate=True)
        future: asyncio.Future[CallOutcome] = asyncio.get_running_loop().create_future()
        self._calls.remember(call, future)
        span = None if self._tracing is None else start_call_span(self._tracing, call, caller)
        try:
            outcome = await self._run_once(call, caller, decision, span)
        except BaseException as exc:
            # Our own task was cancelled (session closing): duplicates waiting on it see that.
            future.cancel()
            if span is not None:
                end_call_span(span, None, type(exc).__name__)
            raise
        future.set_result(outcome)
        if span is not None:
            end_call_span(span, outcome, content_of=self._traced_content(call))
        return outcome

    async def run_batch(
        self,
        calls: Sequence[ToolCall],
        caller: Caller,
        *,
        decisions: Sequence[AuditDecision] | None = None,
    ) -> list[CallOutcome]:
        """Run a batch concurrently; a call waits for the calls its tool ``dependsOn``.

        One failure never blocks the others: a dependent call runs after its dependencies
        finish, whatever their outcome. Outcomes come back in the order of ``calls``.
        ``decisions`` (one per call; default executed) is what the audit records.
        """
        chosen = list(decisions) if decisions is not None else [AuditDecision.EXECUTED] * len(calls)
        self._queued.update(call.call_id for call in calls)
        if len(calls) == 1:  # the common case runs in the caller's task: no task switch
            return [await self._run_after([], calls[0], caller, chosen[0])]
        tasks: list[asyncio.Task[CallOutcome]] = []
        for index, call in enumerate(calls):
            spec = self.registry.get(call.tool_id)
            depends = set(spec.depends_on) if spec else set()
            waits_for = [
                tasks[j] for j in range(index) if calls[j].tool_id in depends and j != index
            ]
            tasks.append(
                asyncio.create_task(self._run_after(waits_for, call, caller, chosen[index]))
            )
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            raise

    def _traced_content(self, call: ToolCall) -> ToolSpec | None:
        """With content capture on, the call's tool: its rules show the call on its span."""
        if self._tracing is None or not self._tracing.capture_content:
            return None
        return self.registry.get(call.tool_id)

    def refuse_reused_id(self, call: ToolCall, caller: Caller) -> CallOutcome:
        """The id of an earlier call of another tool (an upstream reusing ids): refused, never
        run, so that no call gets another tool's result."""
        message = "this call id was already used for another tool's call; nothing ran. Call again."
        refused = self.refuse(
            call, caller, ToolErrorType.VALIDATION, message, reason="call_id_reused"
        )
        return replace(refused, reused_id=True)

    def refuse(
        self,
        call: ToolCall,
        caller: Caller,
        error_type: ToolErrorType,
        message: str,
        *,
        decision: AuditDecision = AuditDecision.BLOCKED,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
        **extra: Any,
    ) -> CallOutcome:
        """A call answered without running: shaped, audited and counted like any other."""
        response = ToolResponse.failure(error_type, message, **extra)
        outcome = self._finish(call, caller, response, arguments, 0.0, decision, reason=reason)
        if self._tracing is not None:
            span = start_call_span(self._tracing, call, caller)
            if reason is not None:  # a budget's or a rule's name: words safe for logs
                span.set_attribute("gateway.tool.block_reason", reason)
            end_call_span(span, outcome, content_of=self._traced_content(call))
        self._calls.remember_outcome(outcome)
        return outcome

    def from_ledger(
        self,
        call: ToolCall,
        caller: Caller,
        envelope: Mapping[str, Any],
        decision: AuditDecision = AuditDecision.ADOPTED,
    ) -> CallOutcome:
        """A call that ran elsewhere (the ledger holds its envelope): shaped, audited and
        remembered here like one that ran here, without running it."""
        try:
            response = _normalize(dict(envelope))
        except EnvelopeError:
            response = ToolResponse.failure(
                ToolErrorType.INTERNAL, "the tool returned an invalid result"
            )
        meta = envelope.get("meta")
        duration = meta.get("durationMs", 0.0) if isinstance(meta, Mapping) else 0.0
        duration_ms = float(duration) if isinstance(duration, int | float) else 0.0
        outcome = self._finish(call, caller, response, None, duration_ms, decision)
        self._calls.remember_outcome(outcome)
        return outcome

    def forget(self, call_id: str) -> None:
        """Let a call id run again: a confirmation approved by the client runs the original call."""
        self._calls.forget(call_id)

    def seen(self, call: ToolCall) -> bool:
        """Its id was run or answered for this same tool: a duplicate delivery."""
        return self._calls.tool_of(call.call_id) == call.tool_id

    def cancel(self, call_id: str) -> bool:
        """Cancel a call (barge-in, provider cancellation): a running one now, a queued one
        before it starts. True if it was running or queued."""
        if call_id in self._queued:
            self._cancel_requested.add(call_id)
            return True
        task = self._running.get(call_id)
        if task is None or task.done():
            return False
        self._cancel_requested.add(call_id)
        task.cancel()
        return True

    def cancel_all(self) -> None:
        for call_id in [*self._running, *self._queued]:
            self.cancel(call_id)

    # -- internals -------------------------------------------------------------------------

    async def _run_after(
        self,
        waits_for: list[asyncio.Task[CallOutcome]],
        call: ToolCall,
        caller: Caller,
        decision: AuditDecision,
    ) -> CallOutcome:
        try:
            if waits_for:
                await asyncio.wait(waits_for)
        finally:
            self._queued.discard(call.call_id)
        return await self.run(call, caller, decision=decision)

    async def _run_once(
        self, call: ToolCall, caller: Caller, decision: AuditDecision, span: Span | None = None
    ) -> CallOutcome:
        spec = self.registry.get(call.tool_id)
        if spec is None:
            return self._fail_before(
                call, caller, ToolErrorType.NOT_FOUND, f"no tool named '{call.tool_id}'"
            )
        try:
            parsed: ParsedArguments = parse_arguments(call.arguments)
        except ArgumentError as exc:
            return self._fail_before(call, caller, ToolErrorType.VALIDATION, str(exc))
        args = parsed.args
        try:
            problem = spec.validator.problem(args)
            canonical = canonical_json(args)
        except Exception as exc:  # arguments measured, but a validator is code too
            _log.error("tool_arguments_unhandled", tool=spec.tool_id, exception=type(exc).__name__)
            return self._fail_before(
                call, caller, ToolErrorType.VALIDATION, "the arguments could not be checked"
            )
        if problem is not None:
            return self._fail_before(call, caller, ToolErrorType.VALIDATION, problem, args)

        if self._cache is not None and spec.idempotent and spec.cache_ttl_s:
            cached = self._cache.get(caller.user_id, spec.tool_id, canonical)
            if cached is not None:
                return self._finish(call, caller, cached, args, 0.0, AuditDecision.CACHED)

        started = self._clock.monotonic()
        response = await self._execute(spec, call, caller, args, span)
        duration_ms = (self._clock.monotonic() - started) * 1000.0
        if response is None:  # cancelled by the provider
            failure = ToolResponse.failure(
                ToolErrorType.TRANSIENT,
                "the call was cancelled before it finished",
                retryable=True,
                partial_side_effects=spec.category == "action",
            )
            outcome = self._finish(
                call, caller, failure, args, duration_ms, AuditDecision.CANCELLED
            )
            return replace(outcome, cancelled=True)
        self._check_soft_limit(spec, caller, duration_ms)
        if self._cache is not None and spec.idempotent and spec.cache_ttl_s:
            self._cache.put(caller.user_id, spec.tool_id, canonical, response, spec.cache_ttl_s)
        return self._finish(call, caller, response, args, duration_ms, decision)

    async def _execute(
        self,
        spec: ToolSpec,
        call: ToolCall,
        caller: Caller,
        args: dict[str, Any],
        span: Span | None = None,
    ) -> ToolResponse | None:
        """Run the handler under its hard deadline. None means the provider cancelled it."""
        if call.call_id in self._cancel_requested:  # cancelled while it waited its turn
            self._cancel_requested.discard(call.call_id)
            return None
        ctx = ToolContext(
            session_id=caller.session_id,
            user_id=caller.user_id,
            roles=caller.roles,
            mode=caller.mode,
            call_id=call.call_id,
            tool_id=spec.tool_id,
            data_dir=self._data_dir,
            registry_version=self.registry.version,
            auth_token=caller.auth_token,
            tenant=caller.tenant,
            catalog=self.registry,
            logger=_log.bind(session_id=caller.session_id, call_id=call.call_id, tool=spec.tool_id),
            trace=None if span is None or self._tracing is None else self._tracing.tool_trace(span),
        )
        # The handler runs in this task (a task of its own would cost two task switches per
        # call): ``cancel`` cancels this task, and only the handler's await sees it.
        current = asyncio.current_task()
        assert current is not None
        self._running[call.call_id] = current
        timeout_s = self.hard_timeout_ms(spec, caller.mode) / 1000.0
        try:
            async with asyncio.timeout(timeout_s):
                if span is None:
                    result = await spec.handler(args, ctx)
                else:  # current while the handler runs: its log lines carry the span's ids
                    with use_span(span, end_on_exit=False, record_exception=False):
                        result = await spec.handler(args, ctx)
            if call.call_id in self._cancel_requested:
                current.uncancel()  # the handler swallowed the cancellation: its result stands
        except TimeoutError:
            return ToolResponse.failure(
                ToolErrorType.TIMEOUT,
                f"the tool did not finish within {timeout_s * 1000:.0f} ms",
                retryable=spec.idempotent,
                partial_side_effects=spec.category == "action",
            )
        except asyncio.CancelledError:
            # The provider's cancellation of this call is absorbed; any other (the session
            # ending) goes on up.
            if call.call_id in self._cancel_requested and current.uncancel() == 0:
                return None
            raise
        except ToolError as exc:
            return ToolResponse.failure(
                exc.type,
                exc.message,
                retryable=exc.retryable,
                partial_side_effects=exc.partial_side_effects,
            )
        except Exception as exc:
            # The exception text may hold secrets or internals: log its type and place only.
            tb = exc.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            where = f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else "?"
            _log.error(
                "tool_handler_crashed",
                session_id=caller.session_id,
                call_id=call.call_id,
                tool=spec.tool_id,
                exception=type(exc).__name__,
                where=where,
            )
            return ToolResponse.failure(
                ToolErrorType.INTERNAL,
                "the tool failed unexpectedly",
                partial_side_effects=spec.category == "action",
            )
        finally:
            self._running.pop(call.call_id, None)
            self._cancel_requested.discard(call.call_id)
        try:
            return _normalize(result)
        except EnvelopeError as exc:
            _log.error(
                "tool_returned_invalid_envelope",
                session_id=caller.session_id,
                call_id=call.call_id,
                tool=spec.tool_id,
                problem=str(exc),
            )
            return ToolResponse.failure(
                ToolErrorType.INTERNAL,
                "the tool returned an invalid result",
                partial_side_effects=spec.category == "action",
            )

    def _check_soft_limit(self, spec: ToolSpec, caller: Caller, duration_ms: float) -> None:
        soft_ms = self._budgets[caller.mode].soft_limit_ms
        if spec.category != "retrieval" or spec.background or duration_ms <= soft_ms:
            return
        _log.warning(
            "tool_soft_limit_exceeded",
            session_id=caller.session_id,
            tool=spec.tool_id,
            mode=caller.mode,
            duration_ms=round(duration_ms, 1),
            soft_limit_ms=soft_ms,
        )
        if self._observer is not None:
            self._observer.soft_limit_exceeded(spec.tool_id, caller.mode)

    def _fail_before(
        self,
        call: ToolCall,
        caller: Caller,
        error_type: ToolErrorType,
        message: str,
        args: dict[str, Any] | None = None,
    ) -> CallOutcome:
        response = ToolResponse.failure(error_type, message)
        return self._finish(
            call, caller, response, args, 0.0, AuditDecision.BLOCKED, reason=error_type.value
        )

    def _finish(
        self,
        call: ToolCall,
        caller: Caller,
        response: ToolResponse,
        args: dict[str, Any] | None,
        duration_ms: float,
        decision: AuditDecision,
        *,
        reason: str | None = None,
    ) -> CallOutcome:
        spec = self.registry.get(call.tool_id)
        meta = {
            "toolId": call.tool_id,
            "callId": call.call_id,
            "durationMs": round(duration_ms, 3),
            "registryVersion": self.registry.version,
        }
        if decision is AuditDecision.CACHED:
            meta["cached"] = True
        client_data = project(response.data, spec.result_allowlist) if spec else {}
        outcome_name = "ok" if response.error is None else response.error.type.value
        self._audit.record(
            AuditRecord(
                session_id=caller.session_id,
                user_id=caller.user_id,
                turn=caller.turn,
                tool=call.tool_id,
                call_id=call.call_id,
                args_hash=None if args is None else arguments_hash(call.tool_id, args),
                decision=decision,
                outcome=outcome_name,
                duration_ms=duration_ms,
                intents=tuple(response.intent_names),
                result=client_data,
                reason=reason,
            )
        )
        if self._observer is not None:
            self._observer.call_finished(call.tool_id, outcome_name, duration_ms / 1000.0)
        return CallOutcome(
            call=call,
            response=response,
            envelope=response.to_envelope(meta),
            client_data=client_data,
            arguments=args,
            duration_ms=duration_ms,
            decision=decision,
        )
