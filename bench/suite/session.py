"""What every suite subcommand shares: goload built, the fleet started and stopped, the machine
described, JSON written, progress printed with an ETA.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from bench.goload_runner import ensure_goload
from bench.relay.procs import CLOCK_TICKS_PER_S
from bench.relay.stats import NOISY_OTHER_CORES
from bench.suite.fleet import Fleet
from bench.suite.measure import Run, Runner

__all__ = ["Suite", "machine_info", "open_suite", "progress_line", "write_json"]


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


class Suite:
    def __init__(self, fleet: Fleet, runner: Runner, began: float) -> None:
        self.fleet = fleet
        self.runner = runner
        self.began = began
        self.done = 0
        self.total = 0

    def measure(self, run: Run) -> list[dict[str, Any]]:
        records = self.runner.measure(run)
        self.done += 1
        for record in records:
            print(progress_line(record, self.done, self.total, self.runner.eta_s()), flush=True)
        return records


@contextlib.contextmanager
def open_suite(
    root: Path,
    out: Path,
    targets: list[str],
    *,
    deadline: float | None = None,
    baseline: Path | None = None,
    pin: bool = True,
) -> Iterator[Suite]:
    """goload built, the fleet for ``targets`` started (logs in ``<out>/logs``), all stopped on
    the way out, SIGTERM included. ``baseline``: the worktree ``gateway_base`` runs from."""
    began = time.monotonic()
    binary = ensure_goload(root)
    log_dir = out / "logs"
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with contextlib.ExitStack() as stack:
            fleet = Fleet.start(root, log_dir, targets, stack, baseline=baseline, pin=pin)
            runner = Runner(fleet, binary, deadline=deadline)
            runner.prime(targets)
            print(
                f"started {', '.join(fleet.children)} in {time.monotonic() - began:.0f} s "
                f"(logs in {log_dir})",
                file=sys.stderr,
                flush=True,
            )
            yield Suite(fleet, runner, began)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def progress_line(record: dict[str, Any], done: int, total: int, eta_s: float) -> str:
    cpu = record.get("relay_cpu_us_per_frame")
    other = record.get("other_cores")
    what = (
        f"{record['kind']} n={record['rounds']}"
        if record["kind"] == "pingpong"
        else f"{record['sessions']} sessions"
    )
    flags = " NOISY" if record.get("noisy") else ""
    flags += " (superseded)" if record.get("superseded") else ""
    return (
        f"  [{done}/{total}] {record['phase']} rep {record['rep'] + 1} {record['target']:<15} "
        f"{what}: p50 {record['p50_ms']} ms, p99 {record['p99_ms']} ms, "
        f"{'-' if cpu is None else f'{cpu:.0f}'} µs/frame, lost {record['lost']}, "
        f"other {'-' if other is None else f'{other:.2f}'} cores{flags}; "
        f"ETA {_minutes(eta_s)}"
    )


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_info(fleet: Fleet) -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "clock_ticks_per_s": CLOCK_TICKS_PER_S,
        "noisy_other_cores": NOISY_OTHER_CORES,
        "load_generator": "bench/goload (Go)",
        **fleet.describe(),
    }


def write_json(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
