"""``scripts/bench relay --provider gemini``: the latency and CPU the gateway adds per frame pair.

The older, two-target bench with a Python load generator; ``scripts/bench relay`` on OpenAI is
``bench.suite.relay`` (every peer, the Go load generator, which speaks no Gemini Live).

One fake upstream of the chosen provider in echo mode (a subprocess: the OpenAI Realtime fake,
or the Gemini Live fake over TLS) answers every audio message with the same audio. Two targets
are measured on it in the same run, interleaved, repetition after repetition:

- ``direct``: the load generator speaks the provider's protocol straight to the fake, the limit;
- ``gateway``: the same frames through ``python -m gateway serve`` (a subprocess, with that
  provider) with the gateway's client protocol.

Frames are 20 ms of PCM16 at the provider's input rate (``bench.relay.targets``).
For each target and session count every session sends one stamped 20 ms frame per period and
each frame's round trip is measured from the session's first frame (see ``bench.relay.load``):
p50, p99 and the slowest, and the slowest of the sessions' first seconds, beside the CPU. The
relaying process (the gateway, or the fake for ``direct``) is pinned alone to one core, the load
generator and the fake behind the gateway to the other; its CPU (``/proc/<pid>/stat``) over the
measured window divided by the frame pairs it relayed is its cost per frame pair. The CPU that
other processes used in the same window is recorded, and a run where they used more than
``NOISY_OTHER_CORES`` is flagged noisy. Results: a table (medians with [min–max] over
repetitions) and ``<out>/relay.json`` (``relay_<provider>.json`` for other providers) with
every repetition.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

from bench.relay.load import SLOW_FRAME_S, LoadPlan, LoadResult, run_load
from bench.relay.procs import (
    CLOCK_TICKS_PER_S,
    ChildProcess,
    CorePlan,
    collector_paused,
    gateway_env_gemini,
    gateway_env_openai,
    pin_process,
    plan_cores,
    read_counters,
    start_fake_upstream,
    start_gateway,
    start_gemini_fake,
    take_snapshot,
)
from bench.relay.report import TARGETS, machine, render, summarize
from bench.relay.stats import (
    NOISY_OTHER_CORES,
    CpuSnapshot,
    counter_deltas,
    cpu_us_per_frame,
    cpu_usage,
    percentile,
    stall_episodes,
)
from bench.relay.targets import GEMINI_MODEL, PROVIDERS, Provider, ProviderSpec, Target, direct_url

__all__ = ["main", "output_name"]

WARMUP_FRAMES = 0  # measured from each session's first frame: its start is part of the load
_RELAYING_ROLE: dict[Target, str] = {"direct": "fake", "gateway": "gateway"}
_UPSTREAM_COMPRESSION: dict[Provider, str] = {
    "openai": "none on either client hop; the gateway's upstream hop is the openai SDK's "
    "default (none)",
    "gemini": "none on either client hop (nor on direct's hop to the fake); the gateway's "
    "upstream hop is permessage-deflate, which the google-genai SDK offers and the fake accepts",
}


def output_name(provider: Provider) -> str:
    """The JSON file: ``relay.json`` for OpenAI (as before providers), else ``relay_<p>.json``."""
    return "relay.json" if provider == "openai" else f"relay_{provider}.json"


class _Setup:
    """The two children, the URL each target is reached at, and the pids whose CPU is read."""

    def __init__(
        self,
        provider: ProviderSpec,
        fake: tuple[ChildProcess, str, Path | None],  # the fake, its base URL, its certificate
        gateway: ChildProcess,
        gateway_url: str,
    ):
        self.provider = provider
        self.fake, fake_url, self.ca_file = fake
        self.gateway = gateway
        self.gateway_http = gateway_url
        self.urls: dict[Target, str] = {
            "direct": direct_url(provider.name, fake_url),
            "gateway": f"{gateway_url.replace('http://', 'ws://', 1)}/v1/session",
        }
        self.pids = {"gateway": gateway.pid, "fake": self.fake.pid, "load": os.getpid()}

    def plan(
        self, target: Target, sessions: int, fps: float, seconds: float, warmup: int
    ) -> LoadPlan:
        url = self.urls[target]
        ca_file = self.ca_file if target == "direct" else None
        return LoadPlan(target, url, sessions, fps, seconds, warmup, self.provider, ca_file)

    def check(self) -> None:
        self.fake.ensure_alive()
        self.gateway.ensure_alive()


def _start_children(provider: ProviderSpec, work: Path, children: contextlib.ExitStack) -> _Setup:
    """The provider's fake, then the gateway in front of it; both stopped by ``children``."""
    fake: tuple[ChildProcess, str, Path | None]
    if provider.name == "gemini":
        fake = start_gemini_fake(work, work / "certs")
        children.callback(fake[0].stop)
        upstream_env = gateway_env_gemini(fake[1], fake[2], GEMINI_MODEL)
    else:
        child, url = start_fake_upstream(work)
        children.callback(child.stop)
        fake = (child, url, None)
        upstream_env = gateway_env_openai(url)
    (work / "data").mkdir()
    gateway, gateway_url = start_gateway(upstream_env, work / "data", work)
    children.callback(gateway.stop)
    return _Setup(provider, fake, gateway, gateway_url)


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
        "first_second_max_ms": (_ms(max(result.first_second_s)) if result.first_second_s else None),
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
        await run_load(setup.plan(target, 2, fps, 0.2, 10), snapshot)
    records: list[dict[str, Any]] = []
    for rep in range(reps):
        for sessions in session_counts:
            order = TARGETS if rep % 2 == 0 else TARGETS[::-1]
            for target in order:
                _place(setup, cores, target)
                plan = setup.plan(target, sessions, fps, seconds, WARMUP_FRAMES)
                counters = read_counters(setup.gateway_http)
                with collector_paused():
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


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(
    session_counts: list[int],
    fps: float,
    seconds: float,
    reps: int,
    out_dir: Path,
    provider_name: Provider = "openai",
) -> int:
    began = time.monotonic()
    provider = PROVIDERS[provider_name]
    allowed_cpus = sorted(os.sched_getaffinity(0))
    cores, pin_note = plan_cores()
    previous_handler = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-relay-") as tmp,
            contextlib.ExitStack() as children,
        ):
            setup = _start_children(provider, Path(tmp), children)
            gateway = setup.gateway
            pinned = False
            if cores is not None:
                try:
                    pin_process(os.getpid(), cores.load_core)
                    pin_process(gateway.pid, cores.relay_core)
                    pinned = True
                except OSError as error:
                    cores, pin_note = None, f"pinning refused: {error}"
            print(
                f"relay bench ({provider.name}, {provider.frame_bytes}-byte frames): sessions "
                f"{session_counts}, {fps:g} fps, {seconds:g} s measured "
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
        "machine": machine(allowed_cpus, cores, pinned, pin_note),
        "settings": {
            "provider": provider.name,
            "upstream": provider.title,
            "sessions": session_counts,
            "fps": fps,
            "seconds": seconds,
            "reps": reps,
            "warmup_frames": WARMUP_FRAMES,
            "frame_bytes": provider.frame_bytes,
            "rates_hz": {"input": provider.input_rate, "output": provider.output_rate},
            "noisy_other_cores": NOISY_OTHER_CORES,
            "load_generator_gc": "paused during each run",
            "compression": _UPSTREAM_COMPRESSION[provider.name],
        },
        "runs": records,
        "summary": summary,
        "elapsed_s": round(elapsed, 1),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    out_file = out_dir / output_name(provider.name)
    out_file.write_text(json.dumps(report, indent=2) + "\n")
    print(render(summary, provider))
    print(f"\n{len(records)} runs in {elapsed:.0f} s; raw repetitions in {out_file}")
    lost = sum(int(r["lost"]) + int(r["corrupt"]) for r in records)
    return 1 if lost else 0
