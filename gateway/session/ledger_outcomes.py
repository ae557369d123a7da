"""The outcome of a call the session's ledger knows: started before, on this node or another.

Its result once it finishes (waiting while its node is alive); a failure whose side effects are
unknown when its node stopped first (it is never run again, and the failure is recorded in the
ledger); and a refusal when the ledger knows the id for a call of another tool (an upstream that
reuses ids): that call gets neither the other's result nor its failure.
"""

from __future__ import annotations

from gateway.session.tool_batch import reuses_id
from gateway.session.tool_events import ToolWiring
from gateway.store import LedgerEntry
from gateway.toolrun import AuditDecision, CallOutcome, ToolCall
from tools._core import ToolErrorType, ToolResponse

__all__ = ["outcome_from_ledger"]

_LOST = (
    "the gateway node running this call stopped before it finished; it may or may not have had "
    "its effect: check before calling it again"
)


async def outcome_from_ledger(w: ToolWiring, call: ToolCall, entry: LedgerEntry) -> CallOutcome:
    caller = w.host.caller()
    if reuses_id(entry, call):
        return w.runner.refuse_reused_id(call, caller)
    if entry.envelope is None and await w.ownership.store.node_alive(entry.node):
        spec = w.registry.get(call.tool_id)
        deadline = (w.runner.hard_timeout_ms(spec, caller.mode) / 1000 if spec else 5.0) + 5.0
        finished = await w.ownership.wait_finished(call.call_id, deadline)
        if finished is not None:
            entry = finished
    if entry.envelope is not None:
        return w.runner.from_ledger(call, caller, entry.envelope)
    lost = ToolResponse.failure(ToolErrorType.INTERNAL, _LOST, partial_side_effects=None)
    envelope = lost.to_envelope({"toolId": call.tool_id, "callId": call.call_id})
    await w.ownership.finish_calls([(call.call_id, envelope)])
    return w.runner.from_ledger(call, caller, envelope, AuditDecision.LOST)
