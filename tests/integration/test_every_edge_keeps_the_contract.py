"""The client edge contract: every edge (the native protocol, ``/v1/realtime``, the phone) carries
one session the same way, each in its own protocol's words (``edge_kit``'s drivers): a text
turn, a voice turn, a gateway tool call, a confirmation, a barge-in, an intent that ends the
session, bad input, a client that goes away. As ``tests/contract`` holds every upstream
transport to one contract, this holds every client edge to one.

Real sockets, the embedded local model (deterministic: ``/say``, ``/tool``, an utterance heard
as ``audio:<N>ms``, ``yes`` to call a confirmed tool again)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from edge_kit import DRIVERS, EdgeDriver, eventually, the_session
from harness import GatewayFactory

from gateway.protocol import EndReason

MEETING = json.dumps({"title": "Dentist", "start": "2030-01-15T10:00:00+00:00"})
LONG = " ".join(f"word{n}" for n in range(40))  # 4 s of speech


@pytest.fixture(params=list(DRIVERS))
async def edge(request: pytest.FixtureRequest) -> AsyncIterator[EdgeDriver]:
    driver = DRIVERS[request.param]()
    yield driver
    if getattr(driver, "gateway", None) is not None:
        await driver.hang_up()


def voice(**settings: Any) -> dict[str, Any]:
    return {"provider": "local", **settings}


async def test_a_text_turn_is_answered(edge: EdgeDriver, gateway_factory: GatewayFactory) -> None:
    await edge.open(gateway_factory, "/say Good morning to you", **voice())
    reply = await edge.reply()
    assert reply.transcript == "Good morning to you"
    assert reply.audio_ms > 0  # spoken, on every edge (a voice session)


async def test_a_voice_turn_is_heard_and_answered(
    edge: EdgeDriver, gateway_factory: GatewayFactory
) -> None:
    await edge.open(gateway_factory, **voice())
    await edge.speak(600)
    reply = await edge.reply()
    assert reply.transcript.startswith("You said: audio:"), reply
    assert reply.audio_ms > 0


async def test_a_gateway_tool_runs_once_and_its_result_is_answered(
    edge: EdgeDriver, gateway_factory: GatewayFactory
) -> None:
    await edge.open(gateway_factory, "/tool get_current_time {}", **voice())
    reply = await edge.reply()
    assert reply.transcript.startswith("Tool results: get_current_time="), reply
    assert edge.gateway.decisions("get_current_time") == [("get_current_time", "executed")]


async def test_a_sensitive_tool_runs_only_after_the_edge_s_approval(
    edge: EdgeDriver, gateway_factory: GatewayFactory
) -> None:
    await edge.open(gateway_factory, f"/tool calendar_create_event {MEETING}", **voice())
    await eventually(
        lambda: (
            edge.gateway.decisions("calendar_create_event")
            == [("calendar_create_event", "confirmation_pending")]
        )
    )
    await edge.approve()
    await eventually(
        lambda: ("calendar_create_event", "confirmed") in edge.gateway.decisions(),
    )
    decisions = edge.gateway.decisions("calendar_create_event")
    assert decisions.count(("calendar_create_event", "confirmed")) == 1  # ran once
    assert ("calendar_create_event", "executed") not in decisions  # never without approval


async def test_the_user_s_speech_cuts_the_reply_in_progress(
    edge: EdgeDriver, gateway_factory: GatewayFactory
) -> None:
    await edge.open(gateway_factory, f"/say {LONG}", **voice(local_pace=1.0))
    await edge.reply_playing()
    await edge.speak(400)
    assert await edge.was_cut()
    reply = await edge.reply()  # the interruption itself is answered
    assert reply.transcript.startswith("You said: audio:"), reply


async def test_an_intent_ends_the_session_after_its_reply(
    edge: EdgeDriver, gateway_factory: GatewayFactory
) -> None:
    await edge.open(gateway_factory, "/tool end_voice_session {}", **voice())
    assert await edge.closed_by_gateway()
    await eventually(lambda: edge.gateway.manager.sessions == {})
    ended = edge.gateway.metric("gateway_sessions_ended_total", reason=EndReason.INTENT.value)
    assert ended == 1
    assert edge.gateway.decisions("end_voice_session") == [("end_voice_session", "executed")]


async def test_bad_input_is_refused_and_the_session_goes_on(
    edge: EdgeDriver, gateway_factory: GatewayFactory
) -> None:
    await edge.open(gateway_factory, **voice())
    refused = await edge.send_garbage()
    assert refused in {"invalid_json", None}, refused
    if edge.name != "phone":
        assert refused is not None  # told why, where the protocol has a way to say it
    await edge.speak(500)
    assert (await edge.reply()).transcript.startswith("You said: audio:")
    assert not the_session(edge.gateway).ended.is_set()


async def test_a_client_that_goes_away_leaves_no_session_behind(
    edge: EdgeDriver, gateway_factory: GatewayFactory
) -> None:
    # (the native protocol keeps a dropped session for a resume: here for half a second)
    await edge.open(gateway_factory, "/say hello", **voice(resume_window_s=0.5))
    await edge.reply()
    session = the_session(edge.gateway)
    await edge.hang_up()
    await eventually(lambda: edge.gateway.manager.sessions == {})
    assert session.ended.is_set()
    await session.closed()  # its upstream was closed, not dropped
