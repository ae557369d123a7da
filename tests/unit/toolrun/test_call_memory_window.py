"""The runner's memory of call ids is bounded: past its window the oldest finished ids are
forgotten (a duplicate of one would run again), a running call never is, and the first
outcome of an id is the one its duplicates get."""

from __future__ import annotations

import asyncio

from gateway.toolrun import AuditDecision, CallOutcome, ToolCall
from gateway.toolrun.call_memory import CallMemory
from tools._core import ToolResponse


def outcome(call_id: str, tool: str = "echo", text: str = "") -> CallOutcome:
    response = ToolResponse.success({"text": text})
    return CallOutcome(
        call=ToolCall(call_id, tool, {}),
        response=response,
        envelope=response.to_envelope({}),
        client_data={},
        arguments={},
        duration_ms=0.0,
        decision=AuditDecision.EXECUTED,
    )


def finished(value: CallOutcome) -> asyncio.Future[CallOutcome]:
    future: asyncio.Future[CallOutcome] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


async def test_past_the_window_the_oldest_finished_ids_are_forgotten() -> None:
    memory = CallMemory(window=2)
    for call_id in ("a", "b", "c"):
        memory.remember_outcome(outcome(call_id))
    assert "a" not in memory
    assert memory.tool_of("a") is None
    assert "b" in memory
    assert "c" in memory


async def test_a_running_call_is_never_forgotten_and_holds_back_the_ones_after_it() -> None:
    memory = CallMemory(window=1)
    running: asyncio.Future[CallOutcome] = asyncio.get_running_loop().create_future()
    memory.remember(ToolCall("slow", "sleepy", {}), running)
    memory.remember_outcome(outcome("b"))
    assert "slow" in memory  # over the window, but still running
    assert "b" in memory
    memory.forget("slow")  # not while it runs either
    assert memory.future("slow") is running
    running.set_result(outcome("slow", "sleepy"))
    memory.remember_outcome(outcome("c"))
    assert "slow" not in memory
    assert "b" not in memory
    assert memory.tool_of("c") == "echo"


async def test_the_first_outcome_of_an_id_stays_the_one_duplicates_get() -> None:
    memory = CallMemory(window=8)
    first = outcome("a", text="first")
    memory.remember(first.call, finished(first))
    memory.remember_outcome(outcome("a", tool="kb_search", text="second"))
    future = memory.future("a")
    assert future is not None
    assert future.result() is first
    assert memory.tool_of("a") == "echo"
    memory.forget("a")
    assert "a" not in memory
    assert memory.tool_of("a") is None
