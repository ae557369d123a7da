"""What a soak session's logic has at hand: its record, the shared clock and randomness, the
logs it writes to (latency samples, faults), the soak's stop signal, and the mailbox through
which the fault scheduler asks it to misbehave at its next turn."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from soak.records import Clock, FaultEntry, LatencySample, SessionRecord
from soak.schedule import FaultHit

__all__ = ["SessionContext", "SoakLogs"]


@dataclass
class SoakLogs:
    latencies: list[LatencySample] = field(default_factory=list)
    faults: list[FaultEntry] = field(default_factory=list)
    hits: list[FaultHit] = field(default_factory=list)  # each planned session fault's outcome

    def fault(self, entry: FaultEntry) -> FaultEntry:
        self.faults.append(entry)
        return entry


@dataclass
class SessionContext:
    record: SessionRecord
    rng: random.Random
    clock: Clock
    logs: SoakLogs
    stopping: asyncio.Event
    pending_fault: str | None = None  # set by the scheduler, taken at the next turn
    in_turn: bool = False  # a turn is under way (upstream faults aim for these)
    turn: str = ""  # what the current turn does, for the record of a turn that got stuck

    def take_fault(self) -> str | None:
        fault, self.pending_fault = self.pending_fault, None
        return fault

    def fault_done(self, kind: str, ok: bool = True, detail: str = "") -> None:
        """Log a fault this session met, as it happened."""
        now = self.clock.now()
        self.record.own_faults.append(kind)
        self.record.disturb(now)
        self.logs.fault(FaultEntry(now, kind, f"s{self.record.number}", ok, detail))

    def sample(self, kind: str, sent_at: float, at: float) -> None:
        self.logs.latencies.append(
            LatencySample(
                kind, self.record.provider, at, sent_at, (at - sent_at) * 1000, self.record.number
            )
        )

    def label(self) -> str:
        return f"s{self.record.number}t{self.record.turns}r{self.rng.randrange(10**6)}"
