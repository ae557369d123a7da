"""``session.created`` / ``session.updated`` carry the full GA session object, and a
``session.update`` changes only the fields it names (``null`` clears), as on OpenAI's server."""

from __future__ import annotations

from typing import Any

from compat_kit import sdk_parse, view

from gateway.edges.realtime.server_wire import CountingIds
from gateway.edges.realtime.session_config import (
    ForcedFunction,
    FunctionTool,
    SessionView,
    TurnDetection,
    decode_session_patch,
)
from gateway.edges.realtime.translate import Translator

SERVER_VAD = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 500,
    "idle_timeout_ms": None,
    "create_response": True,
    "interrupt_response": True,
}


def updated(current: SessionView, **session: Any) -> SessionView:
    return current.apply(decode_session_patch({"type": "realtime", **session}))


def test_session_created_is_the_full_default_session() -> None:
    (event,) = Translator(ids=CountingIds()).session_created(view(instructions="Be brief."))
    assert event == {
        "type": "session.created",
        "event_id": "event_1",
        "session": {
            "type": "realtime",
            "object": "realtime.session",
            "id": "sess_1",
            "model": "gpt-realtime",
            "output_modalities": ["audio"],
            "instructions": "Be brief.",
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
            "tracing": None,
            "truncation": "auto",
            "prompt": None,
            "expires_at": 1_700_003_600,
            "include": None,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": None,
                    "noise_reduction": None,
                    "turn_detection": SERVER_VAD,
                },
                "output": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "voice": "alloy",
                    "speed": 1.0,
                },
            },
        },
    }
    sdk_parse(event)


def test_an_update_changes_only_what_it_names() -> None:
    tool = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    before = view(instructions="Be brief.", transcription={"model": "whisper-1"})
    after = updated(
        before,
        output_modalities=["text"],
        tools=[tool],
        tool_choice={"type": "function", "name": "get_weather"},
        audio={"output": {"voice": "marin"}},
    )
    assert after.instructions == "Be brief."
    assert after.transcription == {"model": "whisper-1"}
    assert after.turn_detection == TurnDetection()
    assert after.modality == "text"
    assert after.voice == "marin"
    assert after.tools == (
        FunctionTool(
            name="get_weather",
            description="Weather for a city",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        ),
    )
    assert after.tool_choice == ForcedFunction("get_weather")
    (event,) = Translator(ids=CountingIds()).session_updated(after)
    assert event["type"] == "session.updated"
    session = event["session"]
    assert session["output_modalities"] == ["text"]
    assert session["tools"] == [tool]  # the client's own tools, as it gave them
    assert session["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert session["audio"]["output"]["voice"] == "marin"
    sdk_parse(event)


def test_turn_detection_merges_over_the_current_one_of_the_same_type() -> None:
    slower = updated(
        view(),
        audio={"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 800}}},
    )
    assert slower.turn_detection == TurnDetection(silence_duration_ms=800)
    still = updated(
        slower, audio={"input": {"turn_detection": {"type": "server_vad", "threshold": 0.7}}}
    )
    assert still.turn_detection == TurnDetection(silence_duration_ms=800, threshold=0.7)


def test_another_vad_type_starts_from_its_own_defaults() -> None:
    semantic = updated(
        view(), audio={"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "low"}}}
    )
    assert semantic.turn_detection is not None
    assert semantic.turn_detection.to_wire() == {
        "type": "semantic_vad",
        "eagerness": "low",
        "create_response": True,
        "interrupt_response": True,
    }
    sdk_parse(Translator(ids=CountingIds()).session_updated(semantic)[0])


def test_null_clears_turn_detection_and_transcription() -> None:
    before = view(transcription={"model": "whisper-1"})
    after = updated(before, audio={"input": {"turn_detection": None, "transcription": None}})
    assert after.turn_detection is None
    assert after.transcription is None
    session = Translator(ids=CountingIds()).session_updated(after)[0]
    assert session["session"]["audio"]["input"]["turn_detection"] is None
    sdk_parse(session)


def test_clearing_instructions_and_tools_uses_empty_values() -> None:
    before = updated(view(instructions="x"), tools=[{"type": "function", "name": "f"}])
    after = updated(before, instructions="", tools=[])
    assert (after.instructions, after.tools) == ("", ())


def test_documented_fields_this_endpoint_does_not_apply_are_listed_not_applied() -> None:
    patch = decode_session_patch(
        {
            "type": "realtime",
            "model": "gpt-realtime-mini",
            "max_output_tokens": 100,
            "truncation": "disabled",
            "audio": {"output": {"speed": 1.3}},
        }
    )
    assert patch.ignored == (
        "session.model",
        "session.max_output_tokens",
        "session.truncation",
        "session.audio.output.speed",
    )
    after = view().apply(patch)
    assert after == view()
    assert after.to_wire()["audio"]["output"]["speed"] == 1.0
