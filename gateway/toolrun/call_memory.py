"""The runner's memory of call ids: each id's outcome (a future while its call runs) and the
tool it was for, kept for a bounded window so that a duplicate delivery is answered with the
first outcome, and a call of another tool under a known id is told apart from a duplicate."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from gateway.toolrun.outcome import CallOutcome, ToolCall

__all__ = ["CallMemory"]


class CallMemory:
    """Call id → outcome future and tool, oldest first. Past ``window`` ids the oldest finished
    ones are forgotten; one still running never is (its duplicates must wait for it)."""

    def __init__(self, window: int) -> None:
        self._window = window
        self._futures: OrderedDict[str, asyncio.Future[CallOutcome]] = OrderedDict()
        self._tools: dict[str, str] = {}

    def __contains__(self, call_id: str) -> bool:
        return call_id in self._futures

    def future(self, call_id: str) -> asyncio.Future[CallOutcome] | None:
        return self._futures.get(call_id)

    def tool_of(self, call_id: str) -> str | None:
        return self._tools.get(call_id)

    def remember(self, call: ToolCall, future: asyncio.Future[CallOutcome]) -> None:
        self._futures[call.call_id] = future
        self._tools[call.call_id] = call.tool_id
        while len(self._futures) > self._window:
            oldest_id, oldest = next(iter(self._futures.items()))
            if not oldest.done():
                break  # never forget a call that is still running
            self._futures.popitem(last=False)
            del self._tools[oldest_id]

    def remember_outcome(self, outcome: CallOutcome) -> None:
        """An outcome reached without running (refused, or from the ledger), unless its id is
        known already (then the first outcome stays the one duplicates get)."""
        if outcome.call.call_id in self._futures:
            return
        done: asyncio.Future[CallOutcome] = asyncio.get_running_loop().create_future()
        done.set_result(outcome)
        self.remember(outcome.call, done)

    def forget(self, call_id: str) -> None:
        """Let the id run again (once its call has finished)."""
        future = self._futures.get(call_id)
        if future is not None and future.done():
            del self._futures[call_id]
            del self._tools[call_id]
