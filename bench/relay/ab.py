"""Relay CPU per frame pair, row against row, on gateways already running: the loop that
``scripts/bench budgets`` and ``scripts/bench console`` share.

A row is a gateway to load (its base URL and the process whose CPU is measured) and what runs
beside the load while it is measured (``beside``: nothing, or the console's clients). Each
gateway is warmed once (2 sessions × 0.5 s, not recorded); then ``reps`` repetitions, the rows
in their order, reversed every other repetition. A run is ``sessions`` sessions of 20 ms frames
for ``seconds`` (``bench.relay.load``, measured from each session's first frame), with no
garbage collection in this process; then 0.3 s for the closed sessions to go. Several rows may
measure the same process (the same gateway with and without something beside it).

A record per run: ``part``, ``rep``, ``target`` (the row), ``sessions``, ``frames_back``,
``lost``, ``cpu_us_per_frame`` (the row's process's CPU over the measured window, divided by
the frame pairs back), ``p99_ms`` (the round trip), ``other_cores`` (every other process on the
machine, in cores), and what ``beside`` reported about the same window.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from bench.relay.load import LoadPlan, run_load
from bench.relay.procs import CLOCK_TICKS_PER_S, collector_paused, take_snapshot
from bench.relay.stats import cpu_us_per_frame, cpu_usage, percentile

__all__ = [
    "Beside",
    "RelayLoad",
    "Report",
    "Row",
    "median_of",
    "per_rep",
    "ratios",
    "relay_rows",
    "turning",
    "ws_url",
]

# What ran beside a run, over its measured window (two monotonic times): fields of its record.
Report = Callable[[float, float], dict[str, Any]]
Beside = Callable[[], AbstractAsyncContextManager[Report]]


@dataclass(frozen=True)
class Row:
    name: str
    url: str  # the gateway's base URL, http://…
    pid: int  # the process measured
    beside: Beside | None = None


@dataclass(frozen=True)
class RelayLoad:
    sessions: int
    seconds: float
    fps: float = 50.0
    bearer: str | None = None  # the sessions' credential, when the gateway checks one


def ws_url(url: str) -> str:
    """The native session endpoint of a gateway at ``url``."""
    return f"{url.replace('http://', 'ws://', 1)}/v1/session"


def turning(names: Sequence[str], rep: int) -> Sequence[str]:
    """The rows' order in repetition ``rep``: as given, reversed every other one."""
    return names if rep % 2 == 0 else names[::-1]


async def relay_rows(
    rows: Sequence[Row], reps: int, load: RelayLoad, part: str = "relay"
) -> list[dict[str, Any]]:
    """Every row ``reps`` times, interleaved; one record per run (printed as it comes)."""
    by_name = {row.name: row for row in rows}
    # one snapshot entry per process: rows measuring the same one share it
    role_of: dict[int, str] = {}
    for row in rows:
        role_of.setdefault(row.pid, row.name)
    pids = {role: pid for pid, role in role_of.items()}

    def snapshot() -> Any:
        return take_snapshot(pids)

    for url in dict.fromkeys(row.url for row in rows):  # warm each gateway once, not recorded
        await run_load(_plan(url, load, 2, 0.5, warmup=10), snapshot)
    records = []
    for rep in range(reps):
        for name in turning([row.name for row in rows], rep):
            row = by_name[name]
            plan = _plan(row.url, load, load.sessions, load.seconds, warmup=0)
            beside: dict[str, Any] = {}
            if row.beside is None:
                with collector_paused():
                    result = await run_load(plan, snapshot)
            else:
                async with row.beside() as report:
                    with collector_paused():
                        result = await run_load(plan, snapshot)
                assert result.before is not None
                assert result.after is not None
                beside = report(result.before.wall_s, result.after.wall_s)
            assert result.before is not None
            assert result.after is not None
            usage = cpu_usage(result.before, result.after, CLOCK_TICKS_PER_S)
            record = {
                "part": part,
                "rep": rep,
                "target": name,
                "sessions": load.sessions,
                "frames_back": result.returned,
                "lost": result.lost,
                "cpu_us_per_frame": cpu_us_per_frame(
                    usage.process_s[role_of[row.pid]], result.returned
                ),
                "p99_ms": round(percentile(result.round_trips_s, 99) * 1000, 4),
                "other_cores": round(usage.other_cores, 3),
                **beside,
            }
            records.append(record)
            print(f"  {record}", file=sys.stderr, flush=True)
            await asyncio.sleep(0.3)  # the closed sessions go before the next run
    return records


def _plan(url: str, load: RelayLoad, sessions: int, seconds: float, *, warmup: int) -> LoadPlan:
    return LoadPlan("gateway", ws_url(url), sessions, load.fps, seconds, warmup, bearer=load.bearer)


def per_rep(
    records: Sequence[Mapping[str, Any]], part: str, field: str
) -> dict[int, dict[str, float]]:
    """``field`` of every run of ``part``, by repetition, then by row (runs without it left out)."""
    by_rep: dict[int, dict[str, float]] = {}
    for record in records:
        if record["part"] == part and record[field] is not None:
            by_rep.setdefault(record["rep"], {})[record["target"]] = float(record[field])
    return by_rep


def ratios(by_rep: Mapping[int, Mapping[str, float]], over: str, under: str) -> list[float]:
    """``over`` ÷ ``under`` in each repetition (in order of repetition)."""
    return [by_rep[rep][over] / by_rep[rep][under] for rep in sorted(by_rep)]


def median_of(by_rep: Mapping[int, Mapping[str, float]], name: str) -> float:
    return statistics.median(values[name] for values in by_rep.values())
