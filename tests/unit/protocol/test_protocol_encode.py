"""Every gateway → client event of docs/protocol.md section 6 encodes to exactly its documented
keys."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from gateway.protocol import (
    AudioFormat,
    ConfirmationOutcome,
    ConfirmationRequested,
    ConfirmationResolved,
    EndReason,
    ErrorCode,
    ErrorEvent,
    Mode,
    Pong,
    ProtocolError,
    ResponseDone,
    ResponseStarted,
    ResponseStatus,
    ServerEvent,
    SessionEnded,
    SessionLimits,
    SessionStarted,
    SessionUpdated,
    SpeechStarted,
    TextDelta,
    ToolErrorInfo,
    ToolFinished,
    ToolInfo,
    ToolStarted,
    TranscriptDelta,
    TranscriptDone,
    TranscriptRole,
    encode,
)


def wire(event: ServerEvent) -> dict[str, Any]:
    message = orjson.loads(encode(event))
    assert isinstance(message, dict)
    assert next(iter(message)) == "type"
    return message


SESSION_STARTED = SessionStarted(
    session_id="sess-1",
    resume_token="tok",
    mode=Mode.VOICE,
    provider="openai",
    model="gpt-realtime",
    registry_version="1.0.abcdef12",
    tools=(
        ToolInfo(
            name="get_weather",
            summary="Weather.",
            category="retrieval",
            requires_confirmation=False,
        ),
        ToolInfo(name="pay", summary="Pay.", category="action", requires_confirmation=True),
    ),
    audio=AudioFormat(input_rate=16000, output_rate=24000),
    resumed=False,
    limits=SessionLimits(max_duration_s=1800, idle_timeout_s=120),
)

FINISHED_OK = ToolFinished(
    call_id="call-1",
    name="get_weather",
    ok=True,
    duration_ms=42,
    intents=("SUPPRESS_AUDIO",),
    data={"temp_c": 21},
)
FINISHED_FAILED = ToolFinished(
    call_id="call-2",
    name="pay",
    ok=False,
    duration_ms=3,
    error=ToolErrorInfo(type="BUDGET_EXCEEDED", message="Too many calls."),
)
EXPIRES_AT = datetime(2025, 1, 31, 12, 0, 5, 250000, tzinfo=UTC)

# (event, the exact keys of its JSON object) for every event type of section 6.
KEY_TABLE: list[tuple[ServerEvent, set[str]]] = [
    (
        SESSION_STARTED,
        {
            "type",
            "session_id",
            "resume_token",
            "mode",
            "provider",
            "model",
            "registry_version",
            "tools",
            "audio",
            "resumed",
            "limits",
        },
    ),
    (ResponseStarted(response_id="r1"), {"type", "response_id"}),
    (TextDelta(response_id="r1", delta="He"), {"type", "response_id", "delta"}),
    (
        TranscriptDelta(role=TranscriptRole.ASSISTANT, response_id="r1", delta="He"),
        {"type", "role", "response_id", "delta"},
    ),
    (TranscriptDelta(role=TranscriptRole.USER, delta="Hi"), {"type", "role", "delta"}),
    (
        TranscriptDone(role=TranscriptRole.ASSISTANT, response_id="r1", text="Hello"),
        {"type", "role", "response_id", "text"},
    ),
    (TranscriptDone(role=TranscriptRole.USER, text="Hi"), {"type", "role", "text"}),
    (SpeechStarted(), {"type"}),
    (
        ResponseDone(response_id="r1", status=ResponseStatus.COMPLETED, text="Hello"),
        {"type", "response_id", "status", "text"},
    ),
    (
        ResponseDone(
            response_id="r1", status=ResponseStatus.FAILED, text="", usage={"total_tokens": 9}
        ),
        {"type", "response_id", "status", "text", "usage"},
    ),
    (
        ToolStarted(call_id="call-1", name="get_weather", arguments={"city": "Oslo"}),
        {"type", "call_id", "name", "arguments"},
    ),
    (FINISHED_OK, {"type", "call_id", "name", "ok", "data", "duration_ms", "intents"}),
    (FINISHED_FAILED, {"type", "call_id", "name", "ok", "error", "duration_ms", "intents"}),
    (
        ConfirmationRequested(
            confirmation_id="conf-1",
            call_id="call-2",
            tool="pay",
            prompt="Pay 5 EUR to Bob?",
            parameters={"amount": 5, "to": "Bob"},
            sensitivity="high",
            expires_at=EXPIRES_AT,
        ),
        {
            "type",
            "confirmation_id",
            "call_id",
            "tool",
            "prompt",
            "parameters",
            "sensitivity",
            "expires_at",
        },
    ),
    (
        ConfirmationResolved(
            confirmation_id="conf-1", decision=ConfirmationOutcome.APPROVED, result=FINISHED_OK
        ),
        {"type", "confirmation_id", "decision", "result"},
    ),
    (
        ConfirmationResolved(confirmation_id="conf-1", decision=ConfirmationOutcome.EXPIRED),
        {"type", "confirmation_id", "decision"},
    ),
    (SessionUpdated(mode=Mode.TEXT), {"type", "mode"}),
    (SessionEnded(reason=EndReason.CLIENT), {"type", "reason"}),
    (SessionEnded(reason=EndReason.ERROR, detail="upstream said no"), {"type", "reason", "detail"}),
    (
        ErrorEvent(code=ErrorCode.INVALID_JSON, message="bad", event_id="e1"),
        {"type", "code", "message", "retryable", "fatal", "event_id"},
    ),
    (
        ErrorEvent(code=ErrorCode.INTERNAL, message="oops", fatal=True),
        {"type", "code", "message", "retryable", "fatal"},
    ),
    (Pong(id="p1"), {"type", "id"}),
    (Pong(), {"type", "id"}),
]


@pytest.mark.parametrize(("event", "keys"), KEY_TABLE, ids=lambda item: getattr(item, "TYPE", ""))
def test_every_server_event_has_exactly_its_documented_keys(
    event: ServerEvent, keys: set[str]
) -> None:
    message = wire(event)
    assert set(message) == keys
    assert message["type"] == event.TYPE


def test_the_key_table_covers_every_server_event_type() -> None:
    documented = {
        "session.started",
        "response.started",
        "text.delta",
        "transcript.delta",
        "transcript.done",
        "speech.started",
        "response.done",
        "tool.started",
        "tool.finished",
        "confirmation.requested",
        "confirmation.resolved",
        "session.updated",
        "session.ended",
        "error",
        "pong",
    }
    assert {event.TYPE for event, _ in KEY_TABLE} == documented


def test_session_started_values() -> None:
    assert wire(SESSION_STARTED) == {
        "type": "session.started",
        "session_id": "sess-1",
        "resume_token": "tok",
        "mode": "voice",
        "provider": "openai",
        "model": "gpt-realtime",
        "registry_version": "1.0.abcdef12",
        "tools": [
            {
                "name": "get_weather",
                "summary": "Weather.",
                "category": "retrieval",
                "requires_confirmation": False,
            },
            {"name": "pay", "summary": "Pay.", "category": "action", "requires_confirmation": True},
        ],
        "audio": {"input_rate": 16000, "output_rate": 24000},
        "resumed": False,
        "limits": {"max_duration_s": 1800, "idle_timeout_s": 120},
    }


def test_session_started_names_the_upstreams_input_rate_and_a_phone_calls_encoding() -> None:
    told = dataclasses.replace(SESSION_STARTED, upstream_input_rate=24000)
    assert wire(told)["audio"] == {
        "input_rate": 16000,
        "output_rate": 24000,
        "upstream_input_rate": 24000,
    }
    phone = dataclasses.replace(
        SESSION_STARTED, audio=AudioFormat(input_rate=8000, output_rate=8000, encoding="pcmu")
    )
    assert wire(phone)["audio"] == {"input_rate": 8000, "output_rate": 8000, "encoding": "pcmu"}


def test_pcmu_is_8_khz_both_ways_and_no_other_encoding_exists() -> None:
    with pytest.raises(ProtocolError, match="pcmu is 8000 Hz"):
        AudioFormat(input_rate=16000, output_rate=8000, encoding="pcmu")
    with pytest.raises(ProtocolError, match="encoding"):
        AudioFormat(encoding="opus")


def test_tool_finished_values() -> None:
    assert wire(FINISHED_OK) == {
        "type": "tool.finished",
        "call_id": "call-1",
        "name": "get_weather",
        "ok": True,
        "data": {"temp_c": 21},
        "duration_ms": 42,
        "intents": ["SUPPRESS_AUDIO"],
    }
    assert wire(FINISHED_FAILED) == {
        "type": "tool.finished",
        "call_id": "call-2",
        "name": "pay",
        "ok": False,
        "error": {"type": "BUDGET_EXCEEDED", "message": "Too many calls."},
        "duration_ms": 3,
        "intents": [],
    }


def test_successful_tool_without_data_sends_null_data() -> None:
    event = ToolFinished(call_id="c", name="n", ok=True, duration_ms=1)
    assert wire(event)["data"] is None


@pytest.mark.parametrize(
    "build",
    [
        lambda: ToolFinished(call_id="c", name="n", ok=False, duration_ms=1),
        lambda: ToolFinished(
            call_id="c", name="n", ok=True, duration_ms=1, error=ToolErrorInfo(type="X", message="")
        ),
        lambda: ToolFinished(
            call_id="c",
            name="n",
            ok=False,
            duration_ms=1,
            data={"a": 1},
            error=ToolErrorInfo(type="X", message=""),
        ),
    ],
)
def test_tool_finished_carries_error_exactly_when_not_ok(build: Any) -> None:
    with pytest.raises(ValueError, match=r"tool\.finished"):
        build()


def test_confirmation_resolved_result_is_the_tool_finished_payload() -> None:
    message = wire(
        ConfirmationResolved(
            confirmation_id="conf-1", decision=ConfirmationOutcome.APPROVED, result=FINISHED_OK
        )
    )
    expected = wire(FINISHED_OK)
    del expected["type"]
    assert message["result"] == expected
    assert message["decision"] == "approved"


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (EXPIRES_AT, "2025-01-31T12:00:05.250Z"),
        (
            datetime(2025, 1, 31, 13, 0, tzinfo=timezone(timedelta(hours=1))),
            "2025-01-31T12:00:00.000Z",
        ),
    ],
)
def test_expires_at_is_iso_8601_utc(moment: datetime, text: str) -> None:
    event = ConfirmationRequested(
        confirmation_id="c",
        call_id="k",
        tool="t",
        prompt="?",
        parameters={},
        sensitivity="critical",
        expires_at=moment,
    )
    assert wire(event)["expires_at"] == text
    assert datetime.fromisoformat(text) == moment


def test_a_naive_expiry_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ConfirmationRequested(
            confirmation_id="c",
            call_id="k",
            tool="t",
            prompt="?",
            parameters={},
            sensitivity="low",
            expires_at=datetime(2025, 1, 1),  # naive on purpose
        )


@pytest.mark.parametrize("status", list(ResponseStatus))
def test_response_status_values(status: ResponseStatus) -> None:
    assert wire(ResponseDone(response_id="r", status=status, text=""))["status"] == status.value


def test_documented_enumerations() -> None:
    assert {s.value for s in ResponseStatus} == {"completed", "cancelled", "interrupted", "failed"}
    assert {r.value for r in EndReason} == {
        "client",
        "intent",
        "idle_timeout",
        "max_duration",
        "upstream_failed",
        "shutdown",
        "error",
        "budget_exhausted",
        "key_revoked",
    }
    assert {d.value for d in ConfirmationOutcome} == {"approved", "rejected", "expired"}
    assert {r.value for r in TranscriptRole} == {"user", "assistant"}


@pytest.mark.parametrize("ping_id", ["a", 0, 1.5, True, None])
def test_pong_echoes_the_id_as_given(ping_id: Any) -> None:
    message = wire(Pong(id=ping_id))
    assert message == {"type": "pong", "id": ping_id}
    assert type(message["id"]) is type(ping_id)


def test_error_values() -> None:
    assert wire(ErrorEvent(code=ErrorCode.RATE_LIMITED, message="slow down", retryable=True)) == {
        "type": "error",
        "code": "rate_limited",
        "message": "slow down",
        "retryable": True,
        "fatal": False,
    }


def test_encode_produces_compact_utf8_json() -> None:
    assert encode(TextDelta(response_id="r", delta="ü")) == (
        b'{"type":"text.delta","response_id":"r","delta":"\xc3\xbc"}'
    )


def test_a_value_json_cannot_carry_is_an_internal_protocol_error() -> None:
    event = ToolStarted(call_id="c", name="n", arguments={"x": {1, 2}})  # type: ignore[dict-item]
    with pytest.raises(ProtocolError) as caught:
        encode(event)
    assert caught.value.code is ErrorCode.INTERNAL
    assert "tool.started" in caught.value.message
