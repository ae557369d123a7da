"""The single tool runner and the pieces it is made of."""

from gateway.toolrun.arguments import (
    ArgumentError,
    ParsedArguments,
    arguments_hash,
    canonical_json,
    measure_arguments,
    parse_arguments,
)
from gateway.toolrun.audit import (
    AuditDecision,
    AuditRecord,
    AuditSink,
    MemoryAuditSink,
    StructlogAuditSink,
    UsageRecord,
)
from gateway.toolrun.cache import ResultCache
from gateway.toolrun.limits import DEFAULT_BUDGETS, Mode, ModeBudget
from gateway.toolrun.outcome import Caller, CallOutcome, ToolCall
from gateway.toolrun.projection import project
from gateway.toolrun.runner import RunObserver, ToolRunner

__all__ = [
    "DEFAULT_BUDGETS",
    "ArgumentError",
    "AuditDecision",
    "AuditRecord",
    "AuditSink",
    "CallOutcome",
    "Caller",
    "MemoryAuditSink",
    "Mode",
    "ModeBudget",
    "ParsedArguments",
    "ResultCache",
    "RunObserver",
    "StructlogAuditSink",
    "ToolCall",
    "ToolRunner",
    "UsageRecord",
    "arguments_hash",
    "canonical_json",
    "measure_arguments",
    "parse_arguments",
    "project",
]
