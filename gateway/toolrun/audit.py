"""The audit trail: one structured record per tool call (TOOLS.md section 4).

A record carries a hash of the canonical arguments, never the arguments, and the result only as
projected through the tool's ``resultAllowlist``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import structlog

__all__ = ["AuditDecision", "AuditRecord", "AuditSink", "MemoryAuditSink", "StructlogAuditSink"]


class AuditDecision(StrEnum):
    EXECUTED = "executed"
    CACHED = "cached"
    BLOCKED = "blocked"
    CONFIRMATION_PENDING = "confirmation_pending"
    CONFIRMED = "confirmed"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


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
        fields = asdict(self)
        fields["decision"] = self.decision.value
        fields["intents"] = list(self.intents)
        fields["duration_ms"] = round(self.duration_ms, 3)
        return fields


class AuditSink(Protocol):
    def record(self, record: AuditRecord) -> None: ...


class StructlogAuditSink:
    def __init__(self, logger: Any = None) -> None:
        self._log = logger or structlog.get_logger("audit")

    def record(self, record: AuditRecord) -> None:
        self._log.info("tool_call", **record.as_log_fields())


class MemoryAuditSink:
    """Keeps records in a list: for tests and for the scripted-scenario runner."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def record(self, record: AuditRecord) -> None:
        self.records.append(record)
