"""Processes of ``scripts/bench dispatch``: the fake in dispatch mode, the gateway with the bench
registry, Pipecat with its no-op function, and the reader of the fake's timings file.

Children are ``bench.relay.procs.ChildProcess``es: output in a log file, ``PR_SET_PDEATHSIG``,
stopped by the caller on the way out; every wait is bounded. Everything binds 127.0.0.1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.dispatch.stats import Timing, parse_timings
from bench.peers.venvs import PIPECAT_REQUIREMENTS, ensure_peer_venv, installed_versions
from bench.relay.procs import (
    ChildProcess,
    free_port,
    gateway_env_openai,
    start_gateway,
    wait_for_log_line,
    wait_until_ready,
)

__all__ = [
    "BENCH_TOOLS",
    "PIPECAT_SCRIPT",
    "ROOT",
    "TOOL_ROUNDS_PER_TURN",
    "TimingsReader",
    "build_registry",
    "start_dispatch_fake",
    "start_dispatch_gateway",
    "start_pipecat",
]

ROOT = Path(__file__).resolve().parents[2]
BENCH_TOOLS = ROOT / "bench" / "tools"  # the no-op tool, beside the project's own tools
PIPECAT_SCRIPT = ROOT / "bench" / "peers" / "external" / "pipecat_dispatch.py"
# Calls per user turn the gateway allows: the dispatching session never speaks, so all its calls
# fall in one turn; lifted so that every call runs instead of being refused past the 5th.
TOOL_ROUNDS_PER_TURN = 1_000_000


def start_dispatch_fake(
    log_dir: Path, timings: Path, timeout_s: float = 20.0
) -> tuple[ChildProcess, str]:
    """The OpenAI fake in echo + dispatch mode; returns it and its base URL (``ws://…/v1``)."""
    argv = [sys.executable, "-m", "fakes.openai_realtime"]
    argv += ["--port", str(free_port()), "--echo", "--no-log", "--dispatch"]
    argv += ["--timings", str(timings)]
    child = ChildProcess("fake upstream", argv, os.environ, log_dir / "fake.log")
    try:
        line = wait_for_log_line(child, "listening ws://", timeout_s)
    except BaseException:
        child.stop()
        raise
    return child, line.split("listening ", 1)[1].strip()


def build_registry(out: Path, timeout_s: float = 120.0, *, source: Path = ROOT) -> Path:
    """The project's tools and the bench's no-op in one registry (``registry_build`` takes
    several ``--tools`` folders). ``source``: the checkout whose build and tools to use (a
    ``--baseline`` worktree builds its own: the artifact format may differ)."""
    argv = [sys.executable, "-m", "registry_build", "--quiet", "--out", str(out)]
    argv += ["--tools", str(source / "tools")]
    argv += ["--tools", str(source / BENCH_TOOLS.relative_to(ROOT))]
    done = subprocess.run(
        argv, cwd=source, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the bench registry did not build:\n{done.stderr[-2000:]}")
    return out


def start_dispatch_gateway(
    upstream_url: str, registry: Path, work: Path, *, source: Path | None = None
) -> tuple[ChildProcess, str]:
    """``python -m gateway serve`` on the fake, with the bench registry; returns it and its base
    URL. ``source``: a ``--baseline`` worktree to run instead (the ``gateway_base`` row)."""
    env = {
        **gateway_env_openai(upstream_url),
        "GATEWAY_REGISTRY": str(registry),
        "GATEWAY_TOOL_ROUNDS_PER_TURN": str(TOOL_ROUNDS_PER_TURN),
    }
    name = "gateway" if source is None else "gateway_base"
    data = work / f"data_{name}"
    data.mkdir(exist_ok=True)
    return start_gateway(env, data, work, name=name, source=source)


def start_pipecat(
    upstream_url: str, work: Path, timeout_s: float = 60.0
) -> tuple[ChildProcess, str, dict[str, str]]:
    """Pipecat with the no-op function (its own venv, built once); returns it, its client URL
    (``ws://…/ws``) and the installed versions of its packages."""
    python = ensure_peer_venv(ROOT, "pipecat", PIPECAT_REQUIREMENTS)
    versions = installed_versions(python, ["pipecat-ai", "openai", "websockets", "uvicorn"])
    port = free_port()
    upstream = upstream_url.rstrip("/") + "/realtime"
    argv = [str(python), str(PIPECAT_SCRIPT), "--port", str(port), "--upstream", upstream]
    child = ChildProcess("pipecat", argv, os.environ, work / "pipecat.log")
    try:
        wait_until_ready(child, f"http://127.0.0.1:{port}/healthz", timeout_s)
    except BaseException:
        child.stop()
        raise
    return child, f"ws://127.0.0.1:{port}/ws", versions


class TimingsReader:
    """Reads the fake's timings file as it grows: each call returns only the new lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.unreadable = 0

    def read_new(self) -> list[Timing]:
        try:
            with self.path.open("rb") as file:
                file.seek(self._offset)
                data = file.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits
        self._offset += len(complete)
        timings, unreadable = parse_timings(complete.decode())
        self.unreadable += unreadable
        return timings
