"""A provider is its transport folder and its record, and nothing else: the echo upstream of
``tests/throwaway_provider`` (a ``Transport`` and a ``ProviderRecord``, in a package the gateway
never imports) is registered through ``PROVIDERS.registered``, and from then on the settings
take its name, ``gateway check`` lists it, ``session.start`` may ask for it, it is the default
provider when configured so, and ``/v1/realtime?model=echo-1`` picks it: sessions run on it end
to end over real sockets, its tools declared to it in its record's dialect. Once unregistered,
the settings refuse it again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from harness import GatewayFactory, pcm_tone, token
from pydantic import ValidationError
from throwaway_provider import ECHO, ECHO_MODEL

from gateway.__main__ import main
from gateway.config import Settings
from gateway.providers import PROVIDERS

WITHIN_S = 5.0


@pytest.fixture
def echo_registered() -> Iterator[None]:
    with PROVIDERS.registered(ECHO):
        yield


def test_the_settings_and_gateway_check_take_it_while_it_is_registered(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATEWAY_REGISTRY", raising=False)  # the project's built registry
    with pytest.raises(ValidationError, match="Input should be"):
        Settings(auth="none", provider="echo")
    with PROVIDERS.registered(ECHO):
        settings = Settings(auth="none", provider="echo", twilio_provider="echo")
        assert (settings.provider, settings.phone_provider) == ("echo", "echo")
        assert main(["check"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["echo"]]
    assert listed == [
        "  echo     text+voice  16000/16000 Hz  pcm16  declarations openaiRealtime  models 'echo-…'"
    ]
    with pytest.raises(ValidationError):
        Settings(auth="none", provider="echo")  # gone with its record


async def test_a_native_session_asks_for_it_by_name(
    echo_registered: None, gateway_factory: GatewayFactory
) -> None:
    gateway = await gateway_factory()  # the default provider stays the embedded model
    async with gateway.session("text", provider="echo", tools=["get_current_time"]) as client:
        assert (client.started["provider"], client.started["model"]) == ("echo", "echo")
        reply = await client.say("hello there")
        tools = await client.say("/tools")
    assert _text(reply) == "echo: hello there"
    assert _text(tools) == "tools: get_current_time"  # read from its openaiRealtime declaration


async def test_as_the_default_provider_it_speaks_back_what_it_heard(
    echo_registered: None, gateway_factory: GatewayFactory
) -> None:
    gateway = await gateway_factory(provider="echo")
    spoken = pcm_tone(300)
    async with gateway.session(
        "voice", turn_detection="manual", audio={"input_rate": 16000, "output_rate": 16000}
    ) as client:
        assert client.started["provider"] == "echo"
        for start in range(0, len(spoken), 3200):
            await client.send_raw(spoken[start : start + 3200])
        await client.send("audio.commit")
        done = await client.until("response.done")
        await client.send("text.send", text="hi")
        said = await client.until("response.done")
    assert not [event for event in done + said if event["type"] == "error"]
    assert b"".join(client.audio).startswith(spoken)  # its audio back, untouched, then "hi"
    assert [e["text"] for e in said if e["type"] == "transcript.done"] == ["echo: hi"]


async def test_v1_realtime_picks_it_by_its_model_name(
    echo_registered: None, gateway_factory: GatewayFactory
) -> None:
    gateway = await gateway_factory()
    headers = {"Authorization": f"Bearer {token('alice')}"}
    async with gateway.http.ws_connect(
        f"{gateway.url}/v1/realtime?model={ECHO_MODEL}", headers=headers, max_msg_size=0
    ) as ws:
        created = await _next(ws)
        update = {"type": "realtime", "output_modalities": ["text"]}
        await ws.send_str(_event("session.update", session=update))
        await _until(ws, "session.updated")
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
        }
        await ws.send_str(_event("conversation.item.create", item=item))
        await ws.send_str(_event("response.create"))
        events = await _until(ws, "response.done")
        (session,) = gateway.manager.sessions.values()
        provider = session.provider
    assert (created["type"], created["session"]["model"]) == ("session.created", ECHO_MODEL)
    assert provider == "echo"
    assert not [event for event in events if event["type"] == "error"]
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "echo: hi"


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(event["delta"] for event in events if event["type"] == "text.delta")


def _event(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


async def _next(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    message = await ws.receive(timeout=WITHIN_S)
    assert message.type is aiohttp.WSMsgType.TEXT, message
    event: dict[str, Any] = json.loads(message.data)
    return event


async def _until(ws: aiohttp.ClientWebSocketResponse, kind: str) -> list[dict[str, Any]]:
    seen = [await _next(ws)]
    while seen[-1]["type"] != kind:
        seen.append(await _next(ws))
    return seen
