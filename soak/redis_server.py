"""A real ``redis-server`` on a free loopback port: Debian's, in a folder of ours, with no
persistence (a restart starts empty, as the gateway must expect). Used by the soak and by the
tests (``tests/redis_kit.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RedisServer", "free_port", "redis_path"]

START_WITHIN_S = 10.0


def redis_path() -> str | None:
    return shutil.which("redis-server")


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    binary: str
    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.folder / "redis.log"

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
        with self.log_path.open("ab") as log:  # the child keeps its own copy
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_WITHIN_S
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited:\n{self.log_path.read_text()}")
            time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

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
