"""The gateway's own tools are hidden from the GA client unless ``show_tools``; then they are
conversation items outside any response. Gateway events without a GA form are ignored."""

from __future__ import annotations

from typing import Any

import pytest
from compat_kit import (
    SPEECH_STARTED,
    done,
    pcm,
    sdk_parse_all,
    started,
    transcript_delta,
    translator,
    types,
)

from gateway.realtime_compat.server_wire import ServerEvent
from gateway.realtime_compat.translate import Translator

TOOL_STARTED = {
    "type": "tool.started",
    "call_id": "call_7",
    "name": "get_weather",
    "arguments": {"city": "Paris"},
}
TOOL_FINISHED = {
    "type": "tool.finished",
    "call_id": "call_7",
    "name": "get_weather",
    "ok": True,
    "data": {"temp_c": 21},
    "duration_ms": 40,
    "intents": [],
}
TOOL_FAILED = {
    "type": "tool.finished",
    "call_id": "call_8",
    "name": "book",
    "ok": False,
    "error": {"type": "VALIDATION", "message": "date is required"},
    "duration_ms": 3,
    "intents": [],
}
TOOL_SLOW = {
    "type": "tool.slow",
    "call_id": "call_7",
    "name": "get_weather",
    "elapsed_ms": 900,
    "soft_limit_ms": 800,
    "cue": "tone",
}
CONFIRMATION_REQUESTED = {
    "type": "confirmation.requested",
    "confirmation_id": "conf_1",
    "call_id": "call_9",
    "tool": "transfer",
    "prompt": "Send 10 EUR?",
    "parameters": {},
    "sensitivity": "high",
    "expires_at": "2030-01-01T00:00:00.000Z",
}
CONFIRMATION_RESOLVED = {
    "type": "confirmation.resolved",
    "confirmation_id": "conf_1",
    "decision": "approved",
}


def turn_with_tools(compat: Translator) -> list[ServerEvent]:
    events = compat.on_event(started())
    events += compat.on_event(transcript_delta("Let me check."))
    events += compat.on_audio(pcm(20))
    for tool_event in (TOOL_STARTED, TOOL_SLOW, CONFIRMATION_REQUESTED, TOOL_FINISHED):
        events += compat.on_event(tool_event)
    events += compat.on_event(CONFIRMATION_RESOLVED)
    events += compat.on_event(done("completed", "Let me check."))
    return events


def test_without_show_tools_tool_events_leave_no_trace() -> None:
    compat = translator()
    for event in (TOOL_STARTED, TOOL_FINISHED, TOOL_FAILED, TOOL_SLOW):
        assert compat.on_event(event) == []
    assert compat.on_event(CONFIRMATION_REQUESTED) == []
    assert compat.on_event(CONFIRMATION_RESOLVED) == []
    assert len(compat.items) == 0


def test_a_turn_with_hidden_tools_is_the_turn_without_them() -> None:
    with_tools = turn_with_tools(translator())
    plain = translator()
    without = plain.on_event(started())
    without += plain.on_event(transcript_delta("Let me check."))
    without += plain.on_audio(pcm(20))
    without += plain.on_event(done("completed", "Let me check."))
    assert with_tools == without


def test_show_tools_shows_each_call_and_result_as_conversation_items() -> None:
    compat = translator(show_tools=True)
    events = turn_with_tools(compat)
    sdk_parse_all(events)
    shown = [
        e for e in events if e["type"].startswith("conversation.item.") and "response_id" not in e
    ]
    calls = [e["item"] for e in shown if e["item"]["type"] == "function_call"]
    outputs = [e["item"] for e in shown if e["item"]["type"] == "function_call_output"]
    assert len(calls) == len(outputs) == 2  # added and done of each
    assert calls[0] == calls[1]
    assert calls[0]["call_id"] == "call_7"
    assert calls[0]["name"] == "get_weather"
    assert calls[0]["status"] == "completed"
    assert calls[0]["arguments"] == '{"city":"Paris"}'
    assert outputs[0]["output"] == '{"ok":true,"data":{"temp_c":21}}'
    # Never a response event: no client runs a tool (or waits for one) on these.
    assert not any(
        e["type"].startswith("response.") and e.get("item", {}).get("type") == "function_call"
        for e in events
    )
    assert "response.function_call_arguments.done" not in types(events)


def test_show_tools_shows_a_failed_call_with_its_error() -> None:
    compat = translator(show_tools=True)
    added, _ = compat.on_event(TOOL_FAILED)
    assert added["item"]["output"] == (
        '{"ok":false,"error":{"type":"VALIDATION","message":"date is required"}}'
    )
    sdk_parse_all([added])


UNKNOWN: list[dict[str, Any]] = [
    {"type": "pong", "id": 1},
    {"type": "session.started", "session_id": "s", "mode": "voice"},
    {"type": "session.updated", "mode": "text"},
    {"type": "session.moving", "session_id": "s", "resume_token": "t", "reason": "drain"},
    {"type": "made.up.event", "x": 1},
    {"no_type": True},
    {"type": 5},
    {"type": "text.delta", "response_id": "never_started", "delta": "x"},
    {"type": "transcript.delta", "role": "assistant", "response_id": "nope", "delta": "x"},
    {"type": "response.done", "response_id": "nope", "status": "completed", "text": ""},
    {"type": "client_tool.requested", "response_id": "nope", "call_id": "c", "name": "f"},
]


@pytest.mark.parametrize("event", UNKNOWN, ids=lambda e: str(e.get("type")))
def test_gateway_events_without_a_ga_form_are_ignored(event: dict[str, Any]) -> None:
    assert translator().on_event(event) == []


def test_ignored_events_do_not_disturb_a_turn() -> None:
    compat = translator()
    events = compat.on_event(SPEECH_STARTED)
    for event in UNKNOWN:
        events += compat.on_event(event)
    assert types(events) == ["input_audio_buffer.speech_started"]
