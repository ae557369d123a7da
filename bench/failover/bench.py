"""``scripts/bench failover``: how a voice session fails over within itself, per kind of fault.

The gateway (a process of its own, pinned alone to one core) serves the alias ``assistant``:
OpenAI Realtime, then Gemini Live, both fakes in this process with the client (the other core;
``bench.failover.stage``). Each fault is injected into the OpenAI fake, in a voice session of
its own, one session at a time (``bench.failover.scenarios`` says exactly when each fault comes
and where each clock starts and stops):

==================  ===========================================================================
``connect_refused``  the first target resets the connection: the start moves on
``connect_429``      the first target answers the upgrade with 429
``lost``             the connection drops as the user's turn ends, and cannot be opened again
``stall_first``      the user's turn gets no output at all
``stall_mid``        the answer stops after its first chunks
==================  ===========================================================================

Per kind ``faults`` voice faults (an utterance the fallback must hear whole and answer), the
kinds interleaved round by round; and, for ``lost`` and the stalls, ``tool_faults`` more in
which a tool call (the journaling fixture) runs across the failover, counted in its journal;
and ``tool_faults`` starts with no fault on the fallback alone (the reference). One unrecorded
round of every kind comes first (``warmup``). Every loop is
bounded in count, every wait in time, and the whole run by ``time_limit_s`` (what is left is
then not run, and the report says so).

Writes ``<out>/failover.json`` (every sample, the settings, the summary), prints a table per
kind and draws ``<docs>/failover.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp

from bench.failover.scenarios import RepPlan, run_rep
from bench.failover.stage import GatewaySettings, start_fakes, start_stage_gateway
from bench.failover.stats import KINDS, render, summarize
from bench.relay.procs import CLOCK_TICKS_PER_S, take_snapshot
from bench.relay.stats import NOISY_OTHER_CORES, cpu_usage

__all__ = ["FailoverPlan", "main", "schedule"]

TOOL_KINDS = ("lost", "stall_first", "stall_mid")


@dataclass(frozen=True)
class FailoverPlan:
    faults: int = 100  # voice faults per kind
    tool_faults: int | None = None  # per kind with a tool call across it; None: faults // 5
    rep: RepPlan = field(default_factory=RepPlan)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    # The OpenAI fake speaks in real time (a stall mid-answer comes after real chunks); the
    # fallback's pace only matters after its first byte, so it answers at once (shorter runs).
    openai_pace: float = 1.0
    warmup: int = 1  # unrecorded rounds first (every voice kind and a reference start)
    time_limit_s: float = 45 * 60

    @classmethod
    def quick(cls) -> FailoverPlan:
        return cls(faults=5, tool_faults=2)

    @property
    def tools(self) -> int:
        return self.tool_faults if self.tool_faults is not None else max(2, self.faults // 5)


def schedule(faults: int, tools: int) -> list[tuple[str, str, int]]:
    """(kind, variant, repetition) in the order run: round after round, each round one voice
    fault of every kind; the tool repetitions and the references spread evenly over the rounds
    (``tools`` of each, after the voice faults of their round)."""
    order: list[tuple[str, str, int]] = []
    extra_rounds = {(i * faults) // tools for i in range(tools)} if tools and faults else set()
    extras = sorted(extra_rounds)
    for round_ in range(faults):
        order.extend((kind, "voice", round_) for kind in KINDS)
        if round_ in extra_rounds:
            index = extras.index(round_)
            order.extend((kind, "tool", index) for kind in TOOL_KINDS)
            order.append(("reference", "reference", index))
    if not faults:  # tools alone
        for index in range(tools):
            order.extend((kind, "tool", index) for kind in TOOL_KINDS)
            order.append(("reference", "reference", index))
    return order


async def _run(plan: FailoverPlan, work: Path, log: Path) -> tuple[list[dict[str, Any]], Any]:
    stage = await start_fakes(work, plan.openai_pace)
    samples: list[dict[str, Any]] = []
    order = schedule(plan.faults, plan.tools)
    began = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            start_stage_gateway(stage, plan.gateway, work, stack)
            assert stage.gateway is not None
            pids = {"gateway": stage.gateway.pid, "bench": os.getpid()}
            async with aiohttp.ClientSession() as http:
                for kind, variant, _ in schedule(plan.warmup, plan.warmup):
                    if variant != "tool":  # every path warm: the SDKs, TLS to Gemini
                        await run_rep(kind, variant, -1, stage, http, plan.rep, plan.gateway)
                before = take_snapshot(pids)
                for number, (kind, variant, rep) in enumerate(order):
                    if time.monotonic() - began > plan.time_limit_s:
                        print(
                            f"failover: time limit reached, {len(order) - number} left",
                            file=sys.stderr,
                            flush=True,
                        )
                        break
                    stage.gateway.ensure_alive()
                    sample = await run_rep(kind, variant, rep, stage, http, plan.rep, plan.gateway)
                    samples.append(sample)
                    with log.open("a") as out:
                        out.write(json.dumps(sample) + "\n")
                    _progress(number + 1, len(order), sample, began)
            usage = cpu_usage(before, take_snapshot(pids), CLOCK_TICKS_PER_S)
            stage_info = {"placement": stage.placement, "gateway_log": str(stage.gateway.log_path)}
    finally:
        await stage.openai.stop()
        await stage.gemini.stop()
    cpu = {
        "window_s": round(usage.wall_s, 1),
        "cores": {role: round(s / usage.wall_s, 3) for role, s in usage.process_s.items()},
        "other_cores": round(usage.other_cores, 3),
        "noisy": usage.noisy,
    }
    return samples, {**stage_info, "cpu": cpu, "scheduled": len(order)}


def _progress(done: int, total: int, sample: dict[str, Any], began: float) -> None:
    if sample.get("ok") and done % 10 and done != total:
        return
    elapsed = time.monotonic() - began
    left = elapsed / done * (total - done)
    what = "ok" if sample.get("ok") else f"FAILED: {sample.get('error') or sample.get('outcome')}"
    print(
        f"  [{done}/{total}, {elapsed:.0f} s, ~{left:.0f} s left] {sample['kind']} "
        f"{sample['variant']} #{sample['rep']}: {what}",
        file=sys.stderr,
        flush=True,
    )


def _machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def settings_note(plan: FailoverPlan) -> str:
    g, r = plan.gateway, plan.rep
    return (
        f"Gateway: GATEWAY_FIRST_OUTPUT_VOICE_S={g.first_output_voice_s:g}, "
        f"GATEWAY_OUTPUT_GAP_S={g.output_gap_s:g}, "
        f"GATEWAY_UPSTREAM_RECONNECT_ATTEMPTS={g.reconnect_attempts} "
        f"(backoff {g.reconnect_backoff_s:g} s), GATEWAY_BREAKER_FAILURES={g.breaker_failures} "
        f"(the breaker never opens). Voice sessions, 16 kHz in / 24 kHz out, an open "
        f"microphone (20 ms frames in real time); an utterance is {r.tone_ms} ms of tone; "
        f"stall_mid stops after {r.stall_after_chunks} chunks of 20 ms; the OpenAI fake speaks "
        f"at pace {plan.openai_pace:g}, the Gemini fake at once. One session at a time; the "
        "gateway in its own process."
    )


def main(out: Path, docs: Path, plan: FailoverPlan) -> int:
    began = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "failover-samples.jsonl"
    log.write_text("")
    total = len(schedule(plan.faults, plan.tools))
    print(
        f"failover: {plan.faults} voice faults per kind, {plan.tools} with a tool call "
        f"(lost, stalls), {plan.tools} references: {total} sessions; progress on stderr, "
        f"each sample in {log} as it comes",
        file=sys.stderr,
        flush=True,
    )
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
            samples, run = asyncio.run(_run(plan, Path(tmp), log))
            gateway_log = Path(run["gateway_log"])
            if gateway_log.exists():  # kept: what the gateway said about each failover
                (out / "failover-gateway.log").write_bytes(gateway_log.read_bytes())
    except KeyboardInterrupt:
        print("failover: interrupted; the fakes and the gateway were stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    deadlines = {
        "first_output_voice_s": plan.gateway.first_output_voice_s,
        "output_gap_s": plan.gateway.output_gap_s,
    }
    summary = summarize(samples, deadlines)
    report = {
        "machine": _machine(),
        "plan": dataclasses.asdict(plan),
        "settings": settings_note(plan),
        "run": run,
        "noisy_other_cores": NOISY_OTHER_CORES,
        "summary": summary,
        "samples": samples,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    (out / "failover.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    table = render(summary)
    cpu = run["cpu"]
    noise = (
        f"CPU over the run: gateway {cpu['cores'].get('gateway', 0):.2f} cores, bench (fakes and "
        f"client) {cpu['cores'].get('bench', 0):.2f}, other processes {cpu['other_cores']:.2f}"
        + (" (**noisy**)" if cpu["noisy"] else "")
    )
    text = "\n\n".join([table, settings_note(plan), noise])
    (out / "failover.md").write_text(text + "\n")
    print(text)
    written = _plot(report, docs)
    print(
        f"\nfailover: {(time.monotonic() - began) / 60:.1f} min; every sample in "
        f"{out / 'failover.json'}; plot: {written or 'none'}"
    )
    failed_targets = [
        (kind, v["measure"])
        for kind, row in summary["kinds"].items()
        for v in row["targets"]
        if v["met"] is False
    ]
    return 1 if failed_targets or len(samples) < run["scheduled"] else 0


def _plot(report: dict[str, Any], docs: Path) -> Path | None:
    try:
        from bench.failover.plot import render_failover_plot
    except ImportError as error:  # matplotlib missing: scripts/bench installs the bench extra
        print(f"no plot: {error}", file=sys.stderr)
        return None
    machine = report["machine"]
    caption = f"{machine['date'][:10]}, {machine['cpu_model']}, {machine['cpu_count']} cores"
    return render_failover_plot(report, docs / "failover.png", caption)
