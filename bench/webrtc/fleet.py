"""The processes of ``scripts/bench webrtc``: the OpenAI fake, the gateway, the client workers.

One fake (``fakes.openai_realtime`` in its normal mode: its server VAD hears the user out and its
model answers, as in ``scripts/bench latency``) and one gateway in front of it serve the whole
run. The gateway runs as ``python -m bench.webrtc.probe`` (``gateway serve`` with the bench's
counting thread, idle until asked), auth off and limits lifted as in every bench
(``bench.relay.procs``). Placement as in ``bench.latency.fleet``: the gateway alone on one core,
the fake, this process and the client workers on the other; the box has two.

``run_phase`` runs one set of lanes: it starts the workers (``bench.webrtc.worker``), each with
its share of the lanes (round robin), waits until every lane is open, gives them one start a
second ahead, measures the CPU of each role over the schedule's window (``/proc``), calls
``tick`` every ``tick_s`` meanwhile, then collects the workers' records. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.latency.turns import TurnSchedule
from bench.relay.procs import (
    CLOCK_TICKS_PER_S,
    ChildProcess,
    free_port,
    gateway_env_openai,
    plan_cores,
    wait_for_log_line,
    wait_until_ready,
)
from bench.relay.stats import cpu_usage
from bench.suite.procs import pin_tree, tree_snapshot
from bench.webrtc.lanes import LaneConfig
from bench.webrtc.worker import GRACE_S, write_whole

__all__ = ["PhaseResult", "Stage", "run_phase", "start_stage"]

READY_TIMEOUT_S = 60.0
START_MARGIN_S = 1.0


@dataclass(frozen=True)
class Stage:
    fake: ChildProcess
    gateway: ChildProcess
    gateway_url: str
    probe_url: str
    placement: dict[str, Any]

    def check(self) -> None:
        self.fake.ensure_alive()
        self.gateway.ensure_alive()

    def counts(self) -> dict[str, Any]:
        """The probe's counts of the gateway's tasks, aiortc objects and threads."""
        with urllib.request.urlopen(f"{self.probe_url}/counts", timeout=60) as response:
            data: dict[str, Any] = json.loads(response.read())
        return data


def _start_fake(log_dir: Path) -> tuple[ChildProcess, str]:
    argv = [sys.executable, "-m", "fakes.openai_realtime", "--port", str(free_port()), "--no-log"]
    child = ChildProcess("openai fake", argv, os.environ, log_dir / "openai-fake.log")
    try:
        line = wait_for_log_line(child, "listening ", 20.0)
    except BaseException:
        child.stop()
        raise
    return child, line.split("listening ", 1)[1].strip()


def _start_gateway(fake_url: str, log_dir: Path) -> tuple[ChildProcess, str, str]:
    port, probe_port = free_port(), free_port()
    data_dir = log_dir / "gateway-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        **gateway_env_openai(fake_url),
        "GATEWAY_AUTH": "none",
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(port),
        "GATEWAY_LOG_LEVEL": "warning",
        "GATEWAY_CONNECTIONS_PER_MINUTE": "100000",
        "GATEWAY_MAX_SESSIONS": "100000",
        "GATEWAY_DATA_DIR": str(data_dir),
        "BENCH_PROBE_PORT": str(probe_port),
    }
    argv = [sys.executable, "-m", "bench.webrtc.probe"]
    child = ChildProcess("gateway", argv, env, log_dir / "gateway.log")
    try:
        wait_until_ready(child, f"http://127.0.0.1:{port}/readyz", 30.0)
    except BaseException:
        child.stop()
        raise
    return child, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{probe_port}"


def _place(gateway: ChildProcess, fake: ChildProcess) -> dict[str, Any]:
    cores, note = plan_cores()
    if cores is None:
        return {"pinned": False, "note": note}
    try:
        os.sched_setaffinity(0, {cores.load_core})
        pin_tree(fake.pid, cores.load_core)
        pin_tree(gateway.pid, cores.relay_core)
    except OSError as error:
        return {"pinned": False, "note": f"pinning refused: {error}"}
    return {"pinned": True, "gateway_core": cores.relay_core, "others_core": cores.load_core}


def start_stage(log_dir: Path, stack: contextlib.ExitStack) -> Stage:
    """The fake and the gateway, placed; ``stack`` stops both and gives back our affinity."""
    log_dir.mkdir(parents=True, exist_ok=True)
    fake, fake_url = _start_fake(log_dir)
    stack.callback(fake.stop)
    gateway, gateway_url, probe_url = _start_gateway(fake_url, log_dir)
    stack.callback(gateway.stop)
    stack.callback(os.sched_setaffinity, 0, os.sched_getaffinity(0))
    return Stage(fake, gateway, gateway_url, probe_url, _place(gateway, fake))


@dataclass
class PhaseResult:
    lanes: list[dict[str, Any]]
    open_failures: list[str]
    cpu: dict[str, Any]  # seconds and cores per role over the schedule's window


def _wait_for_files(paths: list[Path], workers: list[ChildProcess], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(path.exists() for path in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the workers were not done in {timeout_s:.0f} s")
        for worker in workers:
            if not worker.alive() and not all(path.exists() for path in paths):
                worker.ensure_alive()  # exited without its file: raises with its log
        time.sleep(0.05)


def run_phase(
    stage: Stage,
    lanes: list[LaneConfig],
    schedule: TurnSchedule,
    work_dir: Path,
    workers: int = 2,
    tick: Callable[[float], None] | None = None,
    tick_s: float = 10.0,
) -> PhaseResult:
    work_dir.mkdir(parents=True, exist_ok=True)
    shares = [lanes[index::workers] for index in range(workers) if lanes[index::workers]]
    specs: list[dict[str, Any]] = []
    children: list[ChildProcess] = []
    go_path = work_dir / "go"
    go_path.unlink(missing_ok=True)
    try:
        for index, share in enumerate(shares):
            spec: dict[str, Any] = {
                "gateway_url": stage.gateway_url,
                "lanes": [asdict(lane) for lane in share],
                "schedule": asdict(schedule),
                "concurrency": 4,
                "ready_path": str(work_dir / f"ready-{index}"),
                "go_path": str(go_path),
                "result_path": str(work_dir / f"result-{index}.json"),
            }
            for key in ("ready_path", "result_path"):
                Path(spec[key]).unlink(missing_ok=True)
            spec_path = work_dir / f"spec-{index}.json"
            spec_path.write_text(json.dumps(spec))
            specs.append(spec)
            argv = [sys.executable, "-m", "bench.webrtc.worker", str(spec_path)]
            log = work_dir / f"worker-{index}.log"
            children.append(ChildProcess(f"worker {index}", argv, os.environ, log))
        ready = [Path(spec["ready_path"]) for spec in specs]
        _wait_for_files(ready, children, READY_TIMEOUT_S + len(lanes))
        failures = [f for path in ready for f in json.loads(path.read_text())["failures"]]
        start = time.monotonic() + START_MARGIN_S
        write_whole(go_path, repr(start))
        roles = {
            "gateway": [stage.gateway.pid],
            "fake": [stage.fake.pid],
            "clients": [child.pid for child in children],
        }
        time.sleep(max(0.0, start - time.monotonic()))
        before = tree_snapshot(roles)
        end = start + schedule.duration_s
        next_tick = start + tick_s
        while (now := time.monotonic()) < end:
            if tick is not None and now >= next_tick:
                tick(now - start)
                next_tick += tick_s
            time.sleep(min(end, next_tick) - now if tick is not None else end - now)
        usage = cpu_usage(before, tree_snapshot(roles), CLOCK_TICKS_PER_S)
        results = [Path(spec["result_path"]) for spec in specs]
        _wait_for_files(results, children, 3 * GRACE_S + 30.0)
        stage.check()
    finally:
        for child in children:
            child.stop()
    records = [lane for path in results for lane in json.loads(path.read_text())["lanes"]]
    cpu = {
        "window_s": round(usage.wall_s, 2),
        "seconds": {role: round(s, 3) for role, s in usage.process_s.items()},
        "cores": {role: round(s / usage.wall_s, 4) for role, s in usage.process_s.items()},
        "other_cores": round(usage.other_cores, 3),
        "steal_cores": round(usage.steal_cores, 3),  # the hypervisor's: a slower box
        "noisy": usage.noisy,
    }
    return PhaseResult(records, failures, cpu)
