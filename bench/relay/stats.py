"""The pure parts of ``scripts/bench relay``: frame stamps, percentiles, spreads, CPU arithmetic.

No sockets, no processes: everything here takes values (or the text of a ``/proc`` file) and
returns values, so it is unit-tested in ``tests/unit/bench/test_relay_stats.py``.

A bench frame is 20 ms of PCM16 at the provider's input rate (960 bytes at 24 kHz, 640 at
16 kHz): a 12-byte stamp (``MAGIC``, then the session index and the frame's sequence number as
little-endian u32) followed by a fixed filler pattern.
The relay must hand it back byte-identical; ``parse_frame`` says which frame it is and whether
the rest is intact. ``FrameReassembler`` cuts a byte stream back into frames, in case a relay
splits or merges audio on the way.
"""

from __future__ import annotations

import functools
import math
import statistics
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "FRAME_BYTES",
    "MAGIC",
    "NOISY_OTHER_CORES",
    "CpuSnapshot",
    "CpuUsage",
    "FrameReassembler",
    "Spread",
    "Stall",
    "StampedFrame",
    "SystemCpuTicks",
    "counter_deltas",
    "cpu_us_per_frame",
    "cpu_usage",
    "paired_differences",
    "parse_counters",
    "parse_frame",
    "parse_process_cpu_ticks",
    "parse_system_cpu_ticks",
    "percentile",
    "stall_episodes",
    "stamp_frame",
]

FRAME_BYTES = 960  # the default: 20 ms of 24 kHz mono PCM16
MAGIC = b"RB01"
_STAMP = struct.Struct("<4sII")  # magic, session index, sequence number: 12 bytes


@functools.cache
def _filler(frame_bytes: int) -> bytes:
    """What follows the stamp in a frame of ``frame_bytes``.

    Consecutive filler bytes differ by 31, so the magic ("R" → "B" is −16) never occurs inside it.
    """
    if frame_bytes < _STAMP.size:
        raise ValueError(f"a frame needs at least {_STAMP.size} bytes, not {frame_bytes}")
    return bytes((index * 31 + 7) & 0xFF for index in range(frame_bytes - _STAMP.size))


# A run whose other processes used more than this many cores on average is flagged noisy.
NOISY_OTHER_CORES = 0.10


@dataclass(frozen=True)
class StampedFrame:
    session: int
    sequence: int
    intact: bool  # the filler came back byte-identical


def stamp_frame(session: int, sequence: int, frame_bytes: int = FRAME_BYTES) -> bytes:
    """The frame number ``sequence`` of session ``session``, ``frame_bytes`` long."""
    return _STAMP.pack(MAGIC, session, sequence) + _filler(frame_bytes)


def parse_frame(frame: bytes, frame_bytes: int = FRAME_BYTES) -> StampedFrame | None:
    """Which frame this is (``None`` when it carries no stamp at all); intact: byte-identical
    to a ``frame_bytes`` frame."""
    if len(frame) < _STAMP.size or not frame.startswith(MAGIC):
        return None
    _, session, sequence = _STAMP.unpack_from(frame)
    intact = len(frame) == frame_bytes and frame[_STAMP.size :] == _filler(frame_bytes)
    return StampedFrame(session, sequence, intact)


class FrameReassembler:
    """Cuts a stream of audio messages back into whole bench frames of ``frame_bytes``.

    A message of exactly one frame that starts with the stamp passes straight through. Anything
    else is buffered; the buffer is realigned on the next stamp when it does not start with one
    (the skipped bytes are counted in ``skipped_bytes``), and ``rechunked`` counts the messages
    that were not exactly one frame.
    """

    def __init__(self, frame_bytes: int = FRAME_BYTES) -> None:
        self.frame_bytes = frame_bytes
        self._buffer = bytearray()
        self.rechunked = 0
        self.skipped_bytes = 0

    def feed(self, message: bytes) -> list[bytes]:
        size = self.frame_bytes
        if not self._buffer and len(message) == size and message.startswith(MAGIC):
            return [message]
        if len(message) != size:
            self.rechunked += 1
        buffer = self._buffer
        buffer += message
        frames: list[bytes] = []
        while len(buffer) >= len(MAGIC):
            if not buffer.startswith(MAGIC):
                found = buffer.find(MAGIC)
                skip = found if found >= 0 else len(buffer) - len(MAGIC) + 1
                self.skipped_bytes += skip
                del buffer[:skip]
                continue
            if len(buffer) < size:
                break
            frames.append(bytes(buffer[:size]))
            del buffer[:size]
        return frames


def percentile(values: Sequence[float], percent: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default method)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= percent <= 100:
        raise ValueError(f"percent out of range: {percent}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * percent / 100
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


@dataclass(frozen=True)
class Spread:
    """Median with the minimum and maximum over repetitions."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("spread of no values")
        return cls(statistics.median(values), min(values), max(values))

    def render(self, decimals: int) -> str:
        return f"{self.median:.{decimals}f} [{self.low:.{decimals}f}–{self.high:.{decimals}f}]"

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.low, "max": self.high}


@dataclass(frozen=True)
class Stall:
    """Slow frames that came back close together: one pause somewhere, seen by many sessions."""

    at_s: float  # when the first of them came back, from the start of the run
    frames: int
    sessions: int
    worst_s: float


def stall_episodes(slow_frames: Sequence[tuple[float, int, float]], gap_s: float) -> list[Stall]:
    """Groups ``(arrived_at, session, round_trip)`` of slow frames that arrive < ``gap_s`` apart."""
    stalls: list[Stall] = []
    group: list[tuple[float, int, float]] = []

    def close_group() -> None:
        if group:
            sessions = len({session for _, session, _ in group})
            worst = max(trip for _, _, trip in group)
            stalls.append(Stall(group[0][0], len(group), sessions, worst))
            group.clear()

    for frame in sorted(slow_frames):
        if group and frame[0] - group[-1][0] >= gap_s:
            close_group()
        group.append(frame)
    close_group()
    return stalls


def paired_differences(minuends: Sequence[float], subtrahends: Sequence[float]) -> list[float]:
    """``a[i] − b[i]`` for repetitions measured side by side (e.g. gateway p50 − direct p50)."""
    if len(minuends) != len(subtrahends):
        raise ValueError("paired differences need as many values on each side")
    return [a - b for a, b in zip(minuends, subtrahends, strict=True)]


def cpu_us_per_frame(cpu_seconds: float, frame_pairs: int) -> float | None:
    """CPU microseconds per frame pair relayed (``None`` when nothing was relayed)."""
    if frame_pairs <= 0:
        return None
    return cpu_seconds / frame_pairs * 1e6


def parse_process_cpu_ticks(stat_text: str) -> int:
    """utime + stime, in clock ticks, from the text of ``/proc/<pid>/stat``."""
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ")".
    fields = stat_text.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


@dataclass(frozen=True)
class SystemCpuTicks:
    """All CPUs together, from the first line of ``/proc/stat``, in clock ticks."""

    tasks: int  # user + nice + system: time charged to processes (guest time is inside user)
    interrupts: int  # irq + softirq
    steal: int


def parse_system_cpu_ticks(proc_stat_text: str) -> SystemCpuTicks:
    first = proc_stat_text.splitlines()[0].split()
    if first[0] != "cpu":
        raise ValueError("not the text of /proc/stat")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    return SystemCpuTicks(tasks=user + nice + system, interrupts=irq + softirq, steal=steal)


@dataclass(frozen=True)
class CpuSnapshot:
    wall_s: float  # a monotonic clock
    processes: Mapping[str, int]  # role (gateway, fake, load) → utime + stime ticks
    system: SystemCpuTicks


@dataclass(frozen=True)
class CpuUsage:
    """What was used between two snapshots: seconds per role, and cores for the rest."""

    wall_s: float
    process_s: Mapping[str, float]
    other_cores: float  # processes that are not ours, on average over the wall time
    interrupt_cores: float  # irq + softirq (loopback traffic, ours included)
    steal_cores: float

    @property
    def noisy(self) -> bool:
        return self.other_cores > NOISY_OTHER_CORES


def cpu_usage(before: CpuSnapshot, after: CpuSnapshot, clock_ticks_per_s: int) -> CpuUsage:
    wall = after.wall_s - before.wall_s
    if wall <= 0:
        raise ValueError("the second snapshot must come after the first")
    process_ticks = {
        role: after.processes[role] - before.processes.get(role, 0) for role in after.processes
    }
    ours = sum(process_ticks.values())
    tasks = after.system.tasks - before.system.tasks

    def cores(ticks: int) -> float:
        return ticks / clock_ticks_per_s / wall

    return CpuUsage(
        wall_s=wall,
        process_s={role: ticks / clock_ticks_per_s for role, ticks in process_ticks.items()},
        other_cores=cores(max(0, tasks - ours)),
        interrupt_cores=cores(after.system.interrupts - before.system.interrupts),
        steal_cores=cores(after.system.steal - before.system.steal),
    )


def parse_counters(metrics_text: str, prefix: str = "gateway_") -> dict[str, float]:
    """The ``*_total`` counters of a Prometheus text page, keyed by name and labels."""
    counters: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if not line.startswith(prefix):
            continue
        key, _, value = line.rpartition(" ")
        if key.split("{", 1)[0].endswith("_total"):
            counters[key] = float(value)
    return counters


def counter_deltas(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """What each counter gained in between (only those that moved)."""
    deltas = {key: value - before.get(key, 0.0) for key, value in after.items()}
    return {key: delta for key, delta in deltas.items() if delta}
