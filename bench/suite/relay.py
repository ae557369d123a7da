"""``scripts/bench relay``: latency added and CPU per frame pair, every target, same upstream.

Per repetition, targets interleaved (the order reversed every other repetition):

1. ping-pong: ``rounds`` serial round trips of one session (after ``warmup`` unmeasured ones);
   the paced Pipecat row does fewer (``paced_rounds``): each of its round trips waits out its
   playback clock;
2. load: for each ``LoadLevel``, ``sessions`` × ``fps`` for ``seconds``, every target of that
   level, measured from each session's first frame (``load_warmup`` 0: a session's start is
   part of what a client lives through; the slowest frame of the sessions' first seconds is
   reported on its own, beside their set-up).

Added latency is over ``direct`` in the same repetition. CPU per frame pair is the relaying
process's CPU over the measured window divided by the frames it relayed; each table shows it
beside p50, p99 and the slowest frame. Ratios per repetition compare ``gateway_compat``'s tail
with ``gateway``'s, and each row with its ``--baseline`` row. Results: tables on stdout,
``<out>/relay.json`` with every run. ``--provider gemini`` is the older direct-vs-gateway
bench (``bench.relay.bench``, Python load generator): the Go one speaks no Gemini.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.suite.measure import Run
from bench.suite.report import cpu_table, latency_table, ratios_block, target_notes
from bench.suite.session import Suite, machine_info, open_suite, write_json
from bench.suite.stats import paired_ratios, summarize_group
from bench.suite.targets import DEFAULT_TARGETS, SPECS

__all__ = ["LoadLevel", "RelayPlan", "main", "render", "run_relay"]

# At 100 sessions, the CPU per frame pair of the rows the targets compare (the gateway,
# on its own protocol and on /v1/realtime against LiteLLM's, the floor): the others would cost
# minutes of the 15-minute budget of `all`, and Pipecat is saturated there (its knee is lower;
# see `capacity`).
HIGH_LOAD_TARGETS = (
    "floor",
    "litellm",
    "gateway",
    "gateway_compat",
    "gateway_base",
    "gateway_compat_base",
    "gateway_traced",
)
# (name, numerator row, denominator row, key) of the ratios shown per repetition.
RATIOS = (
    ("gateway_compat ÷ gateway p99", "gateway_compat", "gateway", "p99_ms"),
    ("gateway_compat ÷ gateway max", "gateway_compat", "gateway", "max_ms"),
    ("gateway ÷ gateway_base CPU", "gateway", "gateway_base", "relay_cpu_us_per_frame"),
    (
        "gateway_compat ÷ gateway_compat_base CPU",
        "gateway_compat",
        "gateway_compat_base",
        "relay_cpu_us_per_frame",
    ),
)


@dataclass(frozen=True)
class LoadLevel:
    sessions: int
    seconds: float
    targets: tuple[str, ...] | None = None  # None: every target of the plan


@dataclass(frozen=True)
class RelayPlan:
    targets: tuple[str, ...] = DEFAULT_TARGETS
    reps: int = 3
    rounds: int = 2000
    paced_rounds: int = 250
    warmup: int = 100  # ping-pong round trips
    load_warmup: int = 0  # frames per session not measured: none, from the first frame
    fps: float = 50.0
    loads: tuple[LoadLevel, ...] = field(
        default=(LoadLevel(50, 10.0), LoadLevel(100, 5.0, HIGH_LOAD_TARGETS))
    )

    @classmethod
    def quick(cls, targets: tuple[str, ...] = DEFAULT_TARGETS) -> RelayPlan:
        return cls(
            targets, reps=1, rounds=200, paced_rounds=40, warmup=20, loads=(LoadLevel(10, 3.0),)
        )

    def runs(self) -> list[Run]:
        runs: list[Run] = []
        for rep in range(self.reps):
            order = self.targets if rep % 2 == 0 else self.targets[::-1]
            for target in (t for t in order if SPECS[t].pingpong):
                rounds = self.paced_rounds if SPECS[target].paced else self.rounds
                runs.append(
                    Run(
                        "relay",
                        "pingpong",
                        target,
                        rep,
                        rounds=rounds,
                        warmup=min(self.warmup, rounds),
                    )
                )
            for level in self.loads:
                for target in order:
                    if level.targets is not None and target not in level.targets:
                        continue
                    runs.append(
                        Run(
                            "relay",
                            "load",
                            target,
                            rep,
                            sessions=level.sessions,
                            fps=self.fps,
                            seconds=level.seconds,
                            warmup=self.load_warmup,
                        )
                    )
        return runs


def run_relay(suite: Suite, plan: RelayPlan) -> dict[str, Any]:
    """Every run of the plan; the report (JSON-ready) with its summaries."""
    began = time.monotonic()
    runs = plan.runs()
    suite.runner.plan(runs)
    suite.total += len(runs)
    records: list[dict[str, Any]] = []
    for run in runs:
        records += suite.measure(run)
    return {
        "machine": machine_info(suite.fleet),
        "plan": asdict(plan),
        "compression": {t: dict(SPECS[t].compression) for t in plan.targets},
        "summary": summarize(records, plan),
        "runs": records,
        "elapsed_s": round(time.monotonic() - began, 1),
    }


def summarize(records: list[dict[str, Any]], plan: RelayPlan) -> dict[str, Any]:
    targets = list(plan.targets)
    pingpong = [r for r in records if r["kind"] == "pingpong"]
    summary: dict[str, Any] = {
        "pingpong": summarize_group(pingpong, targets),
        "load": {},
        "ratios": {},
    }
    for level in plan.loads:
        at_level = [r for r in records if r["kind"] == "load" and r["sessions"] == level.sessions]
        summary["load"][str(level.sessions)] = summarize_group(at_level, targets)
        pairs = {
            name: paired_ratios(at_level, top, bottom, key)
            for name, top, bottom, key in RATIOS
            if {top, bottom} <= set(targets)
        }
        if pairs:
            summary["ratios"][str(level.sessions)] = pairs
    return summary


def render(report: dict[str, Any]) -> str:
    plan = report["plan"]
    summary = report["summary"]
    rounds = plan["rounds"]
    parts = [
        latency_table(
            f"Ping-pong: {rounds} serial round trips ({plan['paced_rounds']} for paced rows), "
            f"{plan['reps']} reps",
            summary["pingpong"],
        )
    ]
    for level in plan["loads"]:
        parts.append(
            latency_table(
                f"{level['sessions']} sessions × {plan['fps']:g} frames/s × "
                f"{level['seconds']:g} s from each session's first frame, {plan['reps']} reps",
                summary["load"][str(level["sessions"])],
                load=True,
            )
        )
    by_sessions = {int(n): rows for n, rows in summary["load"].items()}
    parts.append(cpu_table(by_sessions))
    if summary.get("ratios"):
        parts.append(ratios_block(summary["ratios"]))
    parts.append(
        "median [min–max] over repetitions; added = target − direct in the same repetition; "
        "1st s max: the slowest frame of any session's first second; setup: connect to audio "
        "ready (gateway: session.started; /v1/realtime: session.updated); "
        "lost = frames lost or altered / sent.\n\n" + target_notes(list(plan["targets"]))
    )
    return "\n\n".join(parts)


def main(root: Path, out: Path, plan: RelayPlan, baseline: Path | None = None) -> int:
    with open_suite(root, out, list(plan.targets), baseline=baseline) as suite:
        report = run_relay(suite, plan)
    write_json(out / "relay.json", report)
    print(render(report))
    print(f"\nraw runs in {out / 'relay.json'}")
    return 0
