"""The audit trail: one structured record per tool call (docs/tools.md section 9), and one per
session that ends, with what it consumed (``session_usage``).

A record carries a hash of the canonical arguments, never the arguments, and the result only as
projected through the tool's ``resultAllowlist``. A usage record carries counts only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import structlog

__all__ = [
    "AUDIT_LOGGER",
    "AuditDecision",
    "AuditRecord",
    "AuditSink",
    "MemoryAuditSink",
    "StructlogAuditSink",
    "UsageRecord",
]

# The logger of the audit trail; logging keeps it at INFO whatever the configured level.
AUDIT_LOGGER = "audit"


class AuditDecision(StrEnum):
    EXECUTED = "executed"
    CACHED = "cached"
    BLOCKED = "blocked"
    CONFIRMATION_PENDING = "confirmation_pending"
    CONFIRMED = "confirmed"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    # Run on another node (the session moved while it ran); its result is delivered here.
    ADOPTED = "adopted"
    # Its node stopped while it ran: reported failed, side effects unknown; never run again.
    LOST = "lost"
    # A tool the client declared: the client ran it and answered (the gateway ran nothing).
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class AuditRecord:
    session_id: str
    user_id: str
    turn: int
    tool: str
    call_id: str
    args_hash: str | None
    decision: AuditDecision
    # "ok", or the error type the model received.
    outcome: str
    duration_ms: float
    intents: tuple[str, ...] = ()
    result: Mapping[str, Any] = field(default_factory=dict)
    # Why a call was blocked, in words safe for logs.
    reason: str | None = None

    def as_log_fields(self) -> dict[str, Any]:
        # Field by field: dataclasses.asdict deep-copies, at several times the cost, and this
        # runs once per tool call, before the result goes back to the model.
        return {
            "session_id": self.session_id,
            "user_id": self.user_id,
            "turn": self.turn,
            "tool": self.tool,
            "call_id": self.call_id,
            "args_hash": self.args_hash,
            "decision": self.decision.value,
            "outcome": self.outcome,
            "duration_ms": round(self.duration_ms, 3),
            "intents": list(self.intents),
            "result": dict(self.result),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """A session ended for good: its usage summary (``gateway.usage.UsageReporter.summary``).
    A user's consumption is the sum of their records (docs/operations.md)."""

    session_id: str
    user_id: str
    tenant: str | None
    provider: str
    mode: str
    reason: str
    usage: Mapping[str, Any]

    def as_log_fields(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "user_id": self.user_id,
            "tenant": self.tenant,
            "provider": self.provider,
            "mode": self.mode,
            "reason": self.reason,
            "usage": dict(self.usage),
        }


class AuditSink(Protocol):
    def record(self, record: AuditRecord) -> None: ...

    def session_usage(self, record: UsageRecord) -> None: ...


class StructlogAuditSink:
    """Writes each record as a ``tool_call`` log line of the ``audit`` logger.

    In an event loop the lines are written just after the current step, in order: formatting
    and writing one costs more than running a quick tool, and the tool's result should reach
    the model first. Without a running loop a record is written at once; ``flush`` writes what
    is pending now (the app calls it on the way out).
    """

    def __init__(self, logger: Any = None) -> None:
        self._log = logger or structlog.get_logger(AUDIT_LOGGER)
        self._pending: list[AuditRecord] = []

    def session_usage(self, record: UsageRecord) -> None:
        # Once per session, at its end: written at once, after the tool lines already queued.
        self.flush()
        self._log.info("session_usage", **record.as_log_fields())

    def record(self, record: AuditRecord) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write(record)
            return
        if not self._pending:
            loop.call_soon(self.flush)
        self._pending.append(record)

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for record in pending:
            self._write(record)

    def _write(self, record: AuditRecord) -> None:
        self._log.info("tool_call", **record.as_log_fields())


class MemoryAuditSink:
    """Keeps records in a list: for tests and for the scripted-scenario runner."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.usage_records: list[UsageRecord] = []

    def record(self, record: AuditRecord) -> None:
        self.records.append(record)

    def session_usage(self, record: UsageRecord) -> None:
        self.usage_records.append(record)
