"""``scripts/bench latency``: the voice-to-voice latency the gateway adds, per audio path.

For each upstream (the OpenAI Realtime fake, then the Gemini Live fake; ``bench.latency.fleet``)
one fake and one gateway serve two phases, one after the other, each of eight lanes side by side
(``bench.latency.lanes``), two per path: the ``main`` phase (the browser paths and Twilio's phone)
then the ``carriers`` phase (the phones of the four other carriers, on ``/phone/media``):

==============  =========================================  =====================================
path            through the gateway                        direct (the baseline), to the fake
==============  =========================================  =====================================
*main*
browser 24 kHz  ``/v1/session``, PCM16 24 kHz in and out   OpenAI: PCM16 24 kHz; Gemini: 16 kHz
browser 16 kHz  ``/v1/session``, PCM16 16 kHz in and out   the same
browser 48 kHz  ``/v1/session``, PCM16 48 kHz in and out   the same
phone           ``/twilio/media``, µ-law 8 kHz             OpenAI: ``audio/pcmu``; Gemini: 16 kHz
*carriers*
phone_telnyx    ``/phone/media`` as Telnyx, µ-law 8 kHz    OpenAI: ``audio/pcmu``; Gemini: 16 kHz
phone_plivo     ``/phone/media`` as Plivo, µ-law 8 kHz     OpenAI: ``audio/pcmu``; Gemini: 16 kHz
phone_vonage    ``/phone/media`` as Vonage, PCM16 16 kHz   OpenAI: PCM16 24 kHz; Gemini: 16 kHz
phone_exotel    ``/phone/media`` as Exotel, PCM16 8 kHz    OpenAI: PCM16 24 kHz; Gemini: 16 kHz
==============  =========================================  =====================================

Why two phases and not sixteen lanes in one: the box has two cores, the gateway pinned alone to
one, the fake and every client lane on the other. Sixteen lanes would halve the stagger between
turns and double the gateway's concurrent calls, changing the conditions the first eight paths
have always been measured in; a second phase of the same shape (eight lanes, four through the
gateway, each gateway lane next to its own direct lane) keeps them, and measures the carriers in
the same conditions as Twilio. The cost is time: each phase lasts its schedule
(``LatencyPlan.estimate_s``). ``LatencyPlan.phases`` (``python -m bench.latency --phases``)
runs either alone.

A turn is ``speech_ms`` of a synthetic vowel then silence to the end of its slot; the fake's
server VAD ends the utterance after its silence (OpenAI: the gateway's server VAD defaults,
500 ms; Gemini: the fake's default, 300 ms, as the gateway sets none) and answers with audio.
A turn's latency runs from the send of its last speech frame to the arrival of the first
message with reply audio; the same rule for every lane (``bench.latency.turns``). Writes
``<out>/latency.json`` (every turn), ``<out>/latency.md`` and ``<docs>/latency.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import platform
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from bench.latency.audio import WireFormat, utterance
from bench.latency.carrier_peers import (
    EXOTEL_CHUNK_MS,
    EXOTEL_RATE,
    VONAGE_RATE,
    ExotelPhone,
    PlivoPhone,
    TelnyxPhone,
    VonagePhone,
)
from bench.latency.fleet import Phase, start_phase
from bench.latency.lanes import LaneResult, LaneSpec, run_phase
from bench.latency.peers import GatewayBrowser, GeminiDirect, OpenAIDirect, Peer, TwilioPhone
from bench.latency.stats import CARRIER_PATHS, PATHS, UPSTREAMS, render, summarize
from bench.latency.turns import TurnSchedule
from bench.relay.procs import CLOCK_TICKS_PER_S, collector_paused, take_snapshot
from bench.relay.stats import NOISY_OTHER_CORES, cpu_usage
from bench.relay.targets import direct_url

__all__ = ["PHASES", "LatencyPlan", "lane_specs", "main"]

BROWSER_RATES = {"browser_24k": 24000, "browser_16k": 16000, "browser_48k": 48000}
# The phases of each upstream, in the order they run, and their paths.
PHASES: dict[str, tuple[str, ...]] = {
    "main": tuple(path for path in PATHS if path not in CARRIER_PATHS),
    "carriers": CARRIER_PATHS,
}
# Each phone path: its peer (built from the gateway's http://… URL) and the caller's line.
PhonePeer = Callable[[str], Peer]
PHONES: dict[str, tuple[PhonePeer, WireFormat, int]] = {
    "phone": (TwilioPhone, "pcmu", 8000),
    "phone_telnyx": (TelnyxPhone, "pcmu", 8000),
    "phone_plivo": (PlivoPhone, "pcmu", 8000),
    "phone_vonage": (VonagePhone, "pcm16", VONAGE_RATE),
    "phone_exotel": (ExotelPhone, "pcm16", EXOTEL_RATE),
}


@dataclass(frozen=True)
class LatencyPlan:
    turns: int = 200  # measured, per lane
    warmup: int = 3  # turns per lane before them, not measured
    speech_ms: int = 300
    # a slot holds the utterance, the VAD's silence, the reply (paced at real time on a phone
    # call: 300 ms for the fakes' three words) and a margin of quiet before the next turn
    slot_ms: dict[str, int] = field(default_factory=lambda: {"openai": 1300, "gemini": 1100})
    upstreams: tuple[str, ...] = UPSTREAMS
    phases: tuple[str, ...] = tuple(PHASES)  # run per upstream, in this order

    def __post_init__(self) -> None:
        unknown = [phase for phase in self.phases if phase not in PHASES]
        if unknown or not self.phases:
            raise ValueError(f"phases must be some of {list(PHASES)}: {list(self.phases)}")
        if "phone_exotel" in self.paths:  # its turns must fall on its 100 ms chunks
            grid = [self.speech_ms, *(self.slot_ms[u] for u in self.upstreams)]
            if any(ms % EXOTEL_CHUNK_MS for ms in grid):
                raise ValueError(
                    f"with Exotel's lanes, speech_ms and slot_ms are multiples of "
                    f"{EXOTEL_CHUNK_MS} ms (its chunks): {grid}"
                )

    @classmethod
    def quick(cls, **changes: Any) -> LatencyPlan:
        return cls(turns=20, warmup=2, **changes)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(path for phase in self.phases for path in PHASES[phase])

    def schedule(self, upstream: str) -> TurnSchedule:
        return TurnSchedule(self.turns, self.warmup, self.slot_ms[upstream], self.speech_ms)

    def estimate_s(self) -> float:
        """Each phase lasts its schedule, plus about 10 s: the processes' start (the first
        phase of an upstream), the lanes' opening, the grace after the last turn."""
        return len(self.phases) * sum(self.schedule(u).duration_s + 10 for u in self.upstreams)


def _direct(phase: Phase, path: str, speech_ms: int) -> LaneSpec:
    """The baseline of ``path``: the fake in its own protocol, at the format the gateway's
    session uses (OpenAI: µ-law for a µ-law phone, else PCM16 24 kHz; Gemini: PCM16 16 kHz)."""
    if phase.upstream == "openai":
        mulaw = path in PHONES and PHONES[path][1] == "pcmu"
        wire: WireFormat = "pcmu" if mulaw else "pcm16"
        url = direct_url("openai", phase.fake_url)
        return LaneSpec(
            path,
            phase.upstream,
            "direct",
            partial(OpenAIDirect, url, wire),
            utterance(wire, 8000 if mulaw else 24000, speech_ms),
        )
    url = direct_url("gemini", phase.fake_url)
    return LaneSpec(
        path,
        phase.upstream,
        "direct",
        partial(GeminiDirect, url),
        utterance("pcm16", 16000, speech_ms),
        phase.ca_file,
    )


def _through_gateway(phase: Phase, path: str, speech_ms: int) -> LaneSpec:
    if path in PHONES:
        make, wire, rate = PHONES[path]
        return LaneSpec(
            path,
            phase.upstream,
            "gateway",
            partial(make, phase.gateway_url),
            utterance(wire, rate, speech_ms),
        )
    rate = BROWSER_RATES[path]
    gateway_ws = phase.gateway_url.replace("http://", "ws://", 1) + "/v1/session"
    return LaneSpec(
        path,
        phase.upstream,
        "gateway",
        partial(GatewayBrowser, gateway_ws, rate),
        utterance("pcm16", rate, speech_ms),
    )


def lane_specs(
    phase: Phase, speech_ms: int, paths: tuple[str, ...] = PHASES["main"]
) -> list[LaneSpec]:
    """Per path, the direct lane then the gateway lane."""
    specs: list[LaneSpec] = []
    for path in paths:
        specs += [_direct(phase, path, speech_ms), _through_gateway(phase, path, speech_ms)]
    return specs


def _record(result: LaneResult, warmup: int) -> dict[str, Any]:
    tracker = result.tracker
    lags = sorted(result.send_lags_s)
    return {
        "upstream": result.spec.upstream,
        "path": result.spec.path,
        "target": result.spec.target,
        "latencies_ms": [
            None if value is None else round(value * 1000, 3)
            for value in tracker.latencies_s(warmup)
        ],
        "counts": tracker.counts(warmup),
        "frames_sent": result.frames_sent,
        "send_lag_p99_ms": round(lags[int(0.99 * (len(lags) - 1))] * 1000, 3) if lags else None,
        "send_lag_max_ms": round(lags[-1] * 1000, 3) if lags else None,
        "setup_s": round(result.setup_s, 3),
        "closed_early": result.closed_early,
        "events": result.events,
    }


def _run_upstream(upstream: str, plan: LatencyPlan, log_dir: Path) -> dict[str, Any]:
    """The plan's phases on one fake and one gateway: per phase, its CPU and its lanes."""
    with contextlib.ExitStack() as stack:
        began = time.monotonic()
        phase = start_phase(upstream, log_dir, stack)
        print(
            f"latency: {upstream}: fake and gateway up in {time.monotonic() - began:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        runs = {name: _run_lanes(phase, name, plan) for name in plan.phases}
        return {"placement": phase.placement, "phases": runs}


def _run_lanes(phase: Phase, name: str, plan: LatencyPlan) -> dict[str, Any]:
    upstream = phase.upstream
    specs = lane_specs(phase, plan.speech_ms, PHASES[name])
    schedule = plan.schedule(upstream)
    print(
        f"latency: {upstream} {name}: {len(specs)} lanes × {schedule.total_turns} turns of "
        f"{schedule.slot_ms} ms (about {schedule.duration_s:.0f} s)",
        file=sys.stderr,
        flush=True,
    )
    pids = {"gateway": phase.gateway.pid, "fake": phase.fake.pid, "clients": os.getpid()}
    before = take_snapshot(pids)
    with collector_paused():
        results = asyncio.run(run_phase(specs, schedule))
    usage = cpu_usage(before, take_snapshot(pids), CLOCK_TICKS_PER_S)
    phase.check()
    records = [_record(result, plan.warmup) for result in results]
    for record in records:
        print(_progress(record), file=sys.stderr, flush=True)
    cpu = {
        "window_s": round(usage.wall_s, 1),
        "cores": {role: round(s / usage.wall_s, 3) for role, s in usage.process_s.items()},
        "other_cores": round(usage.other_cores, 3),
        "noisy": usage.noisy,
    }
    print(f"  {upstream} {name}: CPU {cpu}", file=sys.stderr, flush=True)
    return {"cpu": cpu, "lanes": records}


def _progress(record: dict[str, Any]) -> str:
    values = sorted(v for v in record["latencies_ms"] if v is not None)
    p50 = f"{values[len(values) // 2]:.1f}" if values else "–"
    counts = record["counts"]
    return (
        f"  {record['upstream']:<6} {record['path']:<12} {record['target']:<7} "
        f"measured {counts['measured']}/{counts['turns']}, p50 ≈ {p50} ms, "
        f"send lag max {record['send_lag_max_ms']} ms, events {record['events'] or '-'}"
    )


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _machine() -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def main(out: Path, docs: Path, plan: LatencyPlan) -> int:
    began = time.monotonic()
    log_dir = out / "latency-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"latency: about {plan.estimate_s() / 60:.1f} min", file=sys.stderr, flush=True)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    phases: dict[str, Any] = {}
    try:
        for upstream in plan.upstreams:
            phases[upstream] = _run_upstream(upstream, plan, log_dir)
    except KeyboardInterrupt:
        print("latency: interrupted; the fakes and gateways were stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    runs = {
        f"{upstream}/{name}": run
        for upstream, phase in phases.items()
        for name, run in phase["phases"].items()
    }
    lanes = [lane for run in runs.values() for lane in run["lanes"]]
    rows = summarize(lanes)
    settings = asdict(plan)
    report = {
        "machine": _machine(),
        "settings": settings,
        "fakes": "defaults: --pace 0 (reply audio as fast as made), no first-audio delay; "
        "OpenAI server VAD as the gateway sets it (silence 500 ms, prefix 300 ms); Gemini "
        "automatic activity detection with the fake's default 300 ms silence",
        "placement": {upstream: phase["placement"] for upstream, phase in phases.items()},
        # per phase, "<upstream>/<phase>": main, carriers
        "cpu": {key: run["cpu"] for key, run in runs.items()},
        "noisy_other_cores": NOISY_OTHER_CORES,
        "summary": rows,
        "lanes": lanes,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "latency.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    table = "\n".join([render(rows, settings), _setup_note(plan), _cpu_note(report)])
    (out / "latency.md").write_text(table + "\n")
    print(table)
    written = _plot(report, docs)
    print(
        f"\nlatency: {(time.monotonic() - began) / 60:.1f} min; every turn in "
        f"{out / 'latency.json'}; table in {out / 'latency.md'}; plot: {written or 'none'}"
    )
    return 0 if all(row["added_p50_ms"] is not None for row in rows) else 1


def _setup_note(plan: LatencyPlan) -> str:
    slots = ", ".join(f"{upstream} {ms} ms" for upstream, ms in plan.slot_ms.items())
    return (
        f"Each lane streams 20 ms frames in real time; a turn is {plan.speech_ms} ms of a "
        f"synthetic vowel (fading out), then silence to the end of its slot ({slots}). The "
        "fakes run with their defaults (--pace 0, no first-audio delay): the OpenAI fake's "
        "server VAD as the gateway configures it (500 ms of silence ends the turn), the Gemini "
        "fake's automatic activity detection (300 ms). Per upstream, one fake and one gateway "
        f"serve {_phases_note(plan)}; each phase runs eight lanes side by side, a direct lane "
        "next to its gateway lane, their turns staggered by 1/8 of a slot. The phone lanes "
        "speak each carrier's own wire, with every marker echoed at once; Exotel's caller "
        f"audio goes in {EXOTEL_CHUNK_MS} ms chunks, as Exotel sends it. Audio the gateway holds "
        "back shows up in whole frames: the VAD needs the held samples, which leave with the "
        "next frame."
    )


def _phases_note(plan: LatencyPlan) -> str:
    titles = {
        "main": "the browser paths and Twilio's phone",
        "carriers": "the phones of Telnyx, Plivo, Vonage and Exotel",
    }
    described = [f"{titles[name]} ({name})" for name in plan.phases]
    if len(described) == 1:
        return f"one phase: {described[0]}"
    return "phases one after the other: " + ", then ".join(described)


def _cpu_note(report: dict[str, Any]) -> str:
    """Who else used the machine: a phase during which other processes used more than
    ``NOISY_OTHER_CORES`` is flagged (its tails say more about them than about the gateway)."""
    parts = []
    for phase, cpu in report["cpu"].items():
        flag = " **noisy**" if cpu["noisy"] else ""
        parts.append(
            f"{phase}: gateway {cpu['cores']['gateway']:.2f}, fake {cpu['cores']['fake']:.2f}, "
            f"clients {cpu['cores']['clients']:.2f}, other processes {cpu['other_cores']:.2f}{flag}"
        )
    return "CPU in cores over each phase: " + "; ".join(parts) + "."


def _plot(report: dict[str, Any], docs: Path) -> Path | None:
    try:
        from bench.latency.plot import render_latency_plot
    except ImportError as error:  # matplotlib missing: scripts/bench installs the bench extra
        print(f"no plot: {error}", file=sys.stderr)
        return None
    machine = report["machine"]
    caption = f"{machine['date'][:10]}, {machine['cpu_model']}, {machine['cpu_count']} cores"
    return render_latency_plot(report, docs / "latency.png", caption)
