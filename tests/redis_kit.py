"""A real ``redis-server`` for tests (``soak.redis_server``: Debian's, on a free loopback port,
in a temporary folder, with no persistence, stopped at the end).

``.ci/run`` installs ``redis-server``; without it these tests skip, saying so (and
``scripts/test`` prints it in its header).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.redis_server import RedisServer, redis_path

__all__ = ["RedisServer", "redis_path", "running_redis", "unique_prefix"]


def unique_prefix() -> str:
    """Keys of one test apart from every other's on a shared server."""
    return f"t{uuid.uuid4().hex[:10]}"


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
