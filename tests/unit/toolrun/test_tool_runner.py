"""The single tool runner, against purpose-built fixture tools (tests/fixtures/runner_tools)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest
from structlog.testing import capture_logs

from gateway.clock import ManualClock
from gateway.registry import Registry
from gateway.toolrun import (
    AuditDecision,
    Caller,
    CallOutcome,
    MemoryAuditSink,
    ResultCache,
    StructlogAuditSink,
    ToolCall,
    ToolRunner,
)
from tools._core import ToolErrorType

CALLER = Caller(session_id="s-1", user_id="alice", roles=("user",), mode="text", turn=3)


@pytest.fixture
def audit() -> MemoryAuditSink:
    return MemoryAuditSink()


@pytest.fixture
def runner(runner_registry: Registry, tmp_path: Path, audit: MemoryAuditSink) -> ToolRunner:
    return ToolRunner(runner_registry, data_dir=tmp_path, audit=audit)


def _runs(tmp_path: Path, tool: str) -> list[str]:
    log = tmp_path / f"runs_{tool}.log"
    return log.read_text().split() if log.exists() else []


async def test_success_envelope_has_meta_and_projected_client_data(
    runner: ToolRunner, runner_registry: Registry
) -> None:
    outcome = await runner.run(ToolCall("c1", "echo", '{"text": "hi", "count": 2}'), CALLER)
    assert outcome.ok
    assert outcome.envelope["data"] == {"text": "hi", "count": 2}
    assert outcome.envelope["intents"] == []
    meta = outcome.envelope["meta"]
    assert meta["toolId"] == "echo"
    assert meta["callId"] == "c1"
    assert meta["registryVersion"] == runner_registry.version
    assert isinstance(meta["durationMs"], float)
    fields = outcome.tool_finished_fields()
    assert fields["data"] == {"text": "hi", "count": 2}
    assert fields["intents"] == []


async def test_arguments_may_be_an_object(runner: ToolRunner) -> None:
    outcome = await runner.run(ToolCall("c1", "echo", {"text": "hi"}), CALLER)
    assert outcome.ok
    assert outcome.arguments == {"text": "hi"}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"x": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"count": 1}', "must contain ['text']"),
        ('{"text": "hi", "count": "2"}', "arguments.count must be integer"),
        ('{"text": "hi", "surprise": 1}', "must not contain"),
        ('{"text": "hi", "mode": "c"}', "arguments.mode must be one of"),
        ('{"text": "hi", "when": "noon"}', "arguments.when must be date-time"),
    ],
)
async def test_bad_arguments_are_validation_errors_and_never_run(
    runner: ToolRunner, tmp_path: Path, raw: str, fragment: str
) -> None:
    outcome = await runner.run(ToolCall("c1", "echo", raw), CALLER)
    assert outcome.error_type == "VALIDATION"
    assert fragment in outcome.envelope["error"]["message"]
    assert outcome.envelope["error"]["retryable"] is False
    assert outcome.envelope["error"]["partialSideEffects"] is False
    assert _runs(tmp_path, "echo") == []


async def test_unknown_tool_is_not_found(runner: ToolRunner, audit: MemoryAuditSink) -> None:
    outcome = await runner.run(ToolCall("c1", "nope", "{}"), CALLER)
    assert outcome.error_type == "NOT_FOUND"
    assert audit.records[-1].decision is AuditDecision.BLOCKED


async def test_handler_exception_is_internal_and_leaks_nothing(
    runner: ToolRunner, audit: MemoryAuditSink
) -> None:
    with capture_logs() as logs:
        outcome = await runner.run(ToolCall("c1", "crasher", "{}"), CALLER)
    error = outcome.envelope["error"]
    assert error["type"] == "INTERNAL"
    assert error["partialSideEffects"] is True  # an action tool may have done something
    assert "hunter2" not in orjson.dumps(outcome.envelope).decode()
    assert "Traceback" not in error["message"]
    assert "hunter2" not in repr(logs)
    crash = next(entry for entry in logs if entry["event"] == "tool_handler_crashed")
    assert crash["exception"] == "RuntimeError"
    assert crash["where"].startswith("handler.py:")


async def test_invalid_envelope_is_internal(runner: ToolRunner) -> None:
    outcome = await runner.run(ToolCall("c1", "bad_envelope", "{}"), CALLER)
    assert outcome.error_type == "INTERNAL"
    assert "hunter2" not in orjson.dumps(outcome.envelope).decode()


async def test_plain_dict_envelopes_are_accepted_with_intents(runner: ToolRunner) -> None:
    outcome = await runner.run(ToolCall("c1", "dict_envelope", "{}"), CALLER)
    assert outcome.ok
    assert outcome.envelope["intents"] == [{"type": "SUPPRESS_AUDIO", "duration_ms": 500}]
    assert outcome.tool_finished_fields()["intents"] == ["SUPPRESS_AUDIO"]


@pytest.mark.parametrize(
    "error_type", ["SESSION_INACTIVE", "TRANSIENT", "PERMANENT", "CONFLICT", "AUTH", "RATE_LIMIT"]
)
async def test_handler_error_types_pass_through(runner: ToolRunner, error_type: str) -> None:
    raised = await runner.run(ToolCall("c1", "raises_tool_error", {"type": error_type}), CALLER)
    assert raised.envelope["error"] == {
        "type": error_type,
        "message": "the upstream said no",
        "retryable": True,
        "partialSideEffects": False,
    }
    returned = await runner.run(ToolCall("c2", "returns_failure", {"type": error_type}), CALLER)
    assert returned.error_type == error_type
    assert returned.envelope["error"]["partialSideEffects"] is True


async def test_hard_deadline_cancels_the_handler(runner: ToolRunner, tmp_path: Path) -> None:
    # sleepy declares timeoutMs 1000; it is asked to sleep 5 s.
    started = time.monotonic()
    outcome = await runner.run(ToolCall("slow", "sleepy", {"ms": 5000}), CALLER)
    assert time.monotonic() - started < 3
    assert outcome.error_type == "TIMEOUT"
    assert outcome.envelope["error"]["retryable"] is True  # idempotent
    assert (tmp_path / "sleepy_slow.state").read_text() == "cancelled"


async def test_mode_default_timeout_applies_without_timeout_ms(
    runner: ToolRunner, runner_registry: Registry
) -> None:
    echo = runner_registry.get("echo")
    assert echo is not None
    assert runner.hard_timeout_ms(echo, "voice") == 3000
    assert runner.hard_timeout_ms(echo, "text") == 5000


async def test_duplicate_call_id_executes_once(runner: ToolRunner, tmp_path: Path) -> None:
    first, second = await asyncio.gather(
        runner.run(ToolCall("dup", "echo", {"text": "a"}), CALLER),
        runner.run(ToolCall("dup", "echo", {"text": "a"}), CALLER),
    )
    third = await runner.run(ToolCall("dup", "echo", {"text": "a"}), CALLER)
    assert _runs(tmp_path, "echo") == ["dup"]
    assert [first.duplicate, second.duplicate, third.duplicate] == [False, True, True]
    assert first.envelope == second.envelope == third.envelope


async def test_an_id_reused_for_another_tool_is_refused_not_shared(
    runner: ToolRunner, tmp_path: Path, audit: MemoryAuditSink
) -> None:
    """A duplicate delivery shares the first call's result; the same id for a call of another
    tool is no duplicate: it is refused at once (even while the first still runs), runs
    nothing, and is not taken for a duplicate of the first afterwards."""
    slow = asyncio.ensure_future(runner.run(ToolCall("same", "sleepy", {"ms": 300}), CALLER))
    await asyncio.sleep(0)  # the sleepy call is registered under "same"
    assert runner.seen(ToolCall("same", "sleepy", {}))
    assert not slow.done()
    assert not runner.seen(ToolCall("same", "echo", {}))
    other = await runner.run(ToolCall("same", "echo", {"text": "a"}), CALLER)
    assert not slow.done()  # refused without waiting for the first
    assert not other.ok
    assert other.error_type == "VALIDATION"
    assert other.reused_id
    assert other.envelope["meta"]["toolId"] == "echo"
    assert "another tool" in other.envelope["error"]["message"]
    assert _runs(tmp_path, "echo") == []
    assert audit.records[-1].reason == "call_id_reused"
    first = await slow
    assert first.ok
    assert not first.reused_id
    again = await runner.run(ToolCall("same", "sleepy", {"ms": 300}), CALLER)
    assert again.duplicate
    assert again.envelope == first.envelope


async def test_cache_serves_idempotent_results_until_ttl(
    runner_registry: Registry, tmp_path: Path, audit: MemoryAuditSink
) -> None:
    clock = ManualClock()
    cache = ResultCache(clock)
    runner = ToolRunner(runner_registry, data_dir=tmp_path, audit=audit, clock=clock, cache=cache)
    log = tmp_path / "cached_lookup.log"
    await runner.run(ToolCall("a", "cached_lookup", {"key": "k"}), CALLER)
    hit = await runner.run(ToolCall("b", "cached_lookup", {"key": "k"}), CALLER)
    assert log.read_text().split() == ["k"]
    assert hit.decision is AuditDecision.CACHED
    assert hit.envelope["meta"]["cached"] is True
    assert hit.envelope["meta"]["callId"] == "b"
    bob = Caller(session_id="s-2", user_id="bob", roles=(), mode="text")
    other_user = await runner.run(ToolCall("c", "cached_lookup", {"key": "k"}), bob)
    assert other_user.envelope["data"]["user"] == "bob"  # never another user's result
    clock.advance(61)
    await runner.run(ToolCall("d", "cached_lookup", {"key": "k"}), CALLER)
    assert log.read_text().split() == ["k", "k", "k"]


async def test_batch_runs_concurrently(runner: ToolRunner) -> None:
    started = time.monotonic()
    outcomes = await runner.run_batch(
        [ToolCall("a", "sleepy", {"ms": 200}), ToolCall("b", "sleepy", {"ms": 200})], CALLER
    )
    elapsed = time.monotonic() - started
    assert all(o.ok for o in outcomes)
    assert elapsed < 0.35, f"two 200 ms tools took {elapsed * 1000:.0f} ms"


async def test_depends_on_orders_a_batch_and_failures_do_not_block(
    runner: ToolRunner,
) -> None:
    outcomes = await runner.run_batch(
        [
            ToolCall("a", "sleepy", {"ms": 150}),
            ToolCall("b", "after_sleepy", {}),
            ToolCall("c", "echo", "not json"),
        ],
        CALLER,
    )
    sleepy, after, broken = outcomes
    assert [o.call.call_id for o in outcomes] == ["a", "b", "c"]
    assert after.envelope["data"]["started"] >= sleepy.envelope["data"]["finished"]
    assert broken.error_type == "VALIDATION"
    failing = await runner.run_batch(
        [ToolCall("d", "sleepy", {"ms": 5000}), ToolCall("e", "after_sleepy", {})], CALLER
    )
    assert failing[0].error_type == "TIMEOUT"
    assert failing[1].ok


async def test_provider_cancellation_marks_the_outcome(runner: ToolRunner, tmp_path: Path) -> None:
    task = asyncio.create_task(runner.run(ToolCall("x", "sleepy", {"ms": 900}), CALLER))
    # asyncio runs ready tasks in order: a few yields get the handler to its first await.
    for _ in range(3):
        await asyncio.sleep(0)
    assert (tmp_path / "sleepy_x.state").read_text() == "started"
    assert runner.cancel("x")
    outcome = await task
    assert outcome.cancelled
    assert not outcome.ok
    assert (tmp_path / "sleepy_x.state").read_text() == "cancelled"
    assert not runner.cancel("x")


async def test_a_single_call_batch_cancelled_by_the_provider_answers_and_its_task_goes_on(
    runner: ToolRunner, tmp_path: Path
) -> None:
    # A one-call batch runs in the caller's task: the provider's cancel must stop the handler
    # only, and leave that task (the session's batch) running and not "cancelling".
    async def batch() -> tuple[list[CallOutcome], int]:
        outcomes = await runner.run_batch([ToolCall("y", "sleepy", {"ms": 900})], CALLER)
        await asyncio.sleep(0)  # still a live task: no CancelledError left pending
        current = asyncio.current_task()
        assert current is not None
        return outcomes, current.cancelling()

    task = asyncio.create_task(batch())
    for _ in range(3):
        await asyncio.sleep(0)
    assert (tmp_path / "sleepy_y.state").read_text() == "started"
    assert runner.cancel("y")
    outcomes, cancelling = await task
    assert outcomes[0].cancelled
    assert cancelling == 0
    assert (tmp_path / "sleepy_y.state").read_text() == "cancelled"


async def test_cancelling_the_batch_itself_still_cancels_it(runner: ToolRunner) -> None:
    # The session ending cancels its batch task: that must not be mistaken for the provider's
    # cancel of the call, even when both happen.
    task = asyncio.create_task(runner.run_batch([ToolCall("z", "sleepy", {"ms": 900})], CALLER))
    for _ in range(3):
        await asyncio.sleep(0)
    runner.cancel("z")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_refusals_are_audited_like_calls(runner: ToolRunner, audit: MemoryAuditSink) -> None:
    outcome = runner.refuse(
        ToolCall("r", "echo", {"text": "x"}),
        CALLER,
        ToolErrorType.BUDGET_EXCEEDED,
        "retrieval budget for this turn is spent",
        reason="budget",
        arguments={"text": "x"},
    )
    assert outcome.envelope["error"]["retryable"] is False
    record = audit.records[-1]
    assert record.decision is AuditDecision.BLOCKED
    assert record.reason == "budget"
    assert record.outcome == "BUDGET_EXCEEDED"
    assert record.args_hash is not None


async def test_handlers_see_the_session_context(runner: ToolRunner) -> None:
    outcome = await runner.run(ToolCall("c", "doc_reader", {}), CALLER)
    data = outcome.envelope["data"]
    assert data["mode"] == "text"
    assert data["session"] == "s-1"
    assert "echo" in data["ids"]


async def test_nothing_outside_the_allowlist_reaches_audit_or_client(
    runner_registry: Registry, tmp_path: Path
) -> None:
    runner = ToolRunner(runner_registry, data_dir=tmp_path, audit=StructlogAuditSink())
    with capture_logs() as logs:
        outcome = await runner.run(ToolCall("s", "secretive", {}), CALLER)
        await asyncio.sleep(0)  # the audit line is written just after the step
    # The model gets everything; the client and the audit log get the projection only.
    assert outcome.envelope["data"]["ssn"] == "123-45-6789"
    expected = {
        "public": "visible",
        "items": [{"name": "a"}, {"name": "b"}],
        "nested": {"shown": 1},
    }
    assert outcome.client_data == expected
    audit_entries = [entry for entry in logs if entry["event"] == "tool_call"]
    assert len(audit_entries) == 1
    entry = audit_entries[0]
    assert entry["result"] == expected
    assert entry["session_id"] == "s-1"
    assert entry["user_id"] == "alice"
    assert entry["turn"] == 3
    assert entry["decision"] == "executed"
    assert entry["outcome"] == "ok"
    assert len(entry["args_hash"]) == 32
    for secret in ("123-45-6789", "tok-1", "api-key-xyz"):
        assert secret not in repr(logs)
