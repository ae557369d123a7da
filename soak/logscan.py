"""Every log of the fleet, read after the run: a traceback anywhere (a JSON record's
``exception`` or a bare one), asyncio's complaints about tasks and unclosed resources, and for
the nodes (JSON logs) any line that is not one JSON object. Pure: text in, findings out."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SUSPICIOUS", "LogFindings", "scan_log"]

TRACEBACK = "Traceback (most recent call last)"
SUSPICIOUS = (
    "Task was destroyed but it is pending",
    "exception was never retrieved",
    "Exception in callback",
    "Unclosed client session",
    "Unclosed connection",
    "Unclosed connector",
    "was never awaited",
)
KEEP = 5  # examples kept per finding


@dataclass
class LogFindings:
    source: str
    lines: int = 0
    not_json: list[str] = field(default_factory=list)
    not_json_count: int = 0
    tracebacks: list[str] = field(default_factory=list)
    traceback_count: int = 0
    suspicious: list[str] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)  # error-level events by name
    warnings: Counter[str] = field(default_factory=Counter)

    @property
    def clean(self) -> bool:
        return not (self.not_json_count or self.traceback_count or self.suspicious)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "lines": self.lines,
            "not_json": self.not_json_count,
            "not_json_examples": self.not_json,
            "tracebacks": self.traceback_count,
            "traceback_examples": self.tracebacks,
            "suspicious": self.suspicious,
            "errors": dict(self.errors),
            "warnings": dict(self.warnings),
        }


def _head_and_tail(line: str) -> str:
    # A JSON log line carries its traceback in one field: the event is at the head, the
    # exception that names the cause at the tail.
    return line if len(line) <= 1400 else f"{line[:400]} ... {line[-1000:]}"


def scan_log(source: str, text: str, *, json_lines: bool) -> LogFindings:
    found = LogFindings(source)
    for line in text.splitlines():
        if not line.strip():
            continue
        found.lines += 1
        if TRACEBACK in line:
            found.traceback_count += 1
            if len(found.tracebacks) < KEEP:
                found.tracebacks.append(_head_and_tail(line))
        for needle in SUSPICIOUS:
            if needle in line and len(found.suspicious) < 20:
                found.suspicious.append(line[:400])
        if not json_lines:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            found.not_json_count += 1
            if len(found.not_json) < KEEP:
                found.not_json.append(line[:300])
            continue
        level = str(record.get("level", "")).lower()
        if level in ("error", "critical"):
            found.errors[str(record.get("event"))] += 1
        elif level == "warning":
            found.warnings[str(record.get("event"))] += 1
    return found
