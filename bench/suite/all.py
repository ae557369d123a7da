"""``scripts/bench all``: relay, capacity and dispatch in one unattended go, then the plots.

Relay and capacity share one fleet (the peers start once); it is stopped before the dispatch
bench (``bench.dispatch.bench``) runs in a process of its own. The whole must finish in under 15
minutes on a 2-core machine: the plans are budgeted for it (``ALL_BUDGET_S``); noisy runs are
rerun only while the ETA leaves room. Writes ``relay.json``, ``capacity.json``,
``dispatch.json`` and ``summary.md`` under ``<out>``, and the PNG plots into ``docs/bench/``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.suite import capacity as suite_capacity
from bench.suite import relay as suite_relay
from bench.suite.capacity import CapacityPlan
from bench.suite.relay import RelayPlan
from bench.suite.session import open_suite, write_json

__all__ = ["ALL_BUDGET_S", "main"]

ALL_BUDGET_S = 14 * 60.0  # reruns stop when the ETA would cross it
DISPATCH_ESTIMATE_S = {False: 200.0, True: 40.0}  # by quick; the dispatch bench's own plan
DISPATCH_TIMEOUT_S = 600.0


def _caption(report: dict[str, Any]) -> str:
    machine = report["machine"]
    return f"{machine['date'][:10]}, {machine['cpu_model']}, {machine['cpu_count']} cores"


def main(root: Path, out: Path, docs: Path, *, quick: bool = False) -> int:
    began = time.monotonic()
    relay_plan = RelayPlan.quick() if quick else RelayPlan()
    capacity_plan = CapacityPlan.quick() if quick else CapacityPlan()
    targets = list(dict.fromkeys([*relay_plan.targets, *capacity_plan.targets]))
    deadline = began + ALL_BUDGET_S - DISPATCH_ESTIMATE_S[quick]
    with open_suite(root, out, targets, deadline=deadline) as suite:
        # the ramp (at most) and dispatch count toward the ETA from the start; run_relay adds
        # its own runs
        suite.runner.plan(capacity_plan.upper_bound_runs())
        suite.runner.planned_s += DISPATCH_ESTIMATE_S[quick]
        relay_s = sum(run.estimate_s() for run in relay_plan.runs())
        print(
            f"all: started in {time.monotonic() - began:.0f} s; about "
            f"{(suite.runner.eta_s() + relay_s) / 60:.0f} min to go at most (relay, capacity "
            f"ramp, dispatch); budget {ALL_BUDGET_S / 60:.0f} min",
            file=sys.stderr,
            flush=True,
        )
        relay = suite_relay.run_relay(suite, relay_plan)
        write_json(out / "relay.json", relay)
        suite.runner.planned_s -= sum(r.estimate_s() for r in capacity_plan.upper_bound_runs())
        capacity = suite_capacity.run_capacity(suite, capacity_plan)
        write_json(out / "capacity.json", capacity)
    dispatch_status = _run_dispatch(out, quick=quick)
    caption = _caption(relay)
    written = _plots(relay, capacity, docs, caption)
    sections = [
        f"# Benchmarks — {caption}",
        "## Relay\n\n" + suite_relay.render(relay),
        "## Capacity\n\n" + suite_capacity.render(capacity),
    ]
    dispatch_table = _dispatch_table(out / "dispatch.json")
    if dispatch_table:
        sections.append("## Dispatch\n\n" + dispatch_table)
    summary = "\n\n".join(sections) + "\n"
    (out / "summary.md").write_text(summary)
    print(summary)
    elapsed = time.monotonic() - began
    print(
        f"all: {elapsed / 60:.1f} min; tables in {out / 'summary.md'}; plots: "
        f"{', '.join(str(p) for p in written) or 'none'}"
    )
    if elapsed > 15 * 60:
        print("WARNING: over the 15-minute budget", file=sys.stderr)
    return dispatch_status


def _run_dispatch(out: Path, *, quick: bool) -> int:
    """The dispatch bench in a process of its own: in this one, which has run the relay and
    capacity suites, its dispatcher (and its timing) ran measurably slower."""
    argv = [sys.executable, "-m", "bench.dispatch.bench", "--out", str(out)]
    if quick:
        argv.append("--quick")
    try:
        return subprocess.run(argv, check=False, timeout=DISPATCH_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        print(f"dispatch bench: over {DISPATCH_TIMEOUT_S:.0f} s, stopped", file=sys.stderr)
        return 1


def _dispatch_table(path: Path) -> str | None:
    """The dispatch bench's own table, from its JSON (``bench.dispatch.stats.render``)."""
    try:
        report = json.loads(path.read_text())
        from bench.dispatch.stats import render_report

        return render_report(report)
    except (OSError, ValueError, KeyError, ImportError) as error:
        print(f"no dispatch table: {error}", file=sys.stderr)
        return None


def _plots(relay: dict[str, Any], capacity: dict[str, Any], docs: Path, caption: str) -> list[Path]:
    try:
        from bench.suite.plots import render_plots
    except ImportError as error:  # matplotlib missing: scripts/bench installs the bench extra
        print(f"no plots: {error}", file=sys.stderr)
        return []
    return render_plots(relay, capacity, docs, caption)
