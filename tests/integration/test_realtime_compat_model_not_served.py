"""``/v1/realtime?model=gpt-realtime`` on a gateway configured for Gemini alone: an OpenAI
``model_not_found`` error that lists the names this gateway serves, at once (no
``session.created``), then close 1008; a name it serves opens as usual."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
from harness import Gateway, GatewayFactory, token

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer

GEMINI_VOICE = "gemini-2.5-flash-native-audio-preview-09-2025"


async def _gemini_only(gateway_factory: GatewayFactory, fake: FakeGeminiServer) -> Gateway:
    return await gateway_factory(
        provider="gemini",
        openai_api_key=None,
        gemini_api_key="test-key",
        gemini_base_url=fake.base_url,
        gemini_ca_file=fake.ca_file,
        gemini_model=GEMINI_VOICE,
        upstream_reconnect_attempts=1,
        upstream_reconnect_backoff_s=0.01,
    )


async def test_an_openai_model_on_a_gemini_gateway_is_refused_with_the_names_it_serves(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs") as fake:
        gateway = await _gemini_only(gateway_factory, fake)
        headers = {"Authorization": f"Bearer {token('alice')}"}
        async with gateway.http.ws_connect(
            f"{gateway.url}/v1/realtime?model=gpt-realtime", headers=headers
        ) as ws:
            first = json.loads((await ws.receive(timeout=5)).data)
            closing = await ws.receive(timeout=5)
        assert first["type"] == "error"
        error = first["error"]
        assert (error["type"], error["code"], error["param"]) == (
            "invalid_request_error",
            "model_not_found",
            "model",
        )
        assert "'gpt-realtime' is not served by this gateway" in error["message"]
        assert "'gemini-…' (Gemini Live)" in error["message"]
        assert "'local'" in error["message"]
        assert "OPENAI_API_KEY" not in error["message"]
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 1008
        assert not gateway.manager.sessions
        assert not fake.connections  # nothing was opened for it

        async with gateway.http.ws_connect(
            f"{gateway.url}/v1/realtime?model={GEMINI_VOICE}", headers=headers
        ) as served:
            assert json.loads((await served.receive(timeout=5)).data)["type"] == "session.created"
