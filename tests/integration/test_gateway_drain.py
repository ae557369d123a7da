"""PROTOCOL.md section 9: SIGTERM drains a real ``python -m gateway serve`` process.

It stops accepting (``/readyz`` 503, upgrades refused), ends every open session with
``session.ended`` reason ``shutdown`` and a 1000 close, and exits 0 within 15 s; with
``GATEWAY_LOG_FORMAT=json`` every line it writes is one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from harness import Client, types

REPO = Path(__file__).resolve().parents[2]
START_WITHIN_S = 20.0
EXIT_WITHIN_S = 15.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def registry_file(tmp_path: Path) -> Path:
    out = tmp_path / "tool_registry.json"
    subprocess.run(
        [sys.executable, "-m", "registry_build", "--tools", "tools", "--out", str(out), "--quiet"],
        cwd=REPO,
        check=True,
        timeout=60,
    )
    return out


async def status_of(http: aiohttp.ClientSession, url: str) -> int | None:
    """The HTTP status, or None when the connection is refused."""
    try:
        async with http.get(url) as response:
            return response.status
    except aiohttp.ClientConnectionError:
        return None


async def poll_status(
    http: aiohttp.ClientSession, url: str, wanted: set[int | None], within: float
) -> int | None:
    deadline = time.monotonic() + within
    while True:
        status = await status_of(http, url)
        if status in wanted:
            return status
        assert time.monotonic() < deadline, f"{url} answered {status}, not {wanted}"
        await asyncio.sleep(0.02)


def json_lines(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)  # fails the test on any line that is not JSON
        assert isinstance(record, dict), line
        records.append(record)
    return records


async def test_sigterm_drains_sessions_and_exits(tmp_path: Path, registry_file: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GATEWAY_")}
    env.update(
        GATEWAY_AUTH="none",
        GATEWAY_HOST="127.0.0.1",
        GATEWAY_PORT=str(port),
        GATEWAY_PROVIDER="local",
        GATEWAY_REGISTRY=str(registry_file),
        GATEWAY_DATA_DIR=str(tmp_path / "data"),
        GATEWAY_DRAIN_GRACE_S="1.0",
        GATEWAY_LOG_FORMAT="json",
        GATEWAY_LOCAL_PACE="0",
    )
    stdout_path, stderr_path = tmp_path / "stdout.log", tmp_path / "stderr.log"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            "serve",
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        async with aiohttp.ClientSession() as http:
            await poll_status(http, f"{base}/readyz", {200}, START_WITHIN_S)

            text_ws = await http.ws_connect(f"{base}/v1/session")
            voice_ws = await http.ws_connect(f"{base}/v1/session")
            text, voice = Client(text_ws), Client(voice_ws)
            await text.start("text")
            await voice.start("voice")
            assert (await text.say("before the drain"))[-1]["text"] == "You said: before the drain"
            seen_before = {id(c): len(c.events) for c in (text, voice)}

            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            # Draining: not ready, and no new session is accepted.
            assert await poll_status(http, f"{base}/readyz", {503}, 3.0) == 503
            with pytest.raises(
                (aiohttp.WSServerHandshakeError, aiohttp.ClientConnectionError)
            ) as no:
                await http.ws_connect(f"{base}/v1/session")
            if isinstance(no.value, aiohttp.WSServerHandshakeError):
                assert no.value.status == 503

            for client in (text, voice):
                code = await client.wait_closed(within=EXIT_WITHIN_S)
                assert code == 1000
                after = client.events[seen_before[id(client)] :]
                assert types(after)[-1:] == ["session.ended"], types(after)
                assert after[-1]["reason"] == "shutdown"
                assert types(client.events).count("session.ended") == 1

            remaining = EXIT_WITHIN_S - (time.monotonic() - signalled)
            returncode = await asyncio.wait_for(proc.wait(), timeout=max(remaining, 0.01))
            assert returncode == 0
            assert time.monotonic() - signalled < EXIT_WITHIN_S
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.wait_for(proc.wait(), timeout=10)

    written = json_lines(stdout_path) + json_lines(stderr_path)
    events = [r.get("event") for r in written]
    for expected in ("gateway_listening", "gateway_draining", "gateway_stopped"):
        assert events.count(expected) == 1, events
    assert events.count("session_ended") == 2
