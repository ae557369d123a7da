"""The terminal client follows ``session.moving`` as the protocol asks: it resumes with the new
token, and not before ``retry_after_ms`` (a draining node spreads its sessions' resumes). The
gateway here is a scripted socket server: one session, moved once with a wait."""

from __future__ import annotations

import asyncio
import io
import json
import queue
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import WSMsgType, web

from gateway.chat_client import run_chat

RETRY_AFTER_MS = 700


class MovingGateway:
    """The first socket starts the session and moves it; later sockets resume it."""

    def __init__(self) -> None:
        self.moved_at: float | None = None
        self.resumes: list[tuple[float, dict[str, Any]]] = []

    async def socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            event = json.loads(msg.data)
            if event["type"] == "session.start" and "resume" not in event:
                await ws.send_json(started("token-1", resumed=False))
            elif event["type"] == "text.send" and self.moved_at is None:
                await ws.send_json(
                    {
                        "type": "session.moving",
                        "session_id": "sess_1",
                        "resume_token": "token-2",
                        "reason": "drain",
                        "retry_after_ms": RETRY_AFTER_MS,
                    }
                )
                self.moved_at = time.monotonic()
                await ws.close(code=1012)
            elif event["type"] == "session.start":
                self.resumes.append((time.monotonic(), event["resume"]))
                await ws.send_json(started("token-3", resumed=True))
            elif event["type"] == "text.send":
                await reply(ws, f"You said: {event['text']}")
            elif event["type"] == "session.end":
                await ws.send_json({"type": "session.ended", "reason": "client"})
                await ws.close()
        return ws


def started(token: str, *, resumed: bool) -> dict[str, Any]:
    return {
        "type": "session.started",
        "session_id": "sess_1",
        "resume_token": token,
        "mode": "text",
        "provider": "local",
        "registry_version": "test",
        "tools": [],
        "resumed": resumed,
    }


async def reply(ws: web.WebSocketResponse, text: str) -> None:
    await ws.send_json({"type": "response.started", "response_id": "r1"})
    await ws.send_json({"type": "text.delta", "response_id": "r1", "delta": text})
    await ws.send_json({"type": "response.done", "response_id": "r1", "status": "completed"})


@pytest.fixture
async def moving_gateway() -> AsyncIterator[tuple[MovingGateway, str]]:
    gateway = MovingGateway()
    app = web.Application()
    app.router.add_get("/v1/session", gateway.socket)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield gateway, f"ws://127.0.0.1:{port}/v1/session"
    await runner.cleanup()


async def test_the_terminal_client_waits_retry_after_ms_then_resumes_with_the_new_token(
    moving_gateway: tuple[MovingGateway, str],
) -> None:
    gateway, url = moving_gateway
    lines: queue.Queue[str] = queue.Queue()
    out = io.StringIO()
    chatting = asyncio.create_task(run_chat(url, None, read_line=lines.get, out=out))
    lines.put("before the move\n")  # answered by session.moving
    lines.put("after the move\n")
    lines.put("")
    assert await asyncio.wait_for(chatting, 15) == 0
    assert gateway.moved_at is not None
    [(resumed_at, resume)] = gateway.resumes
    assert resume == {"session_id": "sess_1", "resume_token": "token-2"}
    assert resumed_at - gateway.moved_at >= RETRY_AFTER_MS / 1000
    text = out.getvalue()
    assert "the gateway is moving this session to another node" in text
    assert "You said: after the move" in text
