"""No dead air: a tool call the model waits for runs past the voice soft limit (800 ms), and
within 200 ms more the caller hears something: a line the OpenAI model says outside the
conversation, or the gateway's tone (the local model; the phone bridge too). Measured on the
client's receive times (and, for the phone, against the tool handler's own start), never in a
timed unit test."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from harness import Client, GatewayFactory, registry_with_variant

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.registry import Registry

SOFT_S = 0.8
WITHIN_S = 0.2
SLOW = '/tool slow_lookup {"ms": 1500}'


@pytest.fixture(scope="module")
def slow_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    root = tmp_path_factory.mktemp("holding")
    return registry_with_variant(root, "sleepy", "slow_lookup", timeoutMs=5000)


@pytest.fixture
async def fake() -> AsyncIterator[FakeRealtimeServer]:
    server = FakeRealtimeServer(FakeOptions())
    await server.start()
    yield server
    await server.stop()


def first_audio_after(client: Client, event_type: str) -> tuple[float, float]:
    """(arrival of the first ``event_type`` event, arrival of the first audio frame after it)."""
    at = next(
        i
        for i, (kind, item) in enumerate(client.timeline)
        if kind == "event" and item["type"] == event_type
    )
    audio = next(i for i in range(at, len(client.timeline)) if client.timeline[i][0] == "audio")
    return client.arrived[at], client.arrived[audio]


async def slow_call(client: Client) -> dict[str, Any]:
    """Ask for the slow call; the events up to the reply that follows its result."""
    await client.send("text.send", text=SLOW)
    await client.last("tool.slow")
    await client.last("tool.finished")
    while not (done := await client.last("response.done"))["text"].startswith("Tool results"):
        pass
    return done


async def test_openai_says_a_holding_line_aside_within_200_ms_of_the_soft_limit(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, slow_registry: Registry
) -> None:
    gateway = await gateway_factory(
        registry=slow_registry, provider="openai", openai_ws_url=fake.ws_url, openai_api_key="k"
    )
    async with gateway.session("voice", audio={"output_rate": 24000}) as client:
        await slow_call(client)
        slow = next(e for e in client.events if e["type"] == "tool.slow")
        assert (slow["name"], slow["cue"], slow["soft_limit_ms"]) == ("slow_lookup", "line", 800)
        started_at, heard_at = first_audio_after(client, "tool.started")
        assert SOFT_S - 0.05 <= heard_at - started_at <= SOFT_S + WITHIN_S, heard_at - started_at
        # The line was asked for outside the conversation, and the model does not remember it.
        oob = [
            e["response"]
            for e in fake.connections[0].received("response.create")
            if (e.get("response") or {}).get("conversation") == "none"
        ]
        assert len(oob) == 1
        assert oob[0]["input"] == []
        history = [
            item.text
            for item in gateway.manager.sessions[client.started["session_id"]].conversation.history
        ]
        assert not any("still working" in text for text in history)
    assert gateway.metric("gateway_holding_cues_total", cue="line") == 1


async def test_the_local_model_gets_the_gateway_s_tone_in_time(
    gateway_factory: GatewayFactory, slow_registry: Registry
) -> None:
    gateway = await gateway_factory(registry=slow_registry, provider="local", local_pace=1.0)
    async with gateway.session("voice", audio={"output_rate": 16000}) as client:
        await slow_call(client)
        slow = next(e for e in client.events if e["type"] == "tool.slow")
        assert slow["cue"] == "tone"
        started_at, heard_at = first_audio_after(client, "tool.started")
        assert SOFT_S - 0.05 <= heard_at - started_at <= SOFT_S + WITHIN_S, heard_at - started_at
        index = client.arrived.index(heard_at)
        tone = b"".join(item for kind, item in client.timeline[index:] if kind == "audio")
        samples = np.frombuffer(tone[: 16000 * 2 * 390 // 1000], "<i2") / 32768.0
        level = 20 * math.log10(float(np.sqrt(np.mean(samples**2))) + 1e-12)
        assert -30 < level < -15  # a soft tone (a tenth of full scale), not speech and not silence


@pytest.mark.parametrize(
    ("cue", "mode", "ms"), [("off", "voice", 1500), ("auto", "text", 2500)]
)  # text mode's soft limit is 2 s
async def test_no_cue_when_off_or_in_text_but_the_client_is_told(
    gateway_factory: GatewayFactory, slow_registry: Registry, cue: str, mode: str, ms: int
) -> None:
    gateway = await gateway_factory(registry=slow_registry, provider="local", holding_cue=cue)
    async with gateway.session(mode) as client:
        await client.send("text.send", text=f'/tool slow_lookup {{"ms": {ms}}}')
        events = await client.until("tool.finished")
        slow = next(e for e in events if e["type"] == "tool.slow")
        assert slow["cue"] == "none"
        at = client.timeline.index(("event", slow))
        assert not [k for k, _ in client.timeline[at:] if k == "audio"]


async def test_a_quick_call_gets_no_cue(
    gateway_factory: GatewayFactory, slow_registry: Registry
) -> None:
    gateway = await gateway_factory(registry=slow_registry, provider="local")
    async with gateway.session("voice") as client:
        await client.send("text.send", text='/tool slow_lookup {"ms": 100}')
        events = await client.until("tool.finished")
        assert "tool.slow" not in [e["type"] for e in events]
    assert gateway.metric("gateway_holding_cues_total", cue="tone") == 0
