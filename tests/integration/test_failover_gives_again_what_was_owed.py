"""After a stall, the next target is asked again for what the stalled one owed, the way it was
asked: tool results are given to it as results (the call runs once; the new model answers them,
it does not call the tool again), and a typed message in a voice session is sent again even
while the microphone streams silence (a replay of that silence answers nothing: the session
would fail over and over). Voice sessions on an alias of OpenAI Realtime then Gemini Live."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from harness import Client, Gateway, GatewayFactory, pcm_silence

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.registry import Registry

GEMINI_VOICE = "gemini-2.5-flash-native-audio-preview-09-2025"
AUDIO = {"input_rate": 16000, "output_rate": 16000}


@pytest.fixture
async def gateway(
    gateway_factory: GatewayFactory, tmp_path: Path, journal_registry: Registry
) -> AsyncIterator[tuple[Gateway, FakeRealtimeServer, FakeGeminiServer]]:
    async with (
        FakeRealtimeServer(FakeOptions()) as openai,
        FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs") as gemini,
    ):
        models = tmp_path / "models.json"
        targets = [
            {"provider": "openai", "model": "gpt-realtime"},
            {"provider": "gemini", "model": GEMINI_VOICE},
        ]
        models.write_text(json.dumps({"models": {"assistant": {"targets": targets}}}))
        gateway = await gateway_factory(
            registry=journal_registry,
            models=models,
            openai_ws_url=openai.ws_url,
            openai_api_key="sk-test",
            gemini_base_url=gemini.base_url,
            gemini_ca_file=gemini.ca_file,
            gemini_api_key="test-key",
            first_output_voice_s=0.5,
        )
        yield gateway, openai, gemini


async def _silence(client: Client, ms: int) -> None:
    """An open microphone in a quiet room: 20 ms frames of silence."""
    pcm = pcm_silence(ms)
    for start in range(0, len(pcm), 640):
        await client.send_raw(pcm[start : start + 640])


def _executions(journal: Path) -> list[str]:
    lines = journal.read_text().splitlines() if journal.exists() else []
    return [json.loads(line)["label"] for line in lines]


async def test_results_the_stalled_model_never_answered_go_to_the_next_and_the_call_runs_once(
    gateway: tuple[Gateway, FakeRealtimeServer, FakeGeminiServer], journal: Path
) -> None:
    gw, openai, _ = gateway
    async with gw.session("voice", model="assistant", audio=AUDIO) as client:
        await client.send("text.send", text='/tool journal {"label": "once", "sleep_ms": 300}')
        await client.last("tool.started")  # the call's own response has started: the next
        openai.faults.fail_next("stall_first", 1)  # one, the reply to its result, stalls
        await client.last("tool.finished")
        changed = await client.last("session.provider_changed", within=10)
        assert (changed["provider"], changed["reason"]) == ("gemini", "stall_first_output")
        reply = await client.next_spoken()
    assert "once" in reply["text"]  # the new model tells of the result it was given
    assert _executions(journal) == ["once"]  # and did not call the tool again
    assert [e["type"] for e in client.events].count("tool.started") == 1


async def test_a_typed_message_with_the_microphone_open_is_answered_by_the_next_target(
    gateway: tuple[Gateway, FakeRealtimeServer, FakeGeminiServer],
) -> None:
    gw, openai, gemini = gateway
    async with gw.session("voice", model="assistant", audio=AUDIO) as client:
        await _silence(client, 400)
        openai.faults.stall_first_output = True
        await client.send("text.send", text="are you there")
        await _silence(client, 400)
        changed = await client.last("session.provider_changed", within=10)
        assert changed["reason"] == "stall_first_output"
        reply = await client.next_spoken()
    assert reply["text"] == "You said: are you there"
    assert len(gemini.connections) == 1  # answered there: no second failover
