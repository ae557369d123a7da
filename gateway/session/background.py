"""Tool calls that run in the background (``"execution": "background"`` in the tool's schema).

The model gets an acknowledgement at once, as the batch's result for the call ("started"), and
the conversation goes on. The work runs beside the session, like all tool work: cancelled when
the session ends, once per call id across reconnects and nodes (the ledger). When it ends the
client gets ``tool.finished``, and the result enters the conversation once, when the tool's
``delivery`` says:

- ``interrupt``: at once, cutting the reply the model is giving;
- ``when_idle``: as soon as the model is not replying;
- ``silent``: as context the model does not answer.

A provider that runs such calls itself (``ScheduledResults``: Gemini Live's ``NON_BLOCKING``
declarations) gets the result with its own scheduling and needs no acknowledgement. A
``tool.finished`` that comes while no client is attached is kept and sent after the next
``session.started`` here (a resume on another node learns of it from the ledger).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import orjson
import structlog

from gateway.protocol import ToolFinished
from gateway.session.tool_events import ToolWiring, tool_finished_event
from gateway.store import Fenced, LedgerEntry
from gateway.toolrun import AuditDecision, CallOutcome, ToolCall
from transports.base import Delivery, ScheduledResults, ToolResult

__all__ = ["BackgroundCalls", "ModelTurns"]

_log = structlog.get_logger("session.background")


class ModelTurns(Protocol):
    """What background delivery needs of the session's replies."""

    def replying(self) -> bool:
        """The model is giving a reply now."""
        ...

    async def until_idle(self) -> None:
        """Until the model is not replying."""
        ...

    def attached(self) -> bool:
        """A client is attached (its events are sent, not dropped)."""
        ...


FromLedger = Callable[[ToolCall, LedgerEntry], Awaitable[CallOutcome]]


class BackgroundCalls:
    def __init__(
        self,
        wiring: ToolWiring,
        turns: ModelTurns,
        track: Callable[[Coroutine[Any, Any, None]], None],
        from_ledger: FromLedger,
    ) -> None:
        self._w = wiring
        self._turns = turns
        self._track = track
        self._from_ledger = from_ledger
        self._missed: list[ToolFinished] = []

    def run(self, call: ToolCall, decision: AuditDecision) -> None:
        """Run a call nobody ran yet (the ledger says so) in the background."""
        self._track(self._work(call, decision))

    def follow(self, call: ToolCall, entry: LedgerEntry) -> None:
        """A call started before (a duplicate delivery, or another node): its result, when it
        comes, is delivered as this call's would be."""
        self._track(self._followed(call, entry))

    def replay_missed(self) -> None:
        """After ``session.started`` on this node: what finished while nobody was attached."""
        missed, self._missed = self._missed, []
        for event in missed:
            self._w.host.emit(event)

    async def _work(self, call: ToolCall, decision: AuditDecision) -> None:
        w = self._w
        outcome = await w.runner.run(call, w.host.caller(), decision=decision)
        await w.ownership.finish_calls([(call.call_id, outcome.envelope)])
        await self._finished(outcome)

    async def _followed(self, call: ToolCall, entry: LedgerEntry) -> None:
        await self._finished(await self._from_ledger(call, entry))

    async def _finished(self, outcome: CallOutcome) -> None:
        w = self._w
        event = tool_finished_event(outcome)
        if self._turns.attached():
            w.host.emit(event)
        else:
            self._missed.append(event)
        if outcome.cancelled:
            return
        if outcome.ok and outcome.response.intents:
            w.host.apply_intents(outcome.response.intents)
        spec = w.registry.get(outcome.call.tool_id)
        await self.give(outcome, spec.delivery if spec is not None else "when_idle")

    async def give(self, outcome: CallOutcome, delivery: Delivery) -> None:
        """Its result enters the conversation once (the ledger says whether here), at the
        moment ``delivery`` asks."""
        w, call = self._w, outcome.call
        if delivery == "when_idle" and not isinstance(w.transport, ScheduledResults):
            # waited for before the ledger marks it delivered: a hand-off meanwhile leaves it
            # to the new owner instead of losing it with this upstream
            await self._turns.until_idle()
        try:
            async with w.ownership.delivering([call.call_id]) as allowed:
                if allowed:  # else delivered already (another node, or a duplicate)
                    result = ToolResult(call.call_id, call.tool_id, outcome.envelope)
                    await self.deliver(result, delivery)
        except Fenced:
            w.host.lost()

    async def deliver(self, result: ToolResult, delivery: Delivery) -> None:
        """The result enters the conversation at the moment ``delivery`` asks."""
        transport = self._w.transport
        if isinstance(transport, ScheduledResults):
            await transport.send_scheduled_result(result, delivery)
        elif delivery == "silent":
            await transport.add_context(context_text(result))
        elif delivery == "interrupt":
            if self._turns.replying():
                await transport.cancel_response()
            await transport.send_late_result(result)
        else:
            await self._turns.until_idle()
            await transport.send_late_result(result)
        _log.info("background_result_delivered", call_id=result.call_id, delivery=delivery)


def context_text(result: ToolResult) -> str:
    """A silent result, as the model reads it."""
    envelope = orjson.dumps(dict(result.envelope)).decode()
    return (
        f"Result of the earlier {result.name} call {result.call_id}, which ran in the "
        f"background (for your information; no need to mention it unless asked): {envelope}"
    )
