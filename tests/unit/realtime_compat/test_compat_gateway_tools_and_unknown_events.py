"""The gateway's own tools are hidden from the GA client unless ``show_tools``; then they are
conversation items outside any response. Gateway events without a GA form are ignored."""

from __future__ import annotations

from datetime import UTC, datetime

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

from gateway.edges.realtime.server_wire import ServerEvent
from gateway.edges.realtime.translate import Translator
from gateway.protocol import (
    ClientToolRequested,
    ConfirmationOutcome,
    ConfirmationRequested,
    ConfirmationResolved,
    Mode,
    Pong,
    ResponseDone,
    ResponseStatus,
    SessionMoving,
    SessionUpdated,
    TextDelta,
    ToolErrorInfo,
    ToolFinished,
    ToolSlow,
    ToolStarted,
    TranscriptDelta,
    TranscriptRole,
)
from gateway.protocol import ServerEvent as GatewayEvent

TOOL_STARTED = ToolStarted(call_id="call_7", name="get_weather", arguments={"city": "Paris"})
TOOL_FINISHED = ToolFinished(
    call_id="call_7", name="get_weather", ok=True, data={"temp_c": 21}, duration_ms=40
)
TOOL_FAILED = ToolFinished(
    call_id="call_8",
    name="book",
    ok=False,
    error=ToolErrorInfo(type="VALIDATION", message="date is required"),
    duration_ms=3,
)
TOOL_SLOW = ToolSlow(
    call_id="call_7", name="get_weather", elapsed_ms=900, soft_limit_ms=800, cue="tone"
)
CONFIRMATION_REQUESTED = ConfirmationRequested(
    confirmation_id="conf_1",
    call_id="call_9",
    tool="transfer",
    prompt="Send 10 EUR?",
    parameters={},
    sensitivity="high",
    expires_at=datetime(2030, 1, 1, tzinfo=UTC),
)
CONFIRMATION_RESOLVED = ConfirmationResolved(
    confirmation_id="conf_1", decision=ConfirmationOutcome.APPROVED
)


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


# Events with no GA form, and events of responses the bridge never saw begin. (An event of no
# known type cannot reach the bridge at all: the session hands it typed events only.)
UNKNOWN: list[GatewayEvent] = [
    Pong(id=1),
    SessionUpdated(mode=Mode.TEXT),
    SessionMoving(session_id="s", resume_token="t"),
    TextDelta(response_id="never_started", delta="x"),
    TranscriptDelta(role=TranscriptRole.ASSISTANT, response_id="nope", delta="x"),
    ResponseDone(response_id="nope", status=ResponseStatus.COMPLETED, text=""),
    ClientToolRequested(response_id="nope", call_id="c", name="f", arguments="{}"),
]


@pytest.mark.parametrize("event", UNKNOWN, ids=lambda e: str(e.TYPE))
def test_gateway_events_without_a_ga_form_are_ignored(event: GatewayEvent) -> None:
    assert translator().on_event(event) == []


def test_ignored_events_do_not_disturb_a_turn() -> None:
    compat = translator()
    events = compat.on_event(SPEECH_STARTED)
    for event in UNKNOWN:
        events += compat.on_event(event)
    assert types(events) == ["input_audio_buffer.speech_started"]
