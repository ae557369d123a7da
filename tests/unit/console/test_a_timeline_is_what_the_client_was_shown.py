"""``Entries``: the timeline of a session made of the events its client was sent: turns, tools
(redacted arguments with their allowlisted results), confirmations, intents, errors, barge-ins
(speech over a reply, not speech between replies), moves, failovers, usage, the end;
transcripts only when retained."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.console.entries import Entries
from gateway.protocol import (
    ConfirmationRequested,
    ConfirmationResolved,
    EndReason,
    ErrorCode,
    ErrorEvent,
    ProviderChanged,
    ResponseDone,
    ResponseStarted,
    SessionEnded,
    SessionMoving,
    SpeechStarted,
    ToolFinished,
    ToolStarted,
    TranscriptDone,
)
from gateway.protocol.server_events import ConfirmationOutcome, ResponseStatus, TranscriptRole

AT = "2026-11-29T10:00:00.000Z"


def kinds(entries: Entries, *events: object) -> list[str]:
    return [e["kind"] for event in events for e in entries.of(event, AT)]  # type: ignore[arg-type]


def test_a_turn_with_a_tool_and_its_usage() -> None:
    entries = Entries()
    assert entries.of(SpeechStarted(), AT) == []  # the user speaks between replies: no barge-in
    assert kinds(entries, ResponseStarted(response_id="r1")) == ["turn"]
    assert entries.of(ToolStarted(call_id="c1", name="kb_get", arguments={"id": "a"}), AT) == []
    finished = ToolFinished(
        call_id="c1",
        name="kb_get",
        ok=True,
        duration_ms=3,
        data={"id": "a", "title": "T"},
        intents=("END_VOICE_SESSION",),
    )
    tool, intent = entries.of(finished, AT)
    assert tool == {
        "at": AT,
        "kind": "tool",
        "call_id": "c1",
        "name": "kb_get",
        "arguments": {"id": "a"},
        "ok": True,
        "duration_ms": 3,
        "data": {"id": "a", "title": "T"},
    }
    assert intent == {"at": AT, "kind": "intent", "name": "END_VOICE_SESSION"}
    assert kinds(entries, SpeechStarted()) == ["barge_in"]  # over the reply
    done = ResponseDone(
        response_id="r1", status=ResponseStatus.INTERRUPTED, text="", usage={"total_tokens": 9}
    )
    (usage,) = entries.of(done, AT)
    assert (usage["status"], usage["usage"]) == ("interrupted", {"total_tokens": 9})
    assert entries.of(SpeechStarted(), AT) == []


def test_confirmations_failovers_moves_errors_and_the_end() -> None:
    entries = Entries()
    requested = ConfirmationRequested(
        confirmation_id="k1",
        call_id="c1",
        tool="calendar_create_event",
        prompt="Create it?",
        parameters={"title": "Dentist"},
        sensitivity="medium",
        expires_at=datetime(2026, 11, 29, tzinfo=UTC),
    )
    (asked,) = entries.of(requested, AT)
    assert (asked["state"], asked["tool"]) == ("requested", "calendar_create_event")
    result = ToolFinished(call_id="c1", name="calendar_create_event", ok=True, duration_ms=1)
    resolved = ConfirmationResolved(
        confirmation_id="k1", decision=ConfirmationOutcome.APPROVED, result=result
    )
    assert kinds(entries, resolved) == ["confirmation", "tool"]
    changed = ProviderChanged(provider="gemini", model="g", reason="lost", previous="openai")
    assert kinds(entries, changed, changed) == ["failover", "failover"]
    assert entries.failovers == 2
    moving = SessionMoving(session_id="s", resume_token="tok-5ecret")
    error = ErrorEvent(code=ErrorCode.RATE_LIMITED, message="slow down")
    ended = SessionEnded(reason=EndReason.CLIENT)
    assert kinds(entries, moving, error, ended) == ["move", "error", "ended"]
    assert "tok-5ecret" not in str(entries.of(moving, AT))  # never the resume token


def test_transcripts_only_when_retained() -> None:
    said = TranscriptDone(role=TranscriptRole.USER, text="my card is 4111")
    assert Entries().of(said, AT) == []
    (kept,) = Entries(transcripts=True).of(said, AT)
    assert (kept["role"], kept["text"]) == ("user", "my card is 4111")
