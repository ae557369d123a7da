"""Real ``python -m gateway serve`` processes for tests: start, wait until ready, read their logs,
measure them, signal them, and never leave one behind.

``gateway_process(tmp_path, registry, **env)`` is an async context manager yielding a
``GatewayProcess``; settings are ``GATEWAY_*`` names given without the prefix
(``auth="none"``); the process always logs JSON into files of ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
START_WITHIN_S = 20.0
STOP_WITHIN_S = 15.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_registry_file(out: Path, *tools: Path) -> Path:
    folders = [arg for folder in (tools or (REPO / "tools",)) for arg in ("--tools", str(folder))]
    command = ["registry_build", *folders, "--out", str(out), "--quiet"]
    subprocess.run(
        [sys.executable, "-m", *command],
        cwd=REPO,
        check=True,
        timeout=60,
    )
    return out


@dataclass
class GatewayProcess:
    process: asyncio.subprocess.Process
    port: int
    stdout_path: Path
    stderr_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/session"

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_bytes(self) -> int:
        """Resident memory, from /proc."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS line")

    def log_records(self) -> list[dict[str, Any]]:
        """Every line written so far, each one JSON object (a line that is not fails)."""
        records = []
        for path in (self.stdout_path, self.stderr_path):
            for line in path.read_text(errors="replace").splitlines():
                if line.strip():
                    record = json.loads(line)
                    assert isinstance(record, dict), line
                    records.append(record)
        return records

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def wait(self, within: float = STOP_WITHIN_S) -> int:
        return await asyncio.wait_for(self.process.wait(), timeout=within)

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.signal(signal.SIGTERM)
        return await self.wait()


async def wait_ready(url: str, within: float = START_WITHIN_S) -> None:
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as http:
        while True:
            try:
                async with http.get(f"{url}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            assert time.monotonic() < deadline, f"{url} did not become ready"
            await asyncio.sleep(0.05)


@asynccontextmanager
async def gateway_process(
    tmp_path: Path,
    registry: Path,
    *,
    name: str = "gateway",
    extra_env: Mapping[str, str] | None = None,
    command: Sequence[str] = ("-m", "gateway", "serve"),
    **settings: str,
) -> AsyncIterator[GatewayProcess]:
    """``command``: what the interpreter runs (a test's launcher, e.g. ``clocked_gateway``)."""
    port = int(settings.pop("port", 0)) or free_port()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GATEWAY_")}
    env.update(
        GATEWAY_HOST="127.0.0.1",
        GATEWAY_PORT=str(port),
        GATEWAY_REGISTRY=str(registry),
        GATEWAY_DATA_DIR=str(tmp_path / f"{name}-data"),
        GATEWAY_LOG_FORMAT="json",
        GATEWAY_LOCAL_PACE="0",
    )
    env.update({f"GATEWAY_{key.upper()}": value for key, value in settings.items()})
    env.update(extra_env or {})
    stdout_path, stderr_path = tmp_path / f"{name}.stdout", tmp_path / f"{name}.stderr"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *command,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    node = GatewayProcess(process, port, stdout_path, stderr_path)
    try:
        await wait_ready(node.url)
        yield node
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGCONT)  # a paused node must be able to die
            process.kill()
            await asyncio.wait_for(process.wait(), timeout=STOP_WITHIN_S)
