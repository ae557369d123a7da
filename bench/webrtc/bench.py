"""``scripts/bench webrtc``: the WebRTC edge against the WebSocket path, same gateway, same fake.

One OpenAI fake (normal mode: its server VAD ends a turn after 500 ms of silence, its model
answers) and one gateway in front of it (``bench.webrtc.fleet``) serve three parts in a row;
every client session is a lane (``bench.webrtc.lanes``) in a worker process, never in this one:

1. **latency**: per repetition one phase of four groups of lanes side by side, their turns
   staggered across the slot in an order reversed every other repetition: ``webrtc`` and ``ws``
   (``/v1/session`` at 48 kHz both ways, the WebRTC session's own rates), and the A/A twins
   ``webrtc_aa`` and ``ws_aa``. A turn's latency runs from the end of the user's speech to the
   first reply frame over ``THRESHOLD`` (WebRTC: out of the received track, so Opus both ways
   and aiortc's jitter buffers are in it). Judged by the median over repetitions of the
   per-repetition difference ``webrtc − ws`` (target: ≤ 20 ms at p50), beside the A/A rows.
2. **cpu**: per repetition ``cpu_sessions`` WebRTC sessions, the same over WebSocket, and the
   WebRTC run again (A/A), in an order reversed every other repetition: the gateway's CPU per
   session over the schedule's window (``/proc``), and the clients'.
3. **ramp**: WebRTC sessions at each of ``ramp_levels``, until the p99 that load adds to the
   unloaded WebRTC p99 (``ramp_reference`` sessions, measured first) passes 50 ms or a level
   loses turns, with the CPU of the gateway, of the clients and of the rest of the box.

``--memory`` runs ``bench.webrtc.memory`` instead. Writes ``<out>/webrtc.json`` and
``<out>/webrtc.md``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.latency.turns import TurnSchedule
from bench.webrtc import report
from bench.webrtc.fleet import PhaseResult, Stage, run_phase, start_stage
from bench.webrtc.lanes import Kind, LaneConfig
from bench.webrtc.stats import cpu_rows, latency_summary, ramp_knee, ramp_row

__all__ = ["WebRtcPlan", "lanes_of", "main"]

LATENCY_GROUPS: tuple[tuple[Kind, str], ...] = (
    ("webrtc", "webrtc"),
    ("ws", "ws"),
    ("webrtc", "webrtc_aa"),
    ("ws", "ws_aa"),
)
CPU_RUNS: tuple[tuple[Kind, str], ...] = (
    ("webrtc", "webrtc"),
    ("ws", "ws"),
    ("webrtc", "webrtc_aa"),
)


@dataclass(frozen=True)
class WebRtcPlan:
    reps: int = 5
    lanes_per_group: int = 2
    turns: int = 25  # measured per lane and repetition
    warmup: int = 2
    speech_ms: int = 300
    # the utterance, the fake's 500 ms of silence, WebRTC's delay, the 300 ms reply, a margin
    slot_ms: int = 1600
    cpu_sessions: int = 10
    cpu_reps: int = 3
    cpu_turns: int = 12
    ramp_levels: tuple[int, ...] = (5, 10, 15, 20, 25, 30, 40)
    ramp_turns: int = 12
    ramp_reference: int = 2  # sessions of the unloaded reference, ``turns`` turns each
    workers: int = 2
    parts: tuple[str, ...] = ("latency", "cpu", "ramp")

    @classmethod
    def quick(cls) -> WebRtcPlan:
        return cls(
            reps=1,
            lanes_per_group=1,
            turns=4,
            warmup=1,
            cpu_sessions=3,
            cpu_reps=1,
            cpu_turns=4,
            ramp_levels=(2, 4),
            ramp_turns=4,
        )

    def schedule(self, turns: int) -> TurnSchedule:
        return TurnSchedule(turns, self.warmup, self.slot_ms, self.speech_ms)

    def estimate_s(self) -> float:
        slot = self.slot_ms / 1000
        latency = self.reps * ((self.turns + self.warmup) * slot + 8)
        cpu = self.cpu_reps * len(CPU_RUNS) * ((self.cpu_turns + self.warmup) * slot + 8)
        ramp = sum((self.ramp_turns + self.warmup) * slot + 5 + n / 4 for n in self.ramp_levels)
        reference = (self.turns + self.warmup) * slot + 5
        return latency + cpu + ramp + reference


def lanes_of(kinds: list[tuple[Kind, str]], slot_ms: int) -> list[LaneConfig]:
    """One lane per entry, their turns spread evenly across one slot, in this order."""
    slot_s = slot_ms / 1000
    return [
        LaneConfig(kind, group, round(index * slot_s / len(kinds), 4))
        for index, (kind, group) in enumerate(kinds)
    ]


def _say(text: str) -> None:
    print(f"webrtc: {text}", file=sys.stderr, flush=True)


def _check_phase(name: str, result: PhaseResult) -> None:
    if result.open_failures:
        _say(
            f"{name}: {len(result.open_failures)} lane(s) did not open: {result.open_failures[:3]}"
        )
    early = sum(bool(lane["closed_early"]) for lane in result.lanes)
    missed = sum(lane["counts"]["turns"] - lane["counts"]["measured"] for lane in result.lanes)
    cpu = result.cpu
    _say(
        f"{name}: {len(result.lanes)} lanes, closed early {early}, turns not measured {missed}; "
        f"cores: gateway {cpu['cores']['gateway']:.2f}, clients {cpu['cores']['clients']:.2f}, "
        f"fake {cpu['cores']['fake']:.2f}, others {cpu['other_cores']:.2f}"
    )


def _latency(stage: Stage, plan: WebRtcPlan, work: Path) -> dict[str, Any]:
    reps: list[list[dict[str, Any]]] = []
    phases: list[dict[str, Any]] = []
    kinds = [group for _ in range(plan.lanes_per_group) for group in LATENCY_GROUPS]
    for rep in range(plan.reps):
        order = kinds if rep % 2 == 0 else kinds[::-1]
        lanes = lanes_of(order, plan.slot_ms)
        result = run_phase(stage, lanes, plan.schedule(plan.turns), work / f"latency-{rep}")
        _check_phase(f"latency rep {rep + 1}/{plan.reps}", result)
        reps.append(result.lanes)
        phases.append({"cpu": result.cpu, "open_failures": result.open_failures})
    summary = latency_summary(reps)
    for pair in summary["pairs"]:
        _say(f"  {pair['pair']}: p50 {pair['diff_p50_ms']}, p99 {pair['diff_p99_ms']}")
    return {"summary": summary, "phases": phases, "lanes": reps}


def _cpu(stage: Stage, plan: WebRtcPlan, work: Path) -> dict[str, Any]:
    reps: list[dict[str, dict[str, Any]]] = []
    lanes_by_rep: list[dict[str, list[dict[str, Any]]]] = []
    for rep in range(plan.cpu_reps):
        runs = CPU_RUNS if rep % 2 == 0 else CPU_RUNS[::-1]
        cpus: dict[str, dict[str, Any]] = {}
        lanes: dict[str, list[dict[str, Any]]] = {}
        for kind, name in runs:
            configs = lanes_of([(kind, name)] * plan.cpu_sessions, plan.slot_ms)
            schedule = plan.schedule(plan.cpu_turns)
            result = run_phase(stage, configs, schedule, work / f"cpu-{rep}-{name}", plan.workers)
            _check_phase(f"cpu rep {rep + 1}/{plan.cpu_reps} {name}", result)
            cpus[name] = result.cpu
            lanes[name] = result.lanes
        reps.append(cpus)
        lanes_by_rep.append(lanes)
    rows = cpu_rows(reps, plan.cpu_sessions)
    _say(f"  cpu webrtc/ws {rows['webrtc/ws']}, A/A {rows['A/A webrtc_aa/webrtc']}")
    return {"rows": rows, "runs": reps, "lanes": lanes_by_rep}


def _ramp(stage: Stage, plan: WebRtcPlan, work: Path) -> dict[str, Any]:
    """The reference first (``ramp_reference`` sessions, ``turns`` turns each: unloaded, and
    measured in the same minutes as the levels), then each level until the knee."""
    configs = lanes_of([("webrtc", "webrtc")] * plan.ramp_reference, plan.slot_ms)
    result = run_phase(stage, configs, plan.schedule(plan.turns), work / "ramp-reference")
    _check_phase(f"ramp reference ({plan.ramp_reference})", result)
    reference = ramp_row(plan.ramp_reference, result.lanes, result.cpu, None)
    rows: list[dict[str, Any]] = []
    for level in plan.ramp_levels:
        configs = lanes_of([("webrtc", "webrtc")] * level, plan.slot_ms)
        schedule = plan.schedule(plan.ramp_turns)
        result = run_phase(stage, configs, schedule, work / f"ramp-{level}", plan.workers)
        _check_phase(f"ramp {level}", result)
        row = ramp_row(level, result.lanes, result.cpu, reference["p99_ms"])
        row["open_failures"] = len(result.open_failures)
        rows.append(row)
        _say(
            f"  ramp {level}: p50 {row['p50_ms']} p99 {row['p99_ms']} ms, load added p99 "
            f"{row['load_added_p99_ms']} ms, full: {row['bound'] or '-'}"
        )
        if ramp_knee(rows)["passed_at"] is not None or result.open_failures:
            break
    return {"reference": reference, "rows": rows, "knee": ramp_knee(rows)}


def main(out: Path, plan: WebRtcPlan) -> int:
    began = time.monotonic()
    work = out / "webrtc-work"
    _say(f"about {plan.estimate_s() / 60:.1f} min; parts {', '.join(plan.parts)}")
    results: dict[str, Any] = {}
    measured = report.machine()  # at the start: the gateway starts on what is checked out now
    with contextlib.ExitStack() as stack:
        stage = start_stage(out / "webrtc-logs", stack)
        _say(f"fake and gateway up; placement {stage.placement}")
        if "latency" in plan.parts:
            results["latency"] = _latency(stage, plan, work)
        if "cpu" in plan.parts:
            results["cpu"] = _cpu(stage, plan, work)
        if "ramp" in plan.parts:
            results["ramp"] = _ramp(stage, plan, work)
        placement = stage.placement
    document = {
        "machine": measured,
        "plan": asdict(plan),
        "placement": placement,
        **results,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "webrtc.json").write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    table = report.render(document)
    (out / "webrtc.md").write_text(table + "\n")
    print(table)
    _say(f"{(time.monotonic() - began) / 60:.1f} min; {out / 'webrtc.json'}, {out / 'webrtc.md'}")
    return 0
