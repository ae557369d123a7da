"""``python -m fakes.gemini_live``: it makes its certificate, says where it
listens, serves over TLS with the flags it was given, and exits 0 on SIGTERM after closing its
connections with 1001."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
from pathlib import Path

import pytest
import websockets
from cli_kit import served
from websockets.exceptions import ConnectionClosed

TIMEOUT_S = 20
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


async def test_the_command_line_serves_until_sigterm(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    args = ("--port", "0", "--cert-dir", str(cert_dir), "--api-key", "cli-key")
    flags = ("--text-frames", "--duplicate-tool-calls")
    listening = rb"listening (https://127\.0\.0\.1:(\d+))\n"
    module = "fakes.gemini_live"
    async with served(module, *args, *flags, listening=listening) as cli:
        url = f"wss://127.0.0.1:{int(cli.match.group(2))}{PATH}"
        context = ssl.create_default_context(cafile=str(cert_dir / "cert.pem"))
        headers = {"x-goog-api-key": "cli-key"}
        async with (
            asyncio.timeout(TIMEOUT_S),
            websockets.connect(url, ssl=context, additional_headers=headers) as ws,
        ):
            setup = {
                "model": "models/gemini-live-2.5-flash-preview",
                "tools": [{"functionDeclarations": [{"name": "ping"}]}],
            }
            await ws.send(json.dumps({"setup": setup}))
            first = await ws.recv()
            turn = {"role": "user", "parts": [{"text": "/tool ping {}"}]}
            await ws.send(json.dumps({"clientContent": {"turns": [turn], "turnComplete": True}}))
            calls = [await ws.recv(), await ws.recv()]
            cli.process.send_signal(signal.SIGTERM)
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
        assert await cli.exit_code() == 0
    assert first == '{"setupComplete":{}}'  # --text-frames: a str, compact JSON
    assert calls[0] == calls[1]  # --duplicate-tool-calls
    assert json.loads(calls[0])["toolCall"]["functionCalls"][0]["name"] == "ping"
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1001
    assert sorted(p.name for p in cert_dir.iterdir()) == ["cert.pem", "key.pem"]
