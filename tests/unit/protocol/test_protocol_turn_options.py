"""The protocol's turn options (``docs/protocol.md`` 10.18) decoded, checked and written back:
``turn_detection`` and ``tool_choice`` on ``session.start`` / ``session.update``,
``audio.commit.respond``, ``response.create``, and ``session.updated`` showing them. Pure."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.protocol import (
    AudioCommit,
    ProtocolError,
    ResponseCreate,
    SessionStart,
    SessionUpdate,
    SessionUpdated,
    decode_text,
)
from gateway.protocol.client_events import Mode
from transports.base import ForcedTool, TurnDetection

DETECTOR = {"type": "semantic_vad", "eagerness": "low", "create_response": True}


def decoded(**fields: Any) -> Any:
    return decode_text(orjson.dumps(fields))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("server", TurnDetection()),
        ("manual", TurnDetection(manual=True)),
        (DETECTOR, TurnDetection(settings=DETECTOR)),
        (
            {"type": "server_vad", "threshold": 0.6, "silence_duration_ms": 700},
            TurnDetection(
                settings={"type": "server_vad", "threshold": 0.6, "silence_duration_ms": 700}
            ),
        ),
    ],
)
def test_turn_detection_takes_its_three_forms(given: Any, expected: TurnDetection) -> None:
    start = decoded(type="session.start", mode="voice", turn_detection=given)
    assert start.turn_detection == expected
    assert start.to_dict()["turn_detection"] == given  # written back as given


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("auto", "'turn_detection' must be 'server' or 'manual' or an object"),
        (3, "'turn_detection' must be 'server' or 'manual' or an object"),
        ({"threshold": 0.5}, "'turn_detection.type' must be 'server_vad' or 'semantic_vad'"),
        ({"type": "server_vad", "threshold": 2}, "'turn_detection.threshold' must be a number"),
        ({"type": "server_vad", "silence_duration_ms": -1}, "must be an integer >= 0"),
        ({"type": "semantic_vad", "eagerness": "eager"}, "'turn_detection.eagerness' must be"),
        ({"type": "server_vad", "create_response": False}, "'turn_detection.create_response'"),
        ({"type": "server_vad", "interrupt_response": False}, "interrupt_response' must be true"),
        ({"type": "server_vad", "loudness": 1}, "is not a setting of turn detection"),
    ],
)
def test_a_bad_turn_detection_is_an_invalid_event_naming_the_field(
    given: Any, message: str
) -> None:
    with pytest.raises(ProtocolError) as refused:
        decoded(type="session.update", turn_detection=given, event_id="e1")
    assert refused.value.code == "invalid_event"
    assert refused.value.event_id == "e1"
    assert message in refused.value.message


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"type": "function", "name": "get_weather"}, ForcedTool("get_weather")),
    ],
)
def test_tool_choice_takes_the_realtime_forms(given: Any, expected: Any) -> None:
    update = decoded(type="session.update", tool_choice=given)
    assert update.tool_choice == expected
    assert update.to_dict() == {"type": "session.update", "tool_choice": given}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("any", "'tool_choice' must be 'auto', 'none' or 'required' or an object"),
        ({"type": "mcp"}, "'tool_choice.type' must be 'function'"),
        ({"type": "function"}, "'tool_choice.name' must be a non-empty string"),
        ({"type": "function", "name": ""}, "'tool_choice.name' must be a non-empty string"),
    ],
)
def test_a_bad_tool_choice_is_an_invalid_event_naming_the_field(given: Any, message: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        decoded(type="session.start", mode="text", tool_choice=given)
    assert refused.value.code == "invalid_event"
    assert message in refused.value.message


def test_events_built_in_code_take_the_neutral_values_and_absent_means_the_default() -> None:
    start = SessionStart(mode=Mode.VOICE, turn_detection=TurnDetection(manual=True))
    assert start.to_dict()["turn_detection"] == "manual"
    assert "tool_choice" not in start.to_dict()
    plain = decoded(type="session.start", mode="voice")
    assert (plain.turn_detection, plain.tool_choice) == (None, None)
    with pytest.raises(ProtocolError):  # checked whoever built it
        SessionUpdate(turn_detection=TurnDetection(settings={"type": "loud"}))


def test_a_commit_may_leave_the_answer_to_response_create() -> None:
    assert decoded(type="audio.commit") == AudioCommit()
    quiet = decoded(type="audio.commit", respond=False, event_id="c1")
    assert quiet == AudioCommit(respond=False, event_id="c1")
    assert quiet.to_dict() == {"type": "audio.commit", "respond": False, "event_id": "c1"}
    assert AudioCommit().to_dict() == {"type": "audio.commit"}
    with pytest.raises(ProtocolError) as refused:
        decoded(type="audio.commit", respond="no")
    assert "'respond' must be true or false" in refused.value.message
    asked = decoded(type="response.create", event_id="r1")
    assert asked == ResponseCreate(event_id="r1")
    assert asked.to_dict() == {"type": "response.create", "event_id": "r1"}


def test_session_updated_shows_the_options_only_when_they_changed() -> None:
    assert SessionUpdated(mode="voice").to_dict() == {  # type: ignore[arg-type]
        "type": "session.updated",
        "mode": "voice",
    }
    shown = SessionUpdated(mode="voice", turn_detection="manual", tool_choice="none")  # type: ignore[arg-type]
    assert shown.to_dict() == {
        "type": "session.updated",
        "mode": "voice",
        "turn_detection": "manual",
        "tool_choice": "none",
    }
