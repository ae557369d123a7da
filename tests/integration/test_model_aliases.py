"""The operator's model aliases (``GATEWAY_MODELS``): ``GET /v1/models`` lists what a caller may
use, ``session.start``'s ``model`` and ``/v1/realtime?model=`` resolve through them (a client's
``gpt-realtime`` served by Gemini), and a name that resolves to nothing is refused naming what
exists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
from harness import Gateway, GatewayFactory, token

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer

GEMINI_VOICE = "gemini-2.5-flash-native-audio-preview-09-2025"

CATALOG = f"""
default = "assistant"

[models.assistant]
description = "the house assistant"
targets = [{{ provider = "local" }}]

[models.gpt-realtime]
targets = [{{ provider = "gemini", model = "{GEMINI_VOICE}", voice = "Puck" }}]

[models.staff-only]
roles = ["staff"]
targets = [{{ provider = "local" }}]
"""


async def _gateway(gateway_factory: GatewayFactory, tmp_path: Path, **settings: Any) -> Gateway:
    models = tmp_path / "models.toml"
    models.write_text(CATALOG)
    return await gateway_factory(models=models, **settings)


async def _models(gateway: Gateway, credential: str | None) -> tuple[int, dict[str, Any]]:
    headers = {} if credential is None else {"Authorization": f"Bearer {credential}"}
    async with gateway.http.get(f"{gateway.url}/v1/models", headers=headers) as answer:
        return answer.status, await answer.json()


async def test_the_models_list_shows_the_aliases_a_caller_may_use(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    gateway = await _gateway(gateway_factory, tmp_path)
    status, listing = await _models(gateway, token("alice"))
    assert status == 200
    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == ["assistant", "gpt-realtime"]
    assert listing["data"][0] == {
        "id": "assistant",
        "object": "model",
        "created": 0,
        "owned_by": "gateway",
    }
    _, staff = await _models(gateway, token("bob", ["staff"]))
    assert [m["id"] for m in staff["data"]] == ["assistant", "gpt-realtime", "staff-only"]
    status, refused = await _models(gateway, None)
    assert status == 401
    assert "error" in refused


async def test_without_aliases_the_models_list_shows_each_configured_providers_models(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(openai_api_key=None, gemini_api_key=None)
    _, listing = await _models(gateway, token("alice"))
    # The embedded model needs nothing; chat has no key to need here either.
    assert ("local", "local") in [(m["id"], m["owned_by"]) for m in listing["data"]]
    assert {m["owned_by"] for m in listing["data"]} <= {"local", "chat"}


async def test_a_session_resolves_its_model_through_the_aliases(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    gateway = await _gateway(gateway_factory, tmp_path)
    async with gateway.session("text") as client:  # no model: the default alias
        assert client.started["provider"] == "local"
        reply = await client.say("hello")
        assert reply[-1]["text"] == "You said: hello"
    async with gateway.connect() as client:
        await client.send("session.start", mode="text", model="staff-only")
        error = await client.last("error")
        assert error["code"] == "forbidden"
        assert error["message"] == (
            "model: 'staff-only' is not available to this caller; it may use 'assistant', "
            "'gpt-realtime'"
        )
    async with gateway.connect() as client:
        await client.send("session.start", mode="text", model="gpt-4o")
        error = await client.last("error")
        assert error["code"] == "invalid_event"
        assert error["message"] == (
            "model: no model named 'gpt-4o'; this gateway serves 'assistant', 'gpt-realtime'"
        )
    async with gateway.connect(roles=["staff"]) as client:
        started = await client.start("text", model="staff-only")
        assert started["provider"] == "local"


async def test_an_openai_client_asking_for_gpt_realtime_is_served_by_gemini(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs") as gemini:
        gateway = await _gateway(
            gateway_factory,
            tmp_path,
            gemini_api_key="test-key",
            gemini_base_url=gemini.base_url,
            gemini_ca_file=gemini.ca_file,
            openai_api_key=None,
        )
        headers = {"Authorization": f"Bearer {token('alice')}"}
        url = f"{gateway.url}/v1/realtime?model=gpt-realtime"
        async with gateway.http.ws_connect(url, headers=headers) as ws:
            created = json.loads((await ws.receive(timeout=5)).data)
            assert created["type"] == "session.created"
            connection = await gemini.wait_connections(1)
            await connection.wait_for("setup", direction="in")
            assert connection.setup["model"] == f"models/{GEMINI_VOICE}"
        async with gateway.http.ws_connect(
            f"{gateway.url}/v1/realtime?model=gpt-4o", headers=headers
        ) as ws:
            refused = json.loads((await ws.receive(timeout=5)).data)
            closing = await ws.receive(timeout=5)
        assert refused["error"]["code"] == "model_not_found"
        assert refused["error"]["message"] == (
            "model: no model named 'gpt-4o'; this gateway serves 'assistant', 'gpt-realtime'"
        )
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 1008
