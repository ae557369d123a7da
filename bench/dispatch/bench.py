"""``scripts/bench dispatch``: the cost of one tool call, on the fake's clock, with a no-op tool.

One OpenAI fake in echo + dispatch mode (``fakes.openai_realtime.dispatch``) is the
upstream of every target. A dispatching session streams 20 ms frames at 50 fps and makes one in
``every`` a marker frame; the fake answers each marker with a whole function-call response for
``noop`` and stamps two instants on its own clock: the response's last frame written, and the
arrival of that call's ``function_call_output``. The difference is the dispatch overhead: the
target reading the call, deciding, running the no-op and answering, with no client in the loop.

Targets, interleaved, repetition after repetition:

- ``direct``: the dispatching client speaks to the fake itself and answers each call at once
  (the limit: the fake and one client);
- ``gateway``: ``python -m gateway serve`` with a registry of the project's tools plus
  ``bench/tools/noop`` (a ``utility`` tool, no confirmation) and the per-turn round limit lifted
  (the dispatching session never speaks, so every call falls in one turn);
- ``gateway_base`` (with ``--baseline REV``): the same, run from a worktree of ``REV`` with its
  own registry build: the gateway before a change, in the same run;
- ``pipecat``: ``bench/peers/external/pipecat_dispatch.py`` in its own venv, the relay peer's
  server with ``llm.register_function("noop", handler)``.

Then one more row, the HTTP tool's (``bench.dispatch.http_tool``): what the gateway's HTTP tool path
adds to a call of the example care API, against the same request made directly with aiohttp
from the same process to the same server (``http_calls`` of each, alternately).

Each is measured with 0 and with ``background`` echo sessions at 50 fps through the same
target (from ``goload`` when it builds, else from this process), and the share of their echo
that came back is reported: a target that falls behind them is saturated. The target is pinned
alone to one core; the fake, this process (the dispatcher) and the background share the other
(for ``direct`` the fake is alone, as in ``scripts/bench relay``). Each path is primed once
before the matrix and the first ``WARMUP`` calls of each run are not measured. The CPU other
processes used is recorded, and a run where it exceeds ``NOISY_OTHER_CORES`` is flagged and run
once more (both are kept; the second counts). Results: a table and ``<out>/dispatch.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from bench.dispatch.http_tool import run_http_row
from bench.dispatch.load import (
    BackgroundResult,
    DispatchPlan,
    Endpoint,
    run_background,
    run_dispatcher,
    run_go_background,
)
from bench.dispatch.procs import (
    ROOT,
    TOOL_ROUNDS_PER_TURN,
    TimingsReader,
    build_registry,
    start_dispatch_fake,
    start_dispatch_gateway,
    start_pipecat,
)
from bench.dispatch.stats import (
    TARGET_P99_MS,
    Timing,
    call_number,
    render_report,
    summarize,
    summarize_http,
)
from bench.goload_runner import ensure_goload
from bench.relay.procs import (
    CLOCK_TICKS_PER_S,
    ChildProcess,
    CorePlan,
    pin_process,
    plan_cores,
    take_snapshot,
)
from bench.relay.stats import NOISY_OTHER_CORES, cpu_usage

__all__ = ["Settings", "main"]

TARGETS = ("direct", "gateway", "gateway_base", "pipecat")
_MEASURED_ROLE = {"direct": "fake"}  # whose CPU a target's run is about (else its own)
WARMUP = 5  # calls per run not measured
_SETTLE_S = 1.0  # after the background is up, before the dispatcher starts
_BACKGROUND_OPEN_S = 120.0
_GRACE_S = 3.0  # after the last call, for its answer
_IDLE_CORES = 0.05  # a process under this is idle


@dataclass(frozen=True)
class Settings:
    reps: int
    dispatches: int  # measured per run, after WARMUP
    every: int  # one frame in this many is a marker: dispatches per second = 50 / every
    background: int  # echo sessions in the loaded rows
    http_calls: int = 1000  # the HTTP tool row: calls of each path, after its warm-up

    @classmethod
    def of(cls, quick: bool) -> Settings:
        if quick:
            return cls(reps=1, dispatches=40, every=2, background=10, http_calls=100)
        return cls(reps=3, dispatches=70, every=4, background=100)

    @property
    def plan(self) -> DispatchPlan:
        return DispatchPlan(dispatches=self.dispatches + WARMUP, every=self.every)


class _Setup:
    """The children, the endpoint of each target, and the processes each target's run pins."""

    def __init__(
        self, work: Path, children: contextlib.ExitStack, baseline: Path | None = None
    ) -> None:
        self.load_core: int | None = None  # where goload is pinned, once the cores are planned
        self.goload: Path | None = None
        self.background_driver = "python (this process)"
        try:
            self.goload = ensure_goload(ROOT)
            self.background_driver = "goload"
        except (RuntimeError, OSError) as error:
            print(f"dispatch bench: no goload, Python background: {error}", file=sys.stderr)
        self.timings = TimingsReader(work / "timings.jsonl")
        self.fake, fake_url = start_dispatch_fake(work, self.timings.path)
        children.callback(self.fake.stop)
        registry = build_registry(work / "dispatch_registry.json")
        self.gateway, gateway_url = start_dispatch_gateway(fake_url, registry, work)
        children.callback(self.gateway.stop)
        self.endpoints: dict[str, Endpoint] = {
            "direct": Endpoint("direct", "openai", f"{fake_url}/realtime?model=gpt-realtime"),
            "gateway": Endpoint(
                "gateway", "gateway", gateway_url.replace("http://", "ws://", 1) + "/v1/session"
            ),
        }
        self.processes: dict[str, ChildProcess] = {"gateway": self.gateway}
        if baseline is not None:
            base_registry = build_registry(work / "base_registry.json", source=baseline)
            base, base_url = start_dispatch_gateway(fake_url, base_registry, work, source=baseline)
            children.callback(base.stop)
            self.endpoints["gateway_base"] = Endpoint(
                "gateway_base", "gateway", base_url.replace("http://", "ws://", 1) + "/v1/session"
            )
            self.processes["gateway_base"] = base
        self.versions: dict[str, str] = {}
        self.skipped: dict[str, str] = {}
        try:
            pipecat, pipecat_url, self.versions = start_pipecat(fake_url, work)
        except (RuntimeError, TimeoutError, OSError) as error:
            self.skipped["pipecat"] = str(error)[-500:]
            print(f"dispatch bench: pipecat skipped: {error}", file=sys.stderr)
        else:
            children.callback(pipecat.stop)
            self.endpoints["pipecat"] = Endpoint("pipecat", "pcm", pipecat_url)
            self.processes["pipecat"] = pipecat

    @property
    def targets(self) -> list[str]:
        return [target for target in TARGETS if target in self.endpoints]

    def pids(self) -> dict[str, int]:
        roles = {name: child.pid for name, child in self.processes.items()}
        return {**roles, "fake": self.fake.pid, "load": os.getpid()}

    def place(self, cores: CorePlan | None, target: str) -> None:
        """The measured target alone on the relay core; everything else on the load core."""
        if cores is None:
            return
        alone = self.fake.pid if target == "direct" else self.processes[target].pid
        for pid in [self.fake.pid, *(child.pid for child in self.processes.values())]:
            pin_process(pid, cores.relay_core if pid == alone else cores.load_core)

    def check(self) -> None:
        self.fake.ensure_alive()
        for child in self.processes.values():
            child.ensure_alive()


async def _wait_idle(pid: int, timeout_s: float = 15.0) -> None:
    """Until ``pid`` uses under ``_IDLE_CORES`` over a tenth of a second (sessions of the last
    run torn down), at most ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        before = take_snapshot({"target": pid})
        await asyncio.sleep(0.1)
        used = cpu_usage(before, take_snapshot({"target": pid}), CLOCK_TICKS_PER_S)
        if used.process_s["target"] / used.wall_s < _IDLE_CORES:
            return


async def _until_ready(ready: asyncio.Event, loader: asyncio.Task[BackgroundResult]) -> None:
    """The background is up, or its failure is raised; bounded."""
    waiter = asyncio.create_task(ready.wait())
    try:
        await asyncio.wait(
            {waiter, loader}, timeout=_BACKGROUND_OPEN_S, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        waiter.cancel()
    if loader.done():
        loader.result()  # a failure surfaces here
    if not ready.is_set():
        raise TimeoutError(f"the background was not up in {_BACKGROUND_OPEN_S:.0f} s")


async def _run_once(
    setup: _Setup, target: str, background: int, settings: Settings
) -> dict[str, Any]:
    endpoint = setup.endpoints[target]
    stop, ready = asyncio.Event(), asyncio.Event()
    timings: list[Timing] = []

    async def settled() -> None:
        """Collect this run's timings until every measured call is answered, or the grace."""
        deadline = asyncio.get_running_loop().time() + _GRACE_S
        while len(timings) < settings.dispatches and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
            fresh = setup.timings.read_new()
            timings.extend(t for t in fresh if call_number(t.call_id) > WARMUP)

    for pid in setup.pids().values():
        if pid != os.getpid():
            await _wait_idle(pid)
    load_task: Coroutine[Any, Any, BackgroundResult]
    if background and setup.goload is not None:  # its own warm-up second is the settling time
        seconds = settings.plan.seconds + 0.5  # the calls are answered during its grace
        load_task = run_go_background(
            setup.goload, endpoint, background, seconds, ready, setup.load_core
        )
    else:
        load_task = run_background(endpoint, background, stop, ready)
    loader = asyncio.create_task(load_task)
    try:
        await _until_ready(ready, loader)
        if background and setup.goload is None:
            await asyncio.sleep(_SETTLE_S)
        setup.timings.read_new()  # anything older is not this run's
        before = take_snapshot(setup.pids())
        dispatcher = await run_dispatcher(endpoint, settings.plan, settled)
        after = take_snapshot(setup.pids())
    finally:
        stop.set()
        async with asyncio.timeout(60.0):
            load = await loader
    usage = cpu_usage(before, after, CLOCK_TICKS_PER_S)
    other_cores = max(0.0, usage.other_cores - load.loadgen_cores)  # goload is one of ours
    return {
        "target": target,
        "background": background,
        "durations_ms": [round(t.duration_ms, 4) for t in timings],
        "sent": settings.dispatches,
        "lost": max(0, settings.dispatches - len(timings)),
        "dispatcher_events": dict(dispatcher.events),
        "answered_by_client": dispatcher.answered_by_client,
        "background_driver": setup.background_driver if background else None,
        "background_sent": load.sent,
        "background_back": load.back,
        "background_lost": load.lost,
        "background_setup_s": round(load.setup_s, 3),
        "background_events": dict(load.events),
        "cpu_s": {role: round(seconds, 3) for role, seconds in usage.process_s.items()},
        # how busy the measured process was (the fake for direct): near 1, it is saturated
        "target_cores": round(
            usage.process_s[_MEASURED_ROLE.get(target, target)] / usage.wall_s, 3
        ),
        "window_s": round(usage.wall_s, 3),
        "loadgen_cores": round(load.loadgen_cores, 4),
        "other_cores": round(other_cores, 4),
        "noisy": other_cores > NOISY_OTHER_CORES,
    }


def _failed(
    target: str, background: int, settings: Settings, error: BaseException
) -> dict[str, Any]:
    """A run that could not be carried out (its background did not start, …): all calls lost."""
    return {
        "target": target,
        "background": background,
        "error": f"{type(error).__name__}: {error}"[-1000:],
        "durations_ms": [],
        "sent": settings.dispatches,
        "lost": settings.dispatches,
        "background_sent": 0,
        "background_back": 0,
        "target_cores": None,
        "other_cores": None,
        "noisy": False,
    }


async def _no_wait() -> None:
    await asyncio.sleep(0.2)


async def _matrix(
    setup: _Setup, cores: CorePlan | None, settings: Settings
) -> list[dict[str, Any]]:
    for target in setup.targets:  # prime each path (first session, imports); not recorded
        setup.place(cores, target)
        await run_dispatcher(setup.endpoints[target], DispatchPlan(WARMUP, every=2), _no_wait)
    records: list[dict[str, Any]] = []
    for rep in range(settings.reps):
        for background in (0, settings.background):
            order = setup.targets if rep % 2 == 0 else setup.targets[::-1]
            for target in order:
                setup.place(cores, target)
                for attempt in range(2):  # a noisy run is run once more; both are kept
                    try:
                        record = await _run_once(setup, target, background, settings)
                    except (RuntimeError, TimeoutError, OSError) as error:  # kept, not fatal
                        record = _failed(target, background, settings, error)
                    record["rep"] = rep
                    setup.check()
                    print(_progress(record), file=sys.stderr, flush=True)
                    if attempt == 0 and record["noisy"]:
                        record["retried"] = True
                    records.append(record)
                    if not record.get("retried"):
                        break
    return records


def _progress(record: dict[str, Any]) -> str:
    durations = sorted(record["durations_ms"])
    p50 = f"{durations[len(durations) // 2]:.3f}" if durations else "–"
    return (
        f"  rep {record['rep'] + 1} {record['target']:<8} {record['background']:>4} background: "
        f"n {len(durations)}, p50 {p50} ms, lost {record['lost']}, "
        + (
            f"failed: {record['error']}"
            if "error" in record
            else f"other {record['other_cores']:.2f} cores"
        )
    )


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _machine(cores: CorePlan | None, pinned: bool, note: str) -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "allowed_cpus": sorted(os.sched_getaffinity(0)),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "pinning": {
            "pinned": pinned,
            "note": note,
            "relay_core": cores.relay_core if cores else None,
            "load_core": cores.load_core if cores else None,
            "placement": "the measured target alone on the relay core (the fake for direct); "
            "the fake, the dispatcher and the background sessions on the load core",
        },
    }


def _http_row(work: Path, settings: Settings, cores: CorePlan | None) -> dict[str, Any]:
    """The HTTP tool row, measured alone on the relay core (the gateway is idle by now)."""
    try:
        durations = run_http_row(work, settings.http_calls, cores.relay_core if cores else None)
    except (RuntimeError, TimeoutError, OSError) as error:  # kept, not fatal
        print(f"dispatch bench: HTTP tool row failed: {error}", file=sys.stderr, flush=True)
        return {"error": f"{type(error).__name__}: {error}"[-1000:]}
    row = summarize_http(durations)
    print(
        f"  HTTP tool: p50 {row['paths']['http_tool']['p50_ms']} ms, direct "
        f"{row['paths']['direct']['p50_ms']} ms, added {row['added_p50_ms']} ms",
        file=sys.stderr,
        flush=True,
    )
    return {**row, "durations_ms": durations}


def main(
    out: Path,
    *,
    quick: bool = False,
    settings: Settings | None = None,
    baseline: Path | None = None,
) -> int:
    """Measure, print the table, write ``<out>/dispatch.json``; 1 if a call went unanswered.

    ``settings`` (for experiments) replaces the full or ``quick`` defaults; ``baseline``: a
    worktree of another commit, measured as ``gateway_base`` beside ``gateway``."""
    began = time.monotonic()
    settings = settings or Settings.of(quick)
    cores, pin_note = plan_cores()
    previous_handler = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-dispatch-") as tmp,
            contextlib.ExitStack() as children,
        ):
            setup = _Setup(Path(tmp), children, baseline)
            pinned = False
            if cores is not None:
                try:
                    pin_process(os.getpid(), cores.load_core)
                    setup.load_core = cores.load_core
                    pinned = True
                except OSError as error:
                    cores, pin_note = None, f"pinning refused: {error}"
            print(
                f"dispatch bench: targets {setup.targets}, {settings.reps} reps × "
                f"{settings.dispatches} calls (+{WARMUP} warm-up), one every "
                f"{settings.every * 20} ms, background 0 and {settings.background}, pinned: "
                f"{pinned}",
                file=sys.stderr,
                flush=True,
            )
            records = asyncio.run(_matrix(setup, cores, settings))
            http_row = _http_row(Path(tmp), settings, cores)
            unreadable = setup.timings.unreadable
            versions, skipped = setup.versions, setup.skipped
            setup_driver = setup.background_driver
    except KeyboardInterrupt:
        print("dispatch bench: interrupted; its processes were stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    measured = [r for r in records if not r.get("retried")]
    rows = summarize(measured)
    elapsed = time.monotonic() - began
    report = {
        "machine": _machine(cores, pinned, pin_note),
        "settings": {
            **asdict(settings),
            "warmup_calls": WARMUP,
            "fps": settings.plan.fps,
            "frame_bytes": 960,
            "tool": "noop (bench/tools/noop: utility, low sensitivity, no confirmation)",
            "gateway_tool_rounds_per_turn": TOOL_ROUNDS_PER_TURN,
            "clock": "the fake's perf_counter_ns: last frame of the call response written → "
            "function_call_output frame read",
            "noisy_other_cores": NOISY_OTHER_CORES,
            "target_p99_ms": TARGET_P99_MS,
            "compression": "off on every hop",
            "background_driver": setup_driver,
        },
        "peers": {"pipecat": versions} if versions else {},
        "skipped": skipped,
        "unreadable_timing_lines": unreadable,
        "runs": records,
        "summary": rows,
        "http_tool": http_row,
        "elapsed_s": round(elapsed, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    out_file = out / "dispatch.json"
    out_file.write_text(json.dumps(report, indent=2) + "\n")
    print(render_report(report))
    print(f"\n{len(records)} runs in {elapsed:.0f} s; every run in {out_file}")
    return 1 if any(row["lost"] for row in rows) else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.dispatch.bench")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    parser.add_argument("--quick", action="store_true", help="1 rep, 40 calls, 10 background")
    parser.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    parser.add_argument("--calls", type=int, help="measured calls per run (default 70)")
    parser.add_argument("--every", type=int, help="one frame in this many is a call (default 4)")
    parser.add_argument("--background", type=int, help="echo sessions (default 100)")
    parser.add_argument("--http-calls", type=int, help="HTTP tool row: calls per path (1000)")
    arguments = parser.parse_args()
    chosen = Settings.of(arguments.quick)
    chosen = Settings(
        reps=arguments.reps or chosen.reps,
        dispatches=arguments.calls or chosen.dispatches,
        every=arguments.every or chosen.every,
        background=arguments.background or chosen.background,
        http_calls=arguments.http_calls or chosen.http_calls,
    )
    sys.exit(main(arguments.out, settings=chosen))
