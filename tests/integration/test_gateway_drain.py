"""docs/protocol.md section 9: SIGTERM drains a real ``python -m gateway serve`` process.

It stops accepting (``/readyz`` 503, upgrades refused), ends every open session with
``session.ended`` reason ``shutdown`` and a 1000 close, and exits 0 within 15 s; with
``GATEWAY_LOG_FORMAT=json`` every line it writes is one JSON object.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import aiohttp
import pytest
from harness import Client, types
from process_kit import build_registry_file, gateway_process

EXIT_WITHIN_S = 15.0


@pytest.fixture
def registry_file(tmp_path: Path) -> Path:
    return build_registry_file(tmp_path / "tool_registry.json")


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


async def test_sigterm_drains_sessions_and_exits(tmp_path: Path, registry_file: Path) -> None:
    async with (
        gateway_process(
            tmp_path, registry_file, auth="none", drain_grace_s="1.0", provider="local"
        ) as node,
        aiohttp.ClientSession() as http,
    ):
        base = node.url
        text_ws = await http.ws_connect(f"{base}/v1/session")
        voice_ws = await http.ws_connect(f"{base}/v1/session")
        text, voice = Client(text_ws), Client(voice_ws)
        await text.start("text")
        await voice.start("voice")
        assert (await text.say("before the drain"))[-1]["text"] == "You said: before the drain"
        seen_before = {id(c): len(c.events) for c in (text, voice)}

        node.signal(signal.SIGTERM)
        signalled = time.monotonic()
        # Draining: not ready, and no new session is accepted.
        assert await poll_status(http, f"{base}/readyz", {503}, 3.0) == 503
        with pytest.raises((aiohttp.WSServerHandshakeError, aiohttp.ClientConnectionError)) as no:
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
        assert await node.wait(within=max(remaining, 0.01)) == 0
        assert time.monotonic() - signalled < EXIT_WITHIN_S

    records = node.log_records()  # every line is one JSON object
    events = [r.get("event") for r in records]
    for expected in ("gateway_listening", "gateway_draining", "gateway_stopped"):
        assert events.count(expected) == 1, events
    assert events.count("session_ended") == 2
    assert [r for r in records if r.get("level") == "error"] == []  # no traceback on the way
