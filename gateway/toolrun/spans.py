"""A tool call's span (tracing on): what it records and what it never does. Attributes hold ids,
the call's decision (executed, blocked by a budget or a rule, cached, confirmation pending…),
its outcome as the model got it and how long the tool ran: no argument and no result value."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.trace import Span, Status, StatusCode

from gateway.toolrun.outcome import Caller, CallOutcome, ToolCall

if TYPE_CHECKING:
    from gateway.observability.tracing import Tracing

__all__ = ["end_call_span", "start_call_span"]


def start_call_span(tracing: Tracing, call: ToolCall, caller: Caller) -> Span:
    return tracing.start(
        "gateway.tool_call",
        parent=caller.trace_parent,
        attributes={
            "gateway.session.id": caller.session_id,
            "gateway.tool.id": call.tool_id,
            "gateway.tool.call_id": call.call_id,
            "gateway.mode": caller.mode,
            "gateway.turn": caller.turn,
        },
    )


def end_call_span(span: Span, outcome: CallOutcome | None, failure: str | None = None) -> None:
    """End it with the outcome, or with ``failure`` (an exception's type) when there is none."""
    if outcome is not None:
        error = outcome.response.error
        span.set_attribute("gateway.tool.decision", outcome.decision.value)
        span.set_attribute("gateway.tool.outcome", "ok" if error is None else "error")
        span.set_attribute("gateway.tool.duration_ms", round(outcome.duration_ms, 3))
        if outcome.cancelled:
            span.set_attribute("gateway.tool.cancelled", True)
        failure = None if error is None else error.type.value
    if failure is not None:
        span.set_attribute("error.type", failure)
        span.set_status(Status(StatusCode.ERROR, failure))
    span.end()
