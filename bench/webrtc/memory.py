"""``scripts/bench webrtc --memory``: does a WebRTC session leave anything behind?

A fresh fake and gateway (``bench.webrtc.fleet``); ``sessions`` WebRTC sessions opened, held for
``minutes`` with a turn every ``slot_ms`` each (audio both ways all along: the microphone
streams, the gateway's track sends silence between replies), then closed. Every ``sample_s``
the gateway's RSS, threads and open file descriptors (``/proc``), its open sessions and peer
connections (``/metrics``); the growth is judged from the first sample after ``warmup_s`` to
the last (target < 5 %). Before the sessions open and ``settle_s`` after the last one closed,
the probe (``bench.webrtc.probe``) counts the gateway's asyncio tasks, live aiortc objects and
threads.
Writes ``<out>/webrtc-memory.json`` and ``<out>/webrtc-memory.md``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.latency.turns import TurnSchedule
from bench.webrtc import report
from bench.webrtc.bench import lanes_of
from bench.webrtc.fleet import Stage, run_phase, start_stage
from bench.webrtc.stats import pooled, rss_growth

__all__ = ["MemoryPlan", "main"]


@dataclass(frozen=True)
class MemoryPlan:
    sessions: int = 20
    minutes: float = 10.0
    slot_ms: int = 4000
    speech_ms: int = 300
    warmup_s: float = 120.0
    sample_s: float = 10.0
    settle_s: float = 10.0
    workers: int = 2

    @classmethod
    def quick(cls) -> MemoryPlan:
        return cls(sessions=3, minutes=0.75, warmup_s=15.0, sample_s=5.0, settle_s=3.0)

    def schedule(self) -> TurnSchedule:
        turns = max(2, int(self.minutes * 60_000 // self.slot_ms) - 1)
        return TurnSchedule(turns, 1, self.slot_ms, self.speech_ms)


def _status_field(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


# The gateway's own gauges read from /metrics: its open sessions, its open peer connections
GAUGES = {
    "active_sessions": "gateway_active_sessions",
    "webrtc_peer_connections": "gateway_webrtc_peer_connections",
}


def _gauges(base_url: str) -> dict[str, float | None]:
    found: dict[str, float | None] = dict.fromkeys(GAUGES)
    with (
        contextlib.suppress(OSError, ValueError),
        urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as response,
    ):
        for line in response.read().decode().splitlines():
            name, _, value = line.partition(" ")
            for key, metric in GAUGES.items():
                if name == metric:
                    found[key] = float(value)
    return found


def _active_sessions(base_url: str) -> float | None:
    return _gauges(base_url)["active_sessions"]


def sample(stage: Stage) -> dict[str, Any]:
    pid = stage.gateway.pid
    return {
        "rss_kb": _status_field(pid, "VmRSS"),
        "threads": _status_field(pid, "Threads"),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        **_gauges(stage.gateway_url),
    }


def _say(text: str) -> None:
    print(f"webrtc --memory: {text}", file=sys.stderr, flush=True)


def _settle(stage: Stage, settle_s: float) -> None:
    """Until the gateway counts no open session (30 s at most), then ``settle_s`` more."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _active_sessions(stage.gateway_url) not in (0.0, None):
        time.sleep(0.5)
    time.sleep(settle_s)


def _turns(lanes: list[dict[str, Any]], slot_ms: int) -> dict[str, Any]:
    every = [v for lane in lanes for v in lane["latencies_ms"] if v is not None]
    per_lane = [lane["latencies_ms"] for lane in lanes]
    minute = max(1, 60_000 // slot_ms)  # turns per minute
    first = [v for turns in per_lane for v in turns[:minute] if v is not None]
    last = [v for turns in per_lane for v in turns[-minute:] if v is not None]
    return {
        "all": pooled(every),
        "first_minute": pooled(first),
        "last_minute": pooled(last),
        "not_measured": sum(lane["counts"]["turns"] - lane["counts"]["measured"] for lane in lanes),
        "closed_early": sum(bool(lane["closed_early"]) for lane in lanes),
    }


def main(out: Path, plan: MemoryPlan) -> int:
    began = time.monotonic()
    schedule = plan.schedule()
    _say(f"{plan.sessions} sessions for {schedule.duration_s / 60:.1f} min")
    samples: list[dict[str, Any]] = []
    measured = report.machine()  # at the start: the gateway starts on what is checked out now
    with contextlib.ExitStack() as stack:
        stage = start_stage(out / "webrtc-memory-logs", stack)
        time.sleep(plan.settle_s)  # the gateway's start-up done
        before = sample(stage)
        probe_before = stage.counts()
        _say(f"before: {before}, probe {probe_before}")

        def tick(elapsed_s: float) -> None:
            samples.append({"t_s": round(elapsed_s, 1), **sample(stage)})
            _say(f"{elapsed_s:5.0f} s: {samples[-1]}")

        configs = lanes_of([("webrtc", "webrtc")] * plan.sessions, plan.slot_ms)
        result = run_phase(
            stage, configs, schedule, out / "webrtc-memory-work", plan.workers, tick, plan.sample_s
        )
        during = samples[-1] if samples else {}
        _settle(stage, plan.settle_s)
        after = sample(stage)
        probe_after = stage.counts()
        _say(f"after: {after}, probe {probe_after}")
        placement = stage.placement
    document = {
        "machine": measured,
        "plan": asdict(plan),
        "placement": placement,
        "before": before,
        "during": during,
        "after": after,
        "probe_before": probe_before,
        "probe_after": probe_after,
        "samples": samples,
        "growth": rss_growth(samples, plan.warmup_s),
        "turns": _turns(result.lanes, plan.slot_ms),
        "open_failures": result.open_failures,
        "cpu": result.cpu,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / "webrtc-memory.json"
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    table = report.render_memory(document)
    (out / "webrtc-memory.md").write_text(table + "\n")
    print(table)
    return 0 if not result.open_failures else 1
