"""Build and run ``goload``, the benchmark's Go load generator (``bench/goload/``).

A Python load generator costs about as much CPU as the relay it measures, so the high session
counts use this compiled one. It builds offline from Debian packages alone (Go and
gorilla/websocket in GOPATH mode, no module download): ``ensure_goload`` installs them when
missing and rebuilds only when the source changed. ``run_goload`` runs it, calls back at its
``WINDOW START`` / ``WINDOW END`` stderr lines (where the harness snapshots the relay's CPU
time) and returns the one JSON object it prints. The command line is documented in
``bench/goload/main.go``.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEBIAN_PACKAGES",
    "GORILLA_SOURCE",
    "GoloadResult",
    "StderrLines",
    "ensure_goload",
    "go_available",
    "parse_result",
    "run_goload",
    "source_digest",
]

DEBIAN_PACKAGES = ("golang-go", "golang-github-gorilla-websocket-dev")
GOCODE = Path("/usr/share/gocode")  # where Debian's Go library packages put their source
GORILLA_SOURCE = GOCODE / "src/github.com/gorilla/websocket"
WINDOW_START = "WINDOW START"
WINDOW_END = "WINDOW END"
_INSTALL_TIMEOUT_S = 900.0
_BUILD_TIMEOUT_S = 300.0
_STDERR_TAIL_LINES = 30
_PR_SET_PDEATHSIG = 1
_REQUIRED_KEYS = ("mode", "proto", "sent", "received", "lost", "rtt_ms", "cdf")


# Results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoloadResult:
    """goload's JSON report; counts are of measured frames (after the warm-up)."""

    raw: dict[str, Any]

    @property
    def mode(self) -> str:
        return str(self.raw["mode"])

    @property
    def sessions(self) -> int:
        return int(self.raw["sessions"])

    @property
    def sent(self) -> int:
        return int(self.raw["sent"])

    @property
    def received(self) -> int:
        return int(self.raw["received"])

    @property
    def lost(self) -> int:
        return int(self.raw["lost"])

    @property
    def mismatched(self) -> int:
        return int(self.raw["mismatched"])

    @property
    def errors(self) -> int:
        return int(self.raw["errors"])

    @property
    def connect_failed(self) -> int:
        return int(self.raw["connect_failed"])

    @property
    def timed_out(self) -> bool:
        return bool(self.raw.get("timed_out", False))

    @property
    def window_s(self) -> float | None:
        """The measured window's length; ``None`` when it never began."""
        return _optional_float(self.raw.get("window_s"))

    @property
    def loadgen_cpu_s(self) -> float | None:
        """CPU seconds goload itself used during the window."""
        return _optional_float(self.raw.get("loadgen_cpu_s"))

    @property
    def round_trips(self) -> int:
        return int(self.raw["rtt_ms"]["n"])

    def rtt_ms(self, statistic: str) -> float | None:
        """``mean``, ``p50``, ``p90``, ``p99``, ``p999`` or ``max`` of the measured round trips."""
        return _optional_float(self.raw["rtt_ms"][statistic])

    def setup_ms(self, statistic: str) -> float | None:
        """``p50``, ``p99`` or ``max`` of the session setup times."""
        return _optional_float(self.raw["setup_ms"][statistic])

    @property
    def cdf(self) -> list[tuple[float, float]]:
        """``(ms, fraction of round trips at or below)``, ascending."""
        return [(float(ms), float(fraction)) for ms, fraction in self.raw["cdf"]]

    @property
    def complete(self) -> bool:
        """Every measured frame was sent and came back intact, with no error event."""
        unsent = int(self.raw.get("unsent", 0))
        return (
            self.lost == 0
            and unsent == 0
            and self.mismatched == 0
            and self.errors == 0
            and self.connect_failed == 0
            and not self.timed_out
        )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def parse_result(stdout: str) -> GoloadResult:
    """goload's stdout (one JSON object) as a result; ``ValueError`` when it is not one."""
    text = stdout.strip()
    if not text:
        raise ValueError("goload printed nothing on stdout")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"goload's stdout is not JSON ({error}): {text[:200]!r}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"goload's stdout is not a JSON object: {text[:200]!r}")
    missing = [key for key in _REQUIRED_KEYS if key not in raw]
    if missing:
        raise ValueError(f"goload's report lacks {', '.join(missing)}")
    return GoloadResult(raw)


class StderrLines:
    """Cuts goload's stderr, as it arrives in chunks, into lines; keeps a tail for errors."""

    def __init__(self, tail_lines: int = _STDERR_TAIL_LINES) -> None:
        self._partial = b""
        self._tail: deque[str] = deque(maxlen=tail_lines)

    def feed(self, chunk: bytes) -> list[str]:
        """The complete lines in ``chunk`` (with what came before), without line ends."""
        *complete, self._partial = (self._partial + chunk).split(b"\n")
        lines = [line.decode(errors="replace").rstrip("\r") for line in complete]
        self._tail.extend(lines)
        return lines

    def finish(self) -> list[str]:
        """The last line when the stream ended without a line end."""
        rest, self._partial = self._partial, b""
        return self.feed(rest + b"\n") if rest else []

    def tail(self) -> str:
        return "\n".join(self._tail)


# Building -----------------------------------------------------------------------------------


def go_available() -> bool:
    """Go and gorilla/websocket's source are installed (goload can be built offline)."""
    return shutil.which("go") is not None and GORILLA_SOURCE.is_dir()


def source_digest(files: Iterable[Path]) -> str:
    """A digest of the source files' names and contents (the rebuild stamp)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def ensure_goload(root: Path) -> Path:
    """The goload binary, ``build/bench/bin/goload`` under ``root``: the Debian packages are
    installed when missing, and it is rebuilt only when ``bench/goload/*.go`` changed (tests
    aside: ``wire_test.go`` runs with ``go test``, see its first line)."""
    source_dir = root / "bench" / "goload"
    sources = sorted(p for p in source_dir.glob("*.go") if not p.name.endswith("_test.go"))
    if not sources:
        raise RuntimeError(f"no Go source in {source_dir}")
    binary = root / "build" / "bench" / "bin" / "goload"
    stamp = binary.with_name("goload.stamp")
    digest = source_digest(sources)
    if binary.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
        return binary
    if not go_available():
        _install_debian_packages()
    _build(source_dir, binary, root / "build" / "bench" / "go-cache")
    stamp.write_text(digest + "\n")
    return binary


def _install_debian_packages() -> None:
    """``apt-get install`` (``apt-get update`` first only when that fails: it is slow)."""
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*prefix, "apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=300"]
    install += DEBIAN_PACKAGES
    if _run_quietly(install, env).returncode != 0:
        update = [*prefix, "apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=300"]
        _run_quietly(update, env)
        retried = _run_quietly(install, env)
        if retried.returncode != 0:
            raise RuntimeError(
                f"could not install {' '.join(DEBIAN_PACKAGES)} with apt-get:\n"
                + _tail(retried.stdout)
            )
    if not go_available():
        raise RuntimeError(f"installed {' '.join(DEBIAN_PACKAGES)} but found no go or gorilla")


def _run_quietly(argv: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=_INSTALL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return subprocess.CompletedProcess(argv, 1, stdout=str(error))


def _build(source_dir: Path, binary: Path, cache_dir: Path) -> None:
    """``go build`` in GOPATH mode against Debian's gorilla, written atomically to ``binary``."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("go is not on PATH")
    binary.parent.mkdir(parents=True, exist_ok=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="goload-gopath-") as gopath:
        env = {
            **os.environ,
            "GO111MODULE": "off",  # no go.mod, no module download
            "GOPATH": f"{gopath}{os.pathsep}{GOCODE}",
            "GOCACHE": str(cache_dir),
            "GOFLAGS": "",
            "CGO_ENABLED": "0",  # no C toolchain needed, a static binary
        }
        partial = binary.with_name(f".goload.{os.getpid()}.tmp")
        try:
            built = subprocess.run(
                [go, "build", "-o", str(partial), "."],
                cwd=source_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=_BUILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"go build did not finish in {_BUILD_TIMEOUT_S:.0f} s") from None
        if built.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"go build failed in {source_dir}:\n{_tail(built.stdout)}")
        os.replace(partial, binary)


def _tail(text: str, lines: int = _STDERR_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


# Running ------------------------------------------------------------------------------------


def run_goload(
    binary: Path,
    args: list[str],
    *,
    on_window_start: Callable[[], None],
    on_window_end: Callable[[], None],
    timeout_s: float,
    cpu: int | None = None,
) -> GoloadResult:
    """Run ``goload ARGS`` (pinned to ``cpu`` when given), calling back at its window lines as
    they arrive, and return its report. ``RuntimeError`` with the stderr tail when it fails,
    prints no report or outlives ``timeout_s`` (give goload's own ``-timeout`` less, so that it
    still reports what it measured)."""
    if cpu is not None and cpu not in os.sched_getaffinity(0):
        raise RuntimeError(f"cannot pin goload to core {cpu}: not in this process's affinity")
    process = subprocess.Popen(
        [str(binary), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: _prepare_child(cpu),  # before exec, so every Go thread is pinned
    )
    stderr = StderrLines()
    try:
        stdout = _pump(process, stderr, on_window_start, on_window_end, timeout_s)
        returncode = process.wait(timeout=max(1.0, timeout_s))
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(timeout=5.0)
        raise
    finally:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    command = f"goload {' '.join(args[:1])}"
    if returncode != 0:
        detail = ""
        with contextlib.suppress(ValueError):
            sample = parse_result(stdout).raw.get("error_sample")
            detail = f" ({sample})" if sample else ""
        raise RuntimeError(f"{command} exited with {returncode}{detail}:\n{stderr.tail()}")
    try:
        return parse_result(stdout)
    except ValueError as error:
        raise RuntimeError(f"{command}: {error}\n{stderr.tail()}") from None


def _prepare_child(cpu: int | None) -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _pump(
    process: subprocess.Popen[bytes],
    stderr: StderrLines,
    on_window_start: Callable[[], None],
    on_window_end: Callable[[], None],
    timeout_s: float,
) -> str:
    """Read both pipes until they close, calling back at the window lines; returns stdout."""
    assert process.stdout is not None
    assert process.stderr is not None
    deadline = time.monotonic() + timeout_s
    stdout = bytearray()
    callbacks = {WINDOW_START: on_window_start, WINDOW_END: on_window_end}
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        selector.register(process.stderr, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(
                    f"goload did not finish in {timeout_s:.0f} s; stderr:\n{stderr.tail()}"
                )
            for key, _ in selector.select(timeout=remaining):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    if key.fileobj is process.stderr:
                        _dispatch(stderr.finish(), callbacks)
                elif key.fileobj is process.stdout:
                    stdout += chunk
                else:
                    _dispatch(stderr.feed(chunk), callbacks)
    return stdout.decode(errors="replace")


def _dispatch(lines: list[str], callbacks: Mapping[str, Callable[[], None]]) -> None:
    for line in lines:
        callback = callbacks.get(line.strip())
        if callback is not None:
            callback()
