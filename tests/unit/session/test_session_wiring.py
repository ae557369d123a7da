"""A ``Session`` on a recording transport: the client half's handler table, the upstream half's
(an unknown upstream event is ignored), the audio hot path declining what the event path refuses,
a response end held for its tool batch, and barge-in. No sockets (``tests/session_kit.py``)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest
from session_kit import Rig, make_session

from gateway.protocol import (
    AudioPlayback,
    BinaryAudio,
    ConfirmationRespond,
    Decision,
    Mode,
    Ping,
    ProtocolError,
    SessionStart,
    TextSend,
)
from gateway.registry import Registry
from transports import events as up
from transports.base import Capabilities


@pytest.fixture
def rig(full_registry: Registry, tmp_path: Path) -> Rig:
    return make_session(full_registry, tmp_path)


@pytest.fixture
def voice(full_registry: Registry, tmp_path: Path) -> Rig:
    return make_session(full_registry, tmp_path, mode="voice")


async def pump(rig: Rig, *events: up.UpstreamEvent) -> None:
    """Run the upstream half over ``events``; return once all are handled."""
    reader = asyncio.create_task(rig.session.run_upstream())
    try:
        await rig.transport.push(*events)
    finally:
        reader.cancel()


async def test_client_events_reach_their_handlers(rig: Rig) -> None:
    session = rig.session
    await session.on_client_event(TextSend(text="hello", event_id="t1"))
    await session.on_client_event(Ping(id=7))
    await session.on_client_event(SessionStart(mode=Mode.TEXT))
    await session.on_client_event(
        ConfirmationRespond(confirmation_id="conf_x", decision=Decision.APPROVE, event_id="c1")
    )
    assert ("send_text", "hello") in rig.transport.calls
    assert session.turn.last_user_text == "hello"
    assert [e["type"] for e in rig.outbound.events] == ["pong", "error", "error"]
    assert rig.outbound.events[0]["id"] == 7
    assert rig.outbound.events[1]["code"] == "already_started"
    assert rig.outbound.events[2]["code"] == "confirmation_not_found"
    assert rig.outbound.events[2]["event_id"] == "c1"


async def test_the_hot_path_declines_frames_the_event_path_refuses(voice: Rig) -> None:
    session = voice.session
    # The recording transport has no audio hot path of its own: every frame is declined and
    # goes the event path; an odd or empty frame cannot even become an event there.
    for frame in (b"\x01\x02\x03", b""):
        assert session.audio_now(frame) is False
        with pytest.raises(ProtocolError) as refused:
            BinaryAudio(pcm=frame)
        assert refused.value.code == "invalid_audio"
    await session.on_client_event(BinaryAudio(pcm=bytes(960)))
    assert [name for name, _ in voice.transport.calls] == ["send_audio"]


async def test_an_unknown_upstream_event_is_ignored(rig: Rig) -> None:
    await pump(
        rig,
        up.Unknown(raw={"type": "brand.new.event"}),
        up.ResponseStarted("r1"),
        up.TextDelta("r1", "hi"),
        up.ResponseDone("r1", "completed"),
    )
    assert [e["type"] for e in rig.outbound.events] == [
        "response.started",
        "text.delta",
        "response.done",
    ]
    assert rig.outbound.events[-1]["text"] == "hi"
    assert not rig.session.ended.is_set()


async def test_a_response_end_waits_for_its_tool_batch(rig: Rig) -> None:
    call = up.RequestedCall("call_1", "echo", '{"text":"x"}')
    await pump(
        rig,
        up.ResponseStarted("r1"),
        up.ToolCallsRequested("r1", (call,)),
        up.ResponseDone("r1", "completed"),
    )
    await rig.outbound.wait_for("response.done")
    assert [e["type"] for e in rig.outbound.events] == [
        "response.started",
        "tool.started",
        "tool.finished",
        "response.done",
    ]
    assert [r.call_id for r in rig.transport.results] == ["call_1"]


@pytest.mark.parametrize(("upstream_rate", "passed_on"), [(24000, True), (16000, False)])
async def test_the_upstreams_base64_goes_out_only_with_the_very_bytes_it_encodes(
    full_registry: Registry, tmp_path: Path, upstream_rate: int, passed_on: bool
) -> None:
    rates = Capabilities(input_rate=24000, output_rate=upstream_rate)
    voice = make_session(full_registry, tmp_path, mode="voice", capabilities=rates)
    pcm = bytes(960)
    encoded = base64.b64encode(pcm).decode()
    await pump(voice, up.ResponseStarted("r1"), up.AudioDelta("r1", pcm, encoded=encoded))
    # the client takes 24 kHz: at 16 kHz upstream the frame is resampled, its base64 stale
    assert voice.outbound.audio_encoded == [encoded if passed_on else None]


async def test_barge_in_discards_the_reply_and_truncates_what_was_heard(
    full_registry: Registry, tmp_path: Path
) -> None:
    truncates = Capabilities(input_rate=24000, output_rate=24000, truncation=True)
    voice = make_session(full_registry, tmp_path, mode="voice", capabilities=truncates)
    session = voice.session
    await pump(voice, up.ResponseStarted("r1"), up.AudioDelta("r1", bytes(48000)))
    assert voice.outbound.audio_frames  # one second of speech went out
    await session.on_client_event(AudioPlayback(response_id="r1", played_ms=300))
    await pump(voice, up.SpeechStarted(), up.ResponseDone("r1", "completed"))
    assert voice.outbound.audio_frames == []  # discarded on speech.started
    assert ("truncate", ("r1", 300)) in voice.transport.calls
    done = voice.outbound.of("response.done")[-1]
    assert done["status"] == "interrupted"
