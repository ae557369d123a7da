"""What the tool flow and the approvals share: their narrow view of the session (``ToolHost``),
the collaborators they are wired with (``ToolWiring``), and the events they tell the client."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.clock import Clock
from gateway.observability import Metrics
from gateway.orchestrator import CallPolicy, redacted
from gateway.protocol import ServerEvent, ToolErrorInfo, ToolFinished, ToolStarted
from gateway.registry import Registry
from gateway.session.holding_policy import NO_HOLDING, HoldingPolicy
from gateway.session.ownership import Ownership
from gateway.session.snapshot import Conversation
from gateway.session.trace import SessionTrace
from gateway.toolrun import Caller, CallOutcome, ToolCall, ToolRunner
from tools._core import Intent
from transports.base import Transport

__all__ = ["ToolHost", "ToolWiring", "tool_finished_event", "tool_started_event"]


class ToolHost(Protocol):
    """What tool calls need of their session, and nothing more."""

    def emit(self, event: ServerEvent) -> None: ...

    def caller(self) -> Caller: ...

    def call_policy(self) -> CallPolicy: ...

    def apply_intents(self, intents: Sequence[Intent]) -> None: ...

    def lost(self) -> None:
        """Another node owns the session now (``Fenced``): do nothing more for it here."""
        ...


@dataclass(frozen=True, slots=True)
class ToolWiring:
    host: ToolHost
    registry: Registry
    runner: ToolRunner
    clock: Clock
    metrics: Metrics
    transport: Transport
    conversation: Conversation
    ownership: Ownership
    holding: HoldingPolicy = NO_HOLDING
    # With tracing on, the session's spans (a confirmation's wait is one).
    trace: SessionTrace | None = None


def tool_started_event(
    registry: Registry, call: ToolCall, args: dict[str, Any] | None
) -> ToolStarted:
    spec = registry.get(call.tool_id)
    shown = redacted(spec, args)
    background = spec is not None and spec.background
    return ToolStarted(
        call_id=call.call_id, name=call.tool_id, arguments=shown, background=background
    )


def tool_finished_event(outcome: CallOutcome) -> ToolFinished:
    fields = outcome.tool_finished_fields()
    error = fields.get("error")
    return ToolFinished(
        call_id=fields["call_id"],
        name=fields["name"],
        ok=fields["ok"],
        duration_ms=round(fields["duration_ms"]),
        intents=tuple(fields["intents"]),
        data=fields.get("data"),
        error=None
        if error is None
        else ToolErrorInfo(type=error["type"], message=error["message"]),
    )
