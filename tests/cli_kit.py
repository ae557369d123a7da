"""Run a fake server's command line as a test does: start it, read where it listens, stop it.

``served`` starts ``python -m MODULE ARGS…`` from the repository root, waits for its
``listening …`` line (matched against ``listening``), and always leaves no process behind.
``Served.terminate`` sends SIGTERM and returns the exit code.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 20.0


@dataclass
class Served:
    process: asyncio.subprocess.Process
    match: re.Match[bytes]

    async def terminate(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return await self.exit_code()

    async def exit_code(self) -> int:
        async with asyncio.timeout(TIMEOUT_S):
            return await self.process.wait()


@asynccontextmanager
async def served(module: str, *args: str, listening: bytes) -> AsyncIterator[Served]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, *args, stdout=asyncio.subprocess.PIPE, cwd=REPO
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(TIMEOUT_S):
            line = await process.stdout.readline()
        match = re.fullmatch(listening, line)
        assert match is not None, line
        yield Served(process, match)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
