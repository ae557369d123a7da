"""The soak's child processes: started with their output in a log file of their own, killed
with the soak if it dies (``PR_SET_PDEATHSIG``), signalled and awaited without blocking the
driver's event loop, each wait bounded."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from bench.relay.procs import log_file_tail

__all__ = ["REPO", "Child"]

REPO = Path(__file__).resolve().parents[1]
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Child:
    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None

    async def start(
        self, argv: list[str], env: Mapping[str, str], *, stdout_pipe: bool = False
    ) -> None:
        with self.log_path.open("ab") as log:  # the child keeps its own copy
            self.process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=REPO,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdout_pipe else log,
                stderr=log if stdout_pipe else subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def first_line(self, within: float) -> str:
        assert self.process is not None
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), within)
        if not line:
            raise RuntimeError(f"{self.name} printed nothing:\n{self.log_tail()}")
        return line.decode()

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)

    async def wait(self, within: float) -> int | None:
        """The exit code, or None if it did not exit in time."""
        if self.process is None:
            return None
        try:
            return await asyncio.wait_for(self.process.wait(), within)
        except TimeoutError:
            return None

    async def stop(self, within: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL if it is still there after ``within``."""
        if not self.alive():
            return self.returncode
        self.signal(signal.SIGTERM)
        code = await self.wait(within)
        if code is None:
            self.signal(signal.SIGKILL)
            await self.wait(within)
        return code

    def log_tail(self, lines: int = 20) -> str:
        return log_file_tail(self.log_path, lines)
