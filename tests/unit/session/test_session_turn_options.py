"""A session's turn detection and tool choice (``docs/protocol.md`` 10.18) on a recording
transport: a commit that only commits, ``response.create`` that asks for the answer, and a
``session.update`` of either option, checked, applied upstream and kept for a resume. No
sockets (``tests/session_kit.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from session_kit import Rig, make_session

from gateway.protocol import AudioCommit, BinaryAudio, ResponseCreate, SessionUpdate
from gateway.registry import Registry
from transports.base import ForcedTool, TurnDetection


@pytest.fixture
def voice(full_registry: Registry, tmp_path: Path) -> Rig:
    return make_session(full_registry, tmp_path, mode="voice")


async def test_a_commit_without_a_reply_only_commits_and_response_create_asks(
    voice: Rig,
) -> None:
    session = voice.session
    await session.on_client_event(BinaryAudio(pcm=bytes(960)))
    await session.on_client_event(AudioCommit(respond=False))
    assert session.turn.number == 0  # no turn yet: nothing asked the model to answer
    await session.on_client_event(ResponseCreate(event_id="r1"))
    assert session.turn.number == 1
    await session.on_client_event(AudioCommit())  # as before: commit and answer
    assert [name for name, _ in voice.transport.calls] == [
        "send_audio",
        "commit_audio",
        "request_response",
        "commit_audio",
    ]
    commits = [detail for name, detail in voice.transport.calls if name == "commit_audio"]
    assert commits == ["no reply", None]
    assert session.turn.number == 2


async def test_an_update_of_both_reaches_the_upstream_and_a_resume_keeps_them(
    voice: Rig,
) -> None:
    session = voice.session
    update = SessionUpdate(
        turn_detection="manual",  # type: ignore[arg-type]  # the wire value, as decoded
        tool_choice={"type": "function", "name": "get_current_time"},  # type: ignore[arg-type]
        event_id="u1",
    )
    await session.on_client_event(update)
    manual, forced = TurnDetection(manual=True), ForcedTool("get_current_time")
    assert ("update", (None, None, manual, forced)) in voice.transport.calls
    (updated,) = voice.outbound.events
    assert updated["type"] == "session.updated"
    assert updated["turn_detection"] == "manual"
    assert updated["tool_choice"] == {"type": "function", "name": "get_current_time"}
    stored = session.snapshot()
    assert (stored.turn_detection, stored.tool_choice) == (
        "manual",
        {"type": "function", "name": "get_current_time"},
    )


async def test_a_tool_choice_naming_a_tool_the_model_is_not_offered_changes_nothing(
    voice: Rig,
) -> None:
    session = voice.session
    await session.on_client_event(
        SessionUpdate(
            turn_detection="manual",  # type: ignore[arg-type]
            tool_choice={"type": "function", "name": "no_such_tool"},  # type: ignore[arg-type]
            event_id="u2",
        )
    )
    (error,) = voice.outbound.events
    assert (error["type"], error["code"], error["event_id"]) == ("error", "invalid_event", "u2")
    assert "no tool named 'no_such_tool' is offered to the model" in error["message"]
    assert not [name for name, _ in voice.transport.calls if name == "update"]
    assert session.snapshot().turn_detection == "server"  # the whole update was refused
    assert session.snapshot().tool_choice == "auto"
