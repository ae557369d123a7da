"""``python -m fakes.openai_realtime``: it says where it listens, serves, and
exits 0 on SIGTERM after closing its connections with 1001."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
import websockets
from cli_kit import served
from websockets.exceptions import ConnectionClosed

TIMEOUT_S = 20


async def test_the_command_line_serves_until_sigterm() -> None:
    args = ("--port", "0", "--api-key", "sk-cli", "--arg-fragment", "100")
    listening = rb"listening (ws://127\.0\.0\.1:(\d+)/v1)\n"
    async with served("fakes.openai_realtime", *args, listening=listening) as cli:
        url = cli.match.group(1).decode() + "/realtime?model=gpt-realtime"
        headers = {"Authorization": "Bearer sk-cli"}
        async with (
            asyncio.timeout(TIMEOUT_S),
            websockets.connect(url, additional_headers=headers) as ws,
        ):
            assert json.loads(await ws.recv())["type"] == "session.created"
            item = {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "/tool f {}"}],
            }
            await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
            await ws.send(json.dumps({"type": "response.create"}))
            deltas = []
            while (event := json.loads(await ws.recv()))["type"] != "rate_limits.updated":
                if event["type"] == "response.function_call_arguments.delta":
                    deltas.append(event["delta"])
            cli.process.send_signal(signal.SIGTERM)
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        assert await cli.exit_code() == 0
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1001
    assert deltas == ["{}"]  # --arg-fragment reached the options
