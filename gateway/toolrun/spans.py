"""A tool call's span (tracing on): what it records and what it never does. Attributes hold ids,
the call's decision (executed, blocked by a budget or a rule, cached, confirmation pending…),
its outcome as the model got it and how long the tool ran: no argument and no result value.

It is named and marked as the GenAI conventions' ``execute_tool`` span
(``gateway.observability.genai``). With content capture on (``GATEWAY_TRACE_CONTENT``) it also
carries the call's arguments and result, as people may see them: the tool's ``secretArguments``
blanked, the result projected through its ``resultAllowlist`` (the client's ``tool.finished``
data), and a result only when the call succeeded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.trace import Span, Status, StatusCode

from gateway.observability.genai import tool_attributes, tool_content, tool_span_name
from gateway.toolrun.outcome import Caller, CallOutcome, ToolCall
from gateway.toolrun.projection import redact_arguments

if TYPE_CHECKING:
    from gateway.observability.tracing import Tracing
    from gateway.registry import ToolSpec

__all__ = ["end_call_span", "start_call_span"]


def start_call_span(tracing: Tracing, call: ToolCall, caller: Caller) -> Span:
    return tracing.start(
        tool_span_name(call.tool_id),
        parent=caller.trace_parent,
        attributes={
            "gateway.session.id": caller.session_id,
            "gateway.tool.id": call.tool_id,
            "gateway.tool.call_id": call.call_id,
            "gateway.mode": caller.mode,
            "gateway.turn": caller.turn,
            **tool_attributes(
                tool_id=call.tool_id, call_id=call.call_id, conversation_id=caller.session_id
            ),
        },
    )


def end_call_span(
    span: Span,
    outcome: CallOutcome | None,
    failure: str | None = None,
    *,
    content_of: ToolSpec | None = None,
) -> None:
    """End it with the outcome, or with ``failure`` (an exception's type) when there is none.
    ``content_of``: with content capture on, the call's tool, whose rules show its content."""
    if outcome is not None:
        error = outcome.response.error
        span.set_attribute("gateway.tool.decision", outcome.decision.value)
        span.set_attribute("gateway.tool.outcome", "ok" if error is None else "error")
        span.set_attribute("gateway.tool.duration_ms", round(outcome.duration_ms, 3))
        if outcome.cancelled:
            span.set_attribute("gateway.tool.cancelled", True)
        failure = None if error is None else error.type.value
        if content_of is not None:
            args = outcome.arguments
            shown = None if args is None else redact_arguments(args, content_of.secret_arguments)
            span.set_attributes(tool_content(shown, outcome.client_data if error is None else None))
    if failure is not None:
        span.set_attribute("error.type", failure)
        span.set_status(Status(StatusCode.ERROR, failure))
    span.end()
