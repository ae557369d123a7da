"""What the soak's driver writes down while it runs: each session's story, each fault, each
latency sample. Plain data; the checks (``invariants``) and the report read it afterwards."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CLIENT_FAULT_CODES",
    "END_REASONS",
    "CallSeen",
    "Clock",
    "FailoverSeen",
    "FaultEntry",
    "LatencySample",
    "SessionRecord",
]

# session.ended reasons of the protocol (docs/protocol.md section 6)
END_REASONS = frozenset(
    {"client", "intent", "idle_timeout", "max_duration", "upstream_failed", "shutdown", "error"}
)
# Errors a client earns with its own bad input: another session must never see them.
CLIENT_FAULT_CODES = frozenset(
    {"invalid_json", "invalid_event", "unknown_event", "invalid_audio", "payload_too_large"}
)


class Clock:
    """Seconds since the soak began (monotonic). ``time.monotonic`` is the machine's
    ``CLOCK_MONOTONIC``, the same in every process: another process's monotonic times convert
    with ``from_monotonic``; wall-clock times (the nodes' log lines) with ``from_wall``."""

    def __init__(self) -> None:
        self.origin = time.monotonic()
        self.wall_origin = time.time()

    def now(self) -> float:
        return time.monotonic() - self.origin

    def from_monotonic(self, at: float) -> float:
        return at - self.origin

    def from_wall(self, at: float) -> float:
        return at - self.wall_origin


@dataclass
class CallSeen:
    name: str
    started_at: float
    finished_at: float | None = None
    ok: bool | None = None
    run: str | None = None  # the execution's key, from tool.finished's data
    error_type: str | None = None
    answered_after: bool = False  # a reply of the model completed after tool.finished


@dataclass
class FailoverSeen:
    """A ``session.provider_changed`` a client saw: its session moved to another target of its
    model alias without reconnecting."""

    at: float
    reason: str
    provider: str
    previous: str
    cut: bool = False  # a reply being spoken ended ``interrupted`` just before it

    def as_dict(self) -> dict[str, Any]:
        return {
            "at_s": round(self.at, 3),
            "reason": self.reason,
            "provider": self.provider,
            "previous": self.previous,
            "cut": self.cut,
        }


@dataclass
class LatencySample:
    kind: str  # "text", "voice", "phone"
    provider: str
    at: float  # when the reply began, on the soak's clock
    sent_at: float  # when the turn was sent
    ms: float
    session: int  # SessionRecord.number


@dataclass
class FaultEntry:
    at: float
    kind: str
    target: str  # a session ("s12"), a node ("a"), "redis", an upstream
    ok: bool = True
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "at_s": round(self.at, 3),
            "kind": self.kind,
            "target": self.target,
            "ok": self.ok,
            "detail": self.detail,
        }


@dataclass
class SessionRecord:
    number: int
    kind: str  # "voice_openai", "text_chat", "phone", …
    provider: str
    tag: str
    created_at: float
    session_id: str | None = None
    started_at: float | None = None  # the first session.started
    nodes: list[str] = field(default_factory=list)  # where it ran, in order
    end_reason: str | None = None
    ended_at: float | None = None
    lost: str | None = None  # began, then neither ended nor resumed: why
    refused: str | None = None  # never began: why
    errors: list[tuple[float, str]] = field(default_factory=list)
    own_faults: list[str] = field(default_factory=list)
    bad_input: bool = False  # it sent malformed or oversized frames on purpose
    disturbed: list[float] = field(default_factory=list)  # faults, moves and resumes it met
    resumes: int = 0
    recoveries: int = 0  # resumes that rebuilt it after its node was lost
    turns: int = 0
    barge_ins: int = 0
    calls: dict[str, CallSeen] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # what the driver saw go wrong
    slot: int = 0  # the driver's slot that ran it
    ordinal: int = 1  # the slot's n-th session (with the slot, fixed by the seed: its kind)
    # Routing: the model alias it asked for (None: a provider alone), the provider serving it
    # now (``session.started``, ``session.provider_changed``), the one it first started on.
    alias: str | None = None
    upstream: str = ""
    started_on: str | None = None
    failovers: list[FailoverSeen] = field(default_factory=list)
    start_errors: list[tuple[float, str]] = field(default_factory=list)  # refused starts: codes
    # What legitimately ends an output owed by the model: a barge-in, a move, a lost socket, a
    # resume (the failover judgment excuses a stall these met).
    breaks: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.upstream:
            self.upstream = self.provider

    def disturb(self, at: float) -> None:
        self.disturbed.append(at)

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def broke(self, at: float, what: str) -> None:
        self.breaks.append((at, what))
