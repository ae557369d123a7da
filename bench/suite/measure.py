"""One measured run of the suite: the Go load generator against one target, CPU and memory
read from ``/proc`` at the edges of its measured window; a noisy run is rerun once.

The load generator prints ``WINDOW START`` when its first measured frame is about to go and
``WINDOW END`` when its last one went (``bench.goload_runner``); CPU ticks of every role are
read at both lines: the relaying process with its descendants (``relay``), the fake when it is
not the relaying process, the other targets' processes (idle), the load generator and this
harness. What the machine spent beyond those is "other" CPU: a run where it exceeds
``NOISY_OTHER_CORES`` is flagged and, when the budget allows, rerun once; the quieter of the
two is kept and the other marked ``superseded``. Resident memory of the relaying process is
read before the load generator starts and when its window opens (every session open by then).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bench.goload_runner import run_goload
from bench.relay.procs import CLOCK_TICKS_PER_S
from bench.relay.stats import CpuSnapshot, cpu_usage
from bench.suite.fleet import Fleet
from bench.suite.procs import children_named, process_tree, tree_rss_kb, tree_snapshot
from bench.suite.stats import run_record
from bench.suite.targets import SPECS, load_args, pingpong_args

__all__ = ["Run", "Runner"]

_GRACE_S = 2.0
_PAUSE_S = 0.3  # closed sessions wind down before the next run


@dataclass(frozen=True)
class Run:
    phase: str  # relay | capacity
    kind: Literal["pingpong", "load"]
    target: str
    rep: int
    sessions: int = 1
    rounds: int = 0  # pingpong
    fps: float = 50.0
    seconds: float = 0.0  # load: measured
    warmup: int = 100  # pingpong: round trips; load: frames per session

    def estimate_s(self) -> float:
        """A rough duration, for the ETA."""
        spec = SPECS[self.target]
        if self.kind == "pingpong":
            per_trip = 0.025 if spec.paced else 0.0008
            return 0.5 + (self.rounds + self.warmup) * per_trip + _PAUSE_S
        opening = 0.2 + self.sessions * 0.004
        waiting = _GRACE_S if spec.held_back_frames else 0.0  # for frames that never come
        return opening + self.warmup / self.fps + self.seconds + 0.6 + waiting + _PAUSE_S

    def timeout_s(self) -> float:
        return 60.0 + 3 * self.estimate_s()


class Runner:
    """Runs ``Run``s on a fleet with one goload binary; keeps the ETA and the time budget."""

    def __init__(
        self,
        fleet: Fleet,
        binary: Path,
        *,
        deadline: float | None = None,  # time.monotonic() after which noisy runs are kept
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.fleet = fleet
        self.binary = binary
        self.deadline = deadline
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.planned_s = 0.0  # estimates of what is still to run
        self.speed = 1.0  # measured ÷ estimated, so far

    def plan(self, runs: list[Run]) -> None:
        self.planned_s += sum(run.estimate_s() for run in runs)

    def eta_s(self) -> float:
        return self.planned_s * self.speed

    def prime(self, targets: list[str]) -> None:
        """A few unrecorded round trips and sessions through each target first: imports,
        first connections and caches warmed, as for any long-running server."""
        for target in targets:
            spec = self.fleet.endpoints[target].spec
            if spec.pingpong:
                self._once(Run("prime", "pingpong", target, 0, rounds=50, warmup=10))
            self._once(Run("prime", "load", target, 0, sessions=5, seconds=0.5, warmup=10))

    def measure(self, run: Run) -> list[dict[str, Any]]:
        """The run's record, preceded by a superseded one when it was rerun for noise."""
        began = time.monotonic()
        first = self._once(run)
        records = [first]
        if first.get("noisy") and self._may_rerun(run):
            self.log(f"    noisy ({first['other_cores']:.2f} other cores): rerunning once")
            second = self._once(run)
            quieter = min((first, second), key=lambda r: float(r.get("other_cores") or 0.0))
            for record in (first, second):
                record["superseded"] = record is not quieter
            records.append(second)
        estimate = run.estimate_s()
        self.planned_s = max(0.0, self.planned_s - estimate)
        taken = time.monotonic() - began
        for record in records:
            record["took_s"] = round(taken / len(records), 2)
        self.speed = 0.8 * self.speed + 0.2 * (taken / max(estimate, 0.1))
        return records

    def _may_rerun(self, run: Run) -> bool:
        if self.deadline is None:
            return True
        return time.monotonic() + run.estimate_s() + self.eta_s() < self.deadline

    def _once(self, run: Run) -> dict[str, Any]:
        fleet = self.fleet
        endpoint = fleet.endpoints[run.target]
        spec = endpoint.spec
        fleet.check()
        fleet.place(run.target)
        relay = process_tree(endpoint.pid)
        fake = fleet.children["fake"].pid
        roles: dict[str, list[int]] = {"relay": relay, "harness": [os.getpid()]}
        if fake not in relay:
            roles["fake"] = process_tree(fake)
        roles["peers"] = [pid for pid in fleet.other_pids(endpoint.pid) if pid not in relay]
        roles["peers"] = [pid for pid in roles["peers"] if pid not in roles.get("fake", [])]
        snapshots: dict[str, CpuSnapshot] = {}
        if endpoint.pid not in fleet.idle_rss_kb:
            fleet.idle_rss_kb[endpoint.pid] = tree_rss_kb(endpoint.pid)
        rss = {"before": fleet.idle_rss_kb[endpoint.pid]}

        def window_start() -> None:
            roles["load"] = children_named("goload")
            snapshots["before"] = tree_snapshot(roles)
            rss["window"] = tree_rss_kb(endpoint.pid)

        def window_end() -> None:
            snapshots["after"] = tree_snapshot(roles)

        if run.kind == "pingpong":
            args = pingpong_args(
                spec, endpoint.url, endpoint.headers, run.rounds, run.warmup, run.timeout_s()
            )
        else:
            args = load_args(
                spec,
                endpoint.url,
                endpoint.headers,
                sessions=run.sessions,
                fps=run.fps,
                seconds=run.seconds,
                warmup=run.warmup,
                grace_s=_GRACE_S,
                timeout_s=run.timeout_s(),
            )
        cores = fleet.cores
        try:
            raw = run_goload(
                self.binary,
                args,
                on_window_start=window_start,
                on_window_end=window_end,
                timeout_s=run.timeout_s() + 10,
                cpu=cores.load_core if cores else None,
            ).raw
            failure = None
        except RuntimeError as error:  # one failed run must not end an unattended suite
            raw, failure = {}, str(error)[-1000:]
            self.log(f"    {run.target}: the load generator failed: {failure.splitlines()[0]}")
        usage = None
        if "before" in snapshots and "after" in snapshots:
            usage = cpu_usage(snapshots["before"], snapshots["after"], CLOCK_TICKS_PER_S)
        record = run_record(asdict(run), raw, usage, rss, spec.held_back_frames)
        if failure is not None:
            record["failed"] = failure
        time.sleep(_PAUSE_S)
        fleet.check()  # a relay that died ends the suite: every later run would fail
        return record
