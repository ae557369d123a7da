"""The fakes' taps, for long runs (the soak): a tap sees every frame (every chat exchange) as it
passes, also when the fake keeps no log; ``forget_closed`` drops the connections that are over.
Real sockets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from fakes.chat.brain import FakeReply, Text
from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

GEMINI_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


class Tap:
    def __init__(self) -> None:
        self.frames: list[tuple[Any, str, Mapping[str, Any]]] = []

    def __call__(self, connection: Any, direction: str, message: Mapping[str, Any]) -> None:
        self.frames.append((connection, direction, message))

    def seen(self, direction: str) -> list[str]:
        return [
            str(m.get("type") or next(iter(m), "")) for _, d, m in self.frames if d == direction
        ]


async def test_the_openai_fake_taps_frames_it_does_not_log_and_forgets_closed_ones() -> None:
    tap = Tap()
    async with FakeRealtimeServer(FakeOptions(log_frames=False)) as server:
        server.tap = tap
        url = f"{server.ws_url}/realtime?model=gpt-realtime"
        async with websockets.connect(url) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            await ws.send(json.dumps({"type": "session.update", "session": {"type": "realtime"}}))
            assert json.loads(await ws.recv())["type"] == "session.updated"
        (connection,) = server.connections
        await asyncio.wait_for(connection.closed.wait(), 5)
        assert server.forget_closed() == [connection]
        assert server.connections == []
    assert connection.log == []
    assert {c for c, _, _ in tap.frames} == {connection}
    assert tap.seen("in") == ["session.update"]
    assert tap.seen("out") == ["session.created", "session.updated"]


async def test_the_gemini_fake_taps_frames_it_does_not_log(tmp_path: Path) -> None:
    tap = Tap()
    options = FakeGeminiOptions(log_frames=False)
    async with FakeGeminiServer(options, cert_dir=tmp_path) as server:
        server.tap = tap
        url = f"wss://127.0.0.1:{server.port}{GEMINI_PATH}"
        async with websockets.connect(url, ssl=server.client_ssl_context()) as ws:
            await ws.send(json.dumps({"setup": {"model": "models/gemini-live-2.5-flash-preview"}}))
            assert json.loads(await ws.recv()) == {"setupComplete": {}}
        (connection,) = server.connections
    assert connection.log == []
    assert tap.seen("in") == ["setup"]
    assert tap.seen("out") == ["setupComplete"]


@pytest.mark.parametrize("keep", [True, False])
async def test_the_chat_fake_taps_each_exchange(keep: bool) -> None:
    seen: list[tuple[dict[str, Any], FakeReply]] = []
    async with FakeChatServer(FakeChatOptions(log_exchanges=keep)) as server:
        server.tap = lambda body, reply: seen.append((body, reply))
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{server.base_url}/chat/completions", json=body) as response,
        ):
            assert response.status == 200
    ((logged_body, reply),) = seen
    assert logged_body == body
    assert isinstance(reply, Text)
    assert reply.text == "You said: hello"
    assert len(server.requests) == (1 if keep else 0)
