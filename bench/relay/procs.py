"""Processes for ``scripts/bench relay``: the fake upstreams, the gateway, pinning, ``/proc``.

Every child is started with its output in a log file, in its own session, and with
``PR_SET_PDEATHSIG`` so that it dies with the bench even when the bench is killed outright; the
bench also stops each one explicitly (``ChildProcess.stop``) on the way out. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.relay.stats import (
    CpuSnapshot,
    parse_counters,
    parse_process_cpu_ticks,
    parse_system_cpu_ticks,
)

__all__ = [
    "CLOCK_TICKS_PER_S",
    "ChildProcess",
    "CorePlan",
    "collector_paused",
    "free_port",
    "gateway_env_gemini",
    "gateway_env_openai",
    "log_file_tail",
    "pin_process",
    "plan_cores",
    "read_counters",
    "start_fake_upstream",
    "start_gateway",
    "start_gemini_fake",
    "start_redis",
    "take_snapshot",
    "wait_for_log_line",
    "wait_until_ready",
]

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def log_file_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` of a child's log, for an error message ("" when it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class ChildProcess:
    """A subprocess whose output goes to ``log_path``; ``stop`` is safe to call more than once."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        with log_path.open("wb") as log:
            self._process = subprocess.Popen(  # our own interpreter and modules
                argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # started before any thread exists
            )

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        return log_file_tail(self.log_path, lines)

    def ensure_alive(self) -> None:
        if not self.alive():
            raise RuntimeError(
                f"{self.name} exited with {self._process.returncode}:\n{self.log_tail()}"
            )

    def stop(self, timeout_s: float = 5.0) -> None:
        if self._process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self._process.terminate()
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            self._process.wait(timeout=timeout_s)


def wait_for_log_line(child: ChildProcess, needle: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        child.ensure_alive()
        for line in child.log_path.read_text(errors="replace").splitlines():
            if needle in line:
                return line
        time.sleep(0.05)
    raise TimeoutError(f"{child.name} did not print {needle!r} in {timeout_s:.0f} s")


def start_fake_upstream(log_dir: Path, timeout_s: float = 20.0) -> tuple[ChildProcess, str]:
    """The OpenAI Realtime fake in echo mode; returns it and its base URL (``ws://…/v1``)."""
    port = free_port()
    argv = [sys.executable, "-m", "fakes.openai_realtime", "--port", str(port)]
    child = ChildProcess(
        "fake upstream", [*argv, "--echo", "--no-log"], os.environ, log_dir / "fake.log"
    )
    try:
        line = wait_for_log_line(child, "listening ws://", timeout_s)
    except BaseException:
        child.stop()
        raise
    return child, line.split("listening ", 1)[1].strip()


def start_gemini_fake(
    log_dir: Path, cert_dir: Path, timeout_s: float = 20.0
) -> tuple[ChildProcess, str, Path]:
    """The Gemini Live fake in echo mode, TLS only; returns it, its base URL (``https://…``) and
    the certificate to trust (``<cert_dir>/cert.pem``)."""
    port = free_port()
    argv = [sys.executable, "-m", "fakes.gemini_live", "--port", str(port)]
    argv += ["--cert-dir", str(cert_dir), "--echo", "--no-log"]
    child = ChildProcess("gemini fake", argv, os.environ, log_dir / "fake.log")
    try:
        line = wait_for_log_line(child, "listening https://", timeout_s)
        ca_file = cert_dir / "cert.pem"
        if not ca_file.is_file():
            raise RuntimeError(f"the gemini fake wrote no {ca_file}")
    except BaseException:
        child.stop()
        raise
    return child, line.split("listening ", 1)[1].strip(), ca_file


def start_redis(log_dir: Path, timeout_s: float = 10.0) -> tuple[ChildProcess, str]:
    """Debian's ``redis-server`` on a free loopback port, without persistence; returns it and
    its URL. Raises ``RuntimeError`` when it is not installed."""
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    folder = log_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    argv += ["no", "--dir", str(folder)]
    child = ChildProcess("redis", argv, os.environ, log_dir / "redis.log")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        child.ensure_alive()
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return child, f"redis://127.0.0.1:{port}/0"
        time.sleep(0.02)
    child.stop()
    raise TimeoutError(f"redis-server did not listen on {port} in {timeout_s:.0f} s")


def gateway_env_openai(upstream_url: str) -> dict[str, str]:
    """The gateway's upstream settings for the OpenAI fake at ``upstream_url`` (``ws://…/v1``)."""
    return {
        "GATEWAY_PROVIDER": "openai",
        "GATEWAY_OPENAI_WS_URL": upstream_url,
        "OPENAI_API_KEY": "sk-bench",
    }


def gateway_env_gemini(base_url: str, ca_file: Path, model: str) -> dict[str, str]:
    """The gateway's upstream settings for the Gemini fake at ``base_url`` (``https://…``)."""
    return {
        "GATEWAY_PROVIDER": "gemini",
        "GATEWAY_GEMINI_BASE_URL": base_url,
        "GATEWAY_GEMINI_CA_FILE": str(ca_file),
        "GEMINI_API_KEY": "bench",
        "GATEWAY_GEMINI_MODEL": model,
    }


def start_gateway(
    upstream_env: Mapping[str, str],
    data_dir: Path,
    log_dir: Path,
    timeout_s: float = 30.0,
    *,
    name: str = "gateway",
    source: Path | None = None,
) -> tuple[ChildProcess, str]:
    """``python -m gateway serve`` with ``upstream_env`` (``gateway_env_*``); returns it and its
    base URL. ``source``: another checkout to run it from (``bench.baseline``)."""
    port = free_port()
    env = {
        **os.environ,
        **upstream_env,
        "GATEWAY_AUTH": "none",
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(port),
        "GATEWAY_LOG_LEVEL": "warning",
        # lifted so that the bench can open hundreds of sessions from one address
        "GATEWAY_CONNECTIONS_PER_MINUTE": "100000",
        "GATEWAY_MAX_SESSIONS": "100000",
        "GATEWAY_DATA_DIR": str(data_dir),
    }
    argv = [sys.executable, "-m", "gateway", "serve"]
    child = ChildProcess(name, argv, env, log_dir / f"{name}.log", cwd=source)
    try:
        wait_until_ready(child, f"http://127.0.0.1:{port}/readyz", timeout_s)
    except BaseException:
        child.stop()
        raise
    return child, f"http://127.0.0.1:{port}"


def wait_until_ready(child: ChildProcess, url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        child.ensure_alive()
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{child.name} was not ready at {url} in {timeout_s:.0f} s")


@dataclass(frozen=True)
class CorePlan:
    relay_core: int  # the relaying process alone: the gateway, or the fake for ``direct``
    load_core: int  # the load generator (this process), and the fake behind the gateway


def plan_cores() -> tuple[CorePlan | None, str]:
    """Two distinct cores we may use, or ``None`` and why not."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError) as error:
        return None, f"cannot read the CPU affinity: {error}"
    if len(allowed) < 2:
        return None, f"only {len(allowed)} core(s) allowed"
    return CorePlan(relay_core=allowed[0], load_core=allowed[1]), "pinned"


def pin_process(pid: int, core: int) -> None:
    """Pin every thread of ``pid`` to ``core`` (threads started later inherit it)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task), {core})


def take_snapshot(pids: Mapping[str, int]) -> CpuSnapshot:
    """CPU ticks of each role's process and of the whole machine, now."""
    ticks = {
        role: parse_process_cpu_ticks(Path(f"/proc/{pid}/stat").read_text())
        for role, pid in pids.items()
    }
    system = parse_system_cpu_ticks(Path("/proc/stat").read_text())
    return CpuSnapshot(wall_s=time.monotonic(), processes=ticks, system=system)


def read_counters(base_url: str, timeout_s: float = 5.0) -> dict[str, float]:
    """The gateway's own counters (``/metrics``): frames in and out, audio it dropped, …"""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=timeout_s) as response:
        text: str = response.read().decode()
    return parse_counters(text)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage-collection pause in this process while it measures (a phase is bounded)."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
