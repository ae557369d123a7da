"""``scripts/bench capacity``: how many sessions at 50 frames/s one core carries, per target.

A ramp of session counts, level by level: ``direct`` first (the reference for "added"), then
every target still in the race, in alternating order. A level passes when every frame came back
intact and p99 added over ``direct`` at that level is ≤ 10 ms; a target leaves the ramp at its
first failed level (a noisy failure is rerun once first). The knee is its last passed level:
with the relaying process pinned to one core, that is its sessions per core. Each run also
gives session setup times (connect to session ready, p50/p99) and resident memory per session
(``VmRSS`` of the relaying process before the run and once every session is open, ÷ sessions).
Results: a table, ``<out>/capacity.json``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.suite.measure import Run
from bench.suite.report import capacity_table, target_notes
from bench.suite.session import Suite, machine_info, open_suite, write_json
from bench.suite.stats import capacity_rows, level_passed
from bench.suite.targets import DEFAULT_TARGETS, SPECS

__all__ = ["CapacityPlan", "main", "render", "run_capacity"]

# The compression row is a relay-cost question, not a capacity one; so is /v1/realtime's (its
# upstream session starts at the first audio, so its setup time would not compare either), and
# its ramp would not fit the budget of `all`: `capacity --targets gateway_compat` runs it.
CAPACITY_TARGETS = tuple(
    t for t in DEFAULT_TARGETS if t not in ("gateway_deflate", "gateway_compat")
)


@dataclass(frozen=True)
class CapacityPlan:
    targets: tuple[str, ...] = CAPACITY_TARGETS
    levels: tuple[int, ...] = (50, 100, 150, 200, 250, 300, 400)
    seconds: float = 5.0
    warmup: int = 50
    fps: float = 50.0

    @classmethod
    def quick(cls, targets: tuple[str, ...] = CAPACITY_TARGETS) -> CapacityPlan:
        return cls(targets, levels=(5, 10), seconds=3.0, warmup=20)

    def run(self, target: str, sessions: int) -> Run:
        return Run(
            "capacity",
            "load",
            target,
            0,
            sessions=sessions,
            fps=self.fps,
            seconds=self.seconds,
            warmup=self.warmup,
        )

    def upper_bound_runs(self) -> list[Run]:
        """Every run if every target passed every level: the ETA's upper bound."""
        return [self.run(t, n) for n in self.levels for t in self.targets]


def run_capacity(suite: Suite, plan: CapacityPlan, limit_ms: float = 10.0) -> dict[str, Any]:
    began = time.monotonic()
    upper = plan.upper_bound_runs()
    suite.runner.plan(upper)
    suite.total += len(upper)
    racing = [t for t in plan.targets if t != "direct"]
    records: list[dict[str, Any]] = []
    cut_at: int | None = None
    for index, sessions in enumerate(plan.levels):
        if not _fits(suite, [plan.run(t, sessions) for t in ["direct", *racing]]):
            cut_at = sessions
            _unplan(
                suite, [plan.run(t, n) for n in plan.levels[index:] for t in ["direct", *racing]]
            )
            print(
                f"capacity: ramp stopped before {sessions} sessions: time budget", file=sys.stderr
            )
            break
        direct_records = suite.measure(plan.run("direct", sessions))
        records += direct_records
        direct = _final(direct_records)
        order = racing if index % 2 == 0 else racing[::-1]
        for target in list(order):
            level_records = suite.measure(plan.run(target, sessions))
            records += level_records
            if not level_passed(_final(level_records), direct, limit_ms)[0]:
                racing.remove(target)
                _unplan(suite, [plan.run(target, n) for n in plan.levels[index + 1 :]])
        if not racing:
            _unplan(suite, [plan.run("direct", n) for n in plan.levels[index + 1 :]])
            break
    return {
        "machine": machine_info(suite.fleet),
        "plan": asdict(plan),
        "knee_added_p99_ms": limit_ms,
        "cut_by_budget_at": cut_at,
        "summary": capacity_rows(records, list(plan.targets), plan.fps, limit_ms),
        "runs": records,
        "elapsed_s": round(time.monotonic() - began, 1),
    }


def _final(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The record a run kept (a rerun's quieter one)."""
    kept = [r for r in records if not r.get("superseded")]
    return kept[-1]


def _fits(suite: Suite, runs: list[Run]) -> bool:
    deadline = suite.runner.deadline
    if deadline is None:
        return True
    needed = sum(run.estimate_s() for run in runs) * suite.runner.speed
    return time.monotonic() + needed <= deadline


def _unplan(suite: Suite, runs: list[Run]) -> None:
    """Runs the ramp will skip: out of the ETA and of the count."""
    suite.runner.planned_s = max(0.0, suite.runner.planned_s - sum(r.estimate_s() for r in runs))
    suite.total -= len(runs)


def render(report: dict[str, Any]) -> str:
    plan = report["plan"]
    table = capacity_table(report["summary"], plan["fps"], max(plan["levels"]))
    notes = target_notes([t for t in plan["targets"] if t in SPECS])
    cut = report.get("cut_by_budget_at")
    if cut is not None:
        table += f"\n\nThe ramp stopped before {cut} sessions: the time budget ran out."
    return (
        f"{table}\n\nramp levels {plan['levels']}, {plan['seconds']:g} s measured per level "
        f"after {plan['warmup']} frames; by CPU = 10⁶ ÷ (CPU µs per frame pair at the knee × "
        f"{plan['fps']:g}); RSS per session = (the relaying process tree's RSS during the "
        "window − its RSS when the suite first measured it, idle) ÷ sessions. Rows matched "
        "by bytes through a resampler (gateway_16k) may lose "
        "the frames it still holds at the end and get that many frames of latency on top of "
        f"the limit.\n\n{notes}"
    )


def main(root: Path, out: Path, plan: CapacityPlan, baseline: Path | None = None) -> int:
    with open_suite(root, out, list(plan.targets), baseline=baseline) as suite:
        report = run_capacity(suite, plan)
    write_json(out / "capacity.json", report)
    print(render(report))
    print(f"\nraw runs in {out / 'capacity.json'}")
    return 0
