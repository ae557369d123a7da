"""``scripts/bench relay``: the latency and CPU the gateway adds per audio frame pair.

One fake OpenAI Realtime upstream in echo mode (a subprocess) answers every audio append with
the same audio. Two targets are measured on it in the same run, interleaved, repetition after
repetition:

- ``direct``: the load generator speaks OpenAI's protocol straight to the fake, the limit;
- ``gateway``: the same frames through ``python -m gateway serve`` (a subprocess) with the
  gateway's client protocol.

For each target and session count every session sends one stamped 20 ms frame per period and
each frame's round trip is measured (see ``bench.relay_load``). The relaying process (the
gateway, or the fake for ``direct``) is pinned alone to one core, the load generator and the fake
behind the gateway to the other; its CPU (``/proc/<pid>/stat``) over the measured window divided
by the frame pairs it relayed is its cost per frame pair. The CPU that other processes used in
the same window is recorded, and a run where they used more than ``NOISY_OTHER_CORES`` is
flagged noisy. Results: a table (medians with [min–max] over repetitions) and
``<out>/relay.json`` with every repetition.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from bench.relay_load import SLOW_FRAME_S, LoadPlan, LoadResult, Target, run_load
from bench.relay_procs import (
    CLOCK_TICKS_PER_S,
    ChildProcess,
    CorePlan,
    pin_process,
    plan_cores,
    read_counters,
    start_fake_upstream,
    start_gateway,
    take_snapshot,
)
from bench.relay_stats import (
    NOISY_OTHER_CORES,
    CpuSnapshot,
    Spread,
    counter_deltas,
    cpu_us_per_frame,
    cpu_usage,
    paired_differences,
    percentile,
    stall_episodes,
)

__all__ = ["main"]

TARGETS: tuple[Target, ...] = ("direct", "gateway")
WARMUP_FRAMES = 100
_RELAYING_ROLE: dict[Target, str] = {"direct": "fake", "gateway": "gateway"}
_DROPPED = "gateway_audio_frames_dropped_total"


class _Setup:
    """The two children, the URL each target is reached at, and the pids whose CPU is read."""

    def __init__(self, fake: ChildProcess, fake_url: str, gateway: ChildProcess, gateway_url: str):
        self.fake = fake
        self.gateway = gateway
        self.gateway_http = gateway_url
        self.urls: dict[Target, str] = {
            "direct": f"{fake_url.rstrip('/')}/realtime?model=gpt-realtime",
            "gateway": f"{gateway_url.replace('http://', 'ws://', 1)}/v1/session",
        }
        self.pids = {"gateway": gateway.pid, "fake": fake.pid, "load": os.getpid()}

    def check(self) -> None:
        self.fake.ensure_alive()
        self.gateway.ensure_alive()


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


def _record(target: Target, sessions: int, rep: int, result: LoadResult) -> dict[str, Any]:
    assert result.before is not None
    assert result.after is not None
    usage = cpu_usage(result.before, result.after, CLOCK_TICKS_PER_S)
    trips = result.round_trips_s
    per_frame = {
        role: cpu_us_per_frame(seconds, result.returned)
        for role, seconds in usage.process_s.items()
    }
    return {
        "rep": rep,
        "target": target,
        "sessions": sessions,
        "frames_sent": result.sent,
        "frames_back": result.returned,
        "lost": result.lost,
        "lost_in_warmup": result.lost_in_warmup,
        "corrupt": result.corrupt,
        "stray": result.stray,
        "rechunked": result.rechunked,
        "p50_ms": _ms(percentile(trips, 50)) if trips else None,
        "p99_ms": _ms(percentile(trips, 99)) if trips else None,
        "max_ms": _ms(max(trips)) if trips else None,
        "send_lag_p99_ms": _ms(percentile(result.send_lags_s, 99)) if result.send_lags_s else None,
        "setup_s": round(result.setup_s, 3),
        "relaying_process": _RELAYING_ROLE[target],
        "relay_cpu_us_per_frame": per_frame[_RELAYING_ROLE[target]],
        "cpu_us_per_frame": per_frame,
        # one clock tick of /proc/<pid>/stat spread over the frames: the CPU figures' resolution
        "cpu_tick_us_per_frame": cpu_us_per_frame(1 / CLOCK_TICKS_PER_S, result.returned),
        "cpu_s": dict(usage.process_s),
        "window_s": round(usage.wall_s, 3),
        "other_cores": round(usage.other_cores, 4),
        "interrupt_cores": round(usage.interrupt_cores, 4),
        "steal_cores": round(usage.steal_cores, 4),
        "noisy": usage.noisy,
        "events": dict(result.events),
        "stalls": _stalls(result),
    }


def _stalls(result: LoadResult, shown: int = 20) -> dict[str, Any]:
    """Slow frames grouped in time: many sessions at once point at a pause in one process."""
    episodes = stall_episodes(result.slow_frames, gap_s=0.02)
    worst = sorted(episodes, key=lambda stall: stall.worst_s, reverse=True)[:shown]
    return {
        "slow_frame_ms": SLOW_FRAME_S * 1000,
        "slow_frames": len(result.slow_frames),
        "episodes": len(episodes),
        "worst": [
            {
                "at_s": round(stall.at_s, 3),
                "frames": stall.frames,
                "sessions": stall.sessions,
                "worst_ms": _ms(stall.worst_s),
            }
            for stall in sorted(worst, key=lambda stall: stall.at_s)
        ],
    }


def _place(setup: _Setup, cores: CorePlan | None, target: Target) -> None:
    """The fake relays alone for ``direct``; behind the gateway it shares the load core."""
    if cores is not None:
        pin_process(setup.fake.pid, cores.relay_core if target == "direct" else cores.load_core)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage-collection pause in the load generator while it measures (a run is bounded)."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


async def _matrix(
    setup: _Setup,
    cores: CorePlan | None,
    session_counts: list[int],
    fps: float,
    seconds: float,
    reps: int,
) -> list[dict[str, Any]]:
    def snapshot() -> CpuSnapshot:
        return take_snapshot(setup.pids)

    for target in TARGETS:  # prime both paths (imports, first connections); not recorded
        _place(setup, cores, target)
        await run_load(LoadPlan(target, setup.urls[target], 2, fps, 0.2, 10), snapshot)
    records: list[dict[str, Any]] = []
    for rep in range(reps):
        for sessions in session_counts:
            order = TARGETS if rep % 2 == 0 else TARGETS[::-1]
            for target in order:
                _place(setup, cores, target)
                plan = LoadPlan(target, setup.urls[target], sessions, fps, seconds, WARMUP_FRAMES)
                counters = read_counters(setup.gateway_http)
                with _collector_paused():
                    result = await run_load(plan, snapshot)
                record = _record(target, sessions, rep, result)
                # the gateway's own account, warm-up included (all zero for direct)
                record["gateway_counters"] = counter_deltas(
                    counters, read_counters(setup.gateway_http)
                )
                setup.check()
                records.append(record)
                print(_progress(record), file=sys.stderr, flush=True)
                await asyncio.sleep(0.3)  # let the closed sessions go before the next run
    return records


def _progress(record: dict[str, Any]) -> str:
    cpu = record["relay_cpu_us_per_frame"]
    return (
        f"  rep {record['rep'] + 1} {record['target']:<7} {record['sessions']:>4} sessions: "
        f"p50 {record['p50_ms']} ms, p99 {record['p99_ms']} ms, "
        f"{'-' if cpu is None else f'{cpu:.0f}'} µs/frame, lost {record['lost']}, "
        f"other {record['other_cores']:.2f} cores"
    )


def summarize(records: list[dict[str, Any]], session_counts: list[int]) -> list[dict[str, Any]]:
    """One row per target × sessions: spreads over repetitions, added latency paired by rep."""

    def values(rows: list[dict[str, Any]], key: str) -> list[float]:
        return [row[key] for row in rows if row[key] is not None]

    def spread(numbers: list[float]) -> dict[str, float] | None:
        return Spread.of(numbers).as_dict() if numbers else None

    summary = []
    for sessions in session_counts:
        by_target = {
            target: sorted(
                (r for r in records if r["target"] == target and r["sessions"] == sessions),
                key=lambda r: int(r["rep"]),
            )
            for target in TARGETS
        }
        for target in TARGETS:
            rows = by_target[target]
            row: dict[str, Any] = {"target": target, "sessions": sessions, "reps": len(rows)}
            for key in ("p50_ms", "p99_ms", "relay_cpu_us_per_frame", "other_cores"):
                row[key] = spread(values(rows, key))
            for key in ("p50_ms", "p99_ms"):
                added = None
                if target != "direct":
                    gateway, direct = values(rows, key), values(by_target["direct"], key)
                    if gateway and len(gateway) == len(direct):
                        added = spread(paired_differences(gateway, direct))
                row[f"added_{key}"] = added
            for key in ("frames_sent", "lost", "corrupt", "stray"):
                row[key] = sum(int(r[key]) for r in rows)
            row["noisy_reps"] = sum(1 for r in rows if r["noisy"])
            row["gateway_audio_dropped"] = sum(
                int(r.get("gateway_counters", {}).get(_DROPPED, 0)) for r in rows
            )
            summary.append(row)
    return summary


def _cell(spread: dict[str, float] | None, decimals: int) -> str:
    if spread is None:
        return "–"
    return Spread(spread["median"], spread["min"], spread["max"]).render(decimals)


def render(summary: list[dict[str, Any]]) -> str:
    header = (
        f"{'target':<8} {'sessions':>8}  {'p50 ms':<21} {'p99 ms':<21} {'added p50 ms':<21} "
        f"{'added p99 ms':<21} {'CPU µs/frame':<18} {'lost':>5}  {'other cores':<19} noisy"
    )
    lines = [header, "-" * len(header)]
    for row in summary:
        lines.append(
            f"{row['target']:<8} {row['sessions']:>8}  {_cell(row['p50_ms'], 3):<21} "
            f"{_cell(row['p99_ms'], 3):<21} {_cell(row['added_p50_ms'], 3):<21} "
            f"{_cell(row['added_p99_ms'], 3):<21} {_cell(row['relay_cpu_us_per_frame'], 0):<18} "
            f"{row['lost']:>5}  {_cell(row['other_cores'], 2):<19} "
            f"{row['noisy_reps']}/{row['reps']}"
        )
    lines += [
        "",
        "median [min–max] over repetitions; round trip = send → the same frame back. added = "
        "gateway − direct at the same session count, paired by repetition.",
        "CPU µs/frame: the relaying process per frame pair (gateway; for direct, the fake's own "
        f"CPU, for information). noisy: other processes used > {NOISY_OTHER_CORES} cores.",
    ]
    corrupt = sum(int(row["corrupt"]) for row in summary)
    stray = sum(int(row["stray"]) for row in summary)
    if corrupt or stray:
        lines.append(f"WARNING: {corrupt} frame(s) came back altered, {stray} stray frame(s).")
    dropped = sum(int(row["gateway_audio_dropped"]) for row in summary)
    if dropped:
        lines.append(
            f"WARNING: the gateway counted {dropped} audio frame(s) dropped (slow client)."
        )
    return "\n".join(lines)


def _machine(
    allowed_cpus: list[int], cores: CorePlan | None, pinned: bool, pin_note: str
) -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "allowed_cpus": allowed_cpus,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "clock_ticks_per_s": CLOCK_TICKS_PER_S,
        "pinning": {
            "pinned": pinned,
            "note": pin_note,
            "relay_core": cores.relay_core if cores else None,
            "load_core": cores.load_core if cores else None,
            "placement": {
                "direct": "fake alone on the relay core; load generator on the load core",
                "gateway": "gateway alone on the relay core; fake and load generator on the "
                "load core",
            },
        },
    }


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(session_counts: list[int], fps: float, seconds: float, reps: int, out_dir: Path) -> int:
    began = time.monotonic()
    allowed_cpus = sorted(os.sched_getaffinity(0))
    cores, pin_note = plan_cores()
    previous_handler = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-relay-") as tmp,
            contextlib.ExitStack() as children,
        ):
            work = Path(tmp)
            fake, fake_url = start_fake_upstream(work)
            children.callback(fake.stop)
            (work / "data").mkdir()
            gateway, gateway_url = start_gateway(fake_url, work / "data", work)
            children.callback(gateway.stop)
            setup = _Setup(fake, fake_url, gateway, gateway_url)
            pinned = False
            if cores is not None:
                try:
                    pin_process(os.getpid(), cores.load_core)
                    pin_process(gateway.pid, cores.relay_core)
                    pinned = True
                except OSError as error:
                    cores, pin_note = None, f"pinning refused: {error}"
            print(
                f"relay bench: sessions {session_counts}, {fps:g} fps, {seconds:g} s measured "
                f"after {WARMUP_FRAMES} frames, {reps} reps, pinned: {pinned}",
                file=sys.stderr,
                flush=True,
            )
            records = asyncio.run(_matrix(setup, cores, session_counts, fps, seconds, reps))
    except KeyboardInterrupt:
        print("relay bench: interrupted; the fake and the gateway were stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    summary = summarize(records, session_counts)
    elapsed = time.monotonic() - began
    report = {
        "machine": _machine(allowed_cpus, cores, pinned, pin_note),
        "settings": {
            "sessions": session_counts,
            "fps": fps,
            "seconds": seconds,
            "reps": reps,
            "warmup_frames": WARMUP_FRAMES,
            "frame_bytes": 960,
            "rates_hz": {"input": 24000, "output": 24000},
            "noisy_other_cores": NOISY_OTHER_CORES,
            "load_generator_gc": "paused during each run",
            "compression": "none on either client hop; the gateway's upstream hop is the "
            "openai SDK's default (none)",
        },
        "runs": records,
        "summary": summary,
        "elapsed_s": round(elapsed, 1),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "relay.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(summary))
    print(f"\n{len(records)} runs in {elapsed:.0f} s; raw repetitions in {out_dir / 'relay.json'}")
    lost = sum(int(r["lost"]) + int(r["corrupt"]) for r in records)
    return 1 if lost else 0
