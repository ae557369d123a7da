"""Push-to-talk on the native protocol (``/v1/session``, ``docs/protocol.md`` 10.18), over real
sockets on each voice upstream (the local model, the OpenAI Realtime fake, the Gemini Live
fake): ``turn_detection: "manual"`` at the start, ``audio.commit`` with ``respond: false`` that
only commits, ``response.create`` that asks for the answer, a plain ``audio.commit`` that
commits and asks at once, and ``session.update`` of the options shown in ``session.updated``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from harness import Client, GatewayFactory, pcm_silence, pcm_tone, types
from test_realtime_compat_sdk import running

PROVIDERS = {"local": "local", "openai": "openai", "gemini": "gemini"}
CHUNK = 3200  # 100 ms of 16 kHz PCM16


async def speak(client: Client, pcm: bytes) -> None:
    for start in range(0, len(pcm), CHUNK):
        await client.send_raw(pcm[start : start + CHUNK])


def heard_ms(done: dict[str, Any]) -> int:
    found = re.fullmatch(r"You said: audio:(\d+)ms", done["text"])
    assert found is not None, done["text"]
    return int(found.group(1))


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_a_manual_turn_is_answered_when_the_client_asks(
    kind: str, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    async with (
        running(kind, gateway_factory, tmp_path) as (gateway, _, _),
        gateway.session("voice", provider=PROVIDERS[kind], turn_detection="manual") as client,
    ):
        await speak(client, pcm_tone(400) + pcm_silence(800))
        await client.send("audio.commit", respond=False, event_id="c1")
        await client.send("ping", id="after-commit")
        quiet = await client.until("pong")
        await client.send("response.create", event_id="r1")
        answered = await client.until("response.done")
        await speak(client, pcm_tone(300) + pcm_silence(300))
        await client.send("audio.commit")  # commit and answer, as without the option
        again = await client.until("response.done")
    assert "response.started" not in types(quiet)  # the commit asked for nothing
    assert not [e for e in quiet + answered + again if e["type"] == "error"]
    assert "speech.started" not in types(quiet + answered + again)  # no detector
    assert types(answered).count("response.started") == 1
    assert abs(heard_ms(answered[-1]) - 1200) <= 20  # the whole buffer, silence included
    assert abs(heard_ms(again[-1]) - 600) <= 20


async def test_the_options_change_mid_session_and_session_updated_shows_them(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    async with gateway.session("voice", provider="local") as client:
        await client.send(
            "session.update",
            turn_detection="manual",
            tool_choice={"type": "function", "name": "get_current_time"},
        )
        updated = await client.last("session.updated")
        assert updated["turn_detection"] == "manual"
        assert updated["tool_choice"] == {"type": "function", "name": "get_current_time"}
        await client.send("text.send", text="hello")
        events = await client.until("tool.finished")
        await client.send("session.update", tool_choice="bogus", event_id="u2")
        refused = await client.last("error")
    assert events[-1]["name"] == "get_current_time"  # the forced call, for a plain hello
    assert (refused["code"], refused["event_id"]) == ("invalid_event", "u2")
    assert "'tool_choice' must be" in refused["message"]
