"""A real ``redis-server`` for tests: Debian's, on a free loopback port, in a temporary folder,
with no persistence (a restart starts empty, as the gateway must expect), stopped at the end.

``.ci/run`` installs ``redis-server``; without it these tests skip, saying so (and
``scripts/test`` prints it in its header).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = ["RedisServer", "redis_path", "running_redis", "unique_prefix"]


def redis_path() -> str | None:
    return shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unique_prefix() -> str:
    """Keys of one test apart from every other's on a shared server."""
    return f"t{uuid.uuid4().hex[:10]}"


@dataclass
class RedisServer:
    binary: str
    folder: Path
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.folder),
            "--protected-mode",
            "yes",
        ]
        with (self.folder / "redis.log").open("ab") as log:  # the child keeps its own copy
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            assert self.process.poll() is None, (self.folder / "redis.log").read_text()
            time.sleep(0.02)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    async def restart(self, down_for_s: float = 0.0) -> None:
        """Stop it (its data goes), stay down a while, start it on the same port."""
        await asyncio.to_thread(self.stop)
        if down_for_s:
            await asyncio.sleep(down_for_s)
        await asyncio.to_thread(self.start)

    def command_calls(self) -> dict[str, int]:
        """``INFO commandstats``: calls per command since the start (or the last reset)."""
        import redis as redis_sync

        client = redis_sync.Redis(port=self.port)
        try:
            stats = client.info("commandstats")
        finally:
            client.close()
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}

    def reset_stats(self) -> None:
        import redis as redis_sync

        client = redis_sync.Redis(port=self.port)
        try:
            client.config_resetstat()
        finally:
            client.close()


@contextlib.contextmanager
def running_redis(folder: Path) -> Iterator[RedisServer]:
    binary = redis_path()
    if binary is None:
        pytest.skip(
            "REDIS TESTS SKIPPED: no redis-server on PATH (apt-get install redis-server, "
            "as .ci/run does)"
        )
    server = RedisServer(binary, folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()
