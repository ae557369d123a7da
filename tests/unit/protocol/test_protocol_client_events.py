"""Client events validate themselves when built in Python, and round-trip through JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import orjson
import pytest

from gateway.protocol import (
    AudioAppend,
    AudioClear,
    AudioCommit,
    AudioFormat,
    AudioPlayback,
    BinaryAudio,
    ConfirmationRespond,
    Decision,
    ErrorCode,
    JsonClientEvent,
    Mode,
    Ping,
    ProtocolError,
    ResponseCancel,
    Resume,
    SessionEnd,
    SessionStart,
    SessionUpdate,
    TextSend,
    ToolDialect,
    decode_text,
    encode_client_event,
)

EVERY_CLIENT_EVENT: list[JsonClientEvent] = [
    SessionStart(mode=Mode.VOICE),
    SessionStart(
        mode=Mode.TEXT,
        provider="chat",
        model="gpt",
        voice="alloy",
        instructions="hi",
        locale="en-US",
        audio=AudioFormat(input_rate=48000, output_rate=8000),
        tools=("a", "b"),
        metadata={"k": "v"},
        resume=Resume(session_id="s", resume_token="t"),
        tool_dialect=ToolDialect.JSON,
        event_id="e0",
    ),
    AudioAppend(audio=b"\x00\x01" * 10, event_id="e1"),
    AudioCommit(),
    AudioClear(event_id="e2"),
    AudioPlayback(response_id="r", played_ms=99),
    TextSend(text="hello"),
    ResponseCancel(),
    ConfirmationRespond(confirmation_id="c", decision=Decision.REJECT),
    ConfirmationRespond(confirmation_id="c", decision=Decision.APPROVE, parameters={"x": [1]}),
    SessionUpdate(mode=Mode.TEXT),
    SessionUpdate(instructions="new"),
    SessionEnd(reason="done"),
    SessionEnd(),
    Ping(id=7),
    Ping(id="x", event_id="p"),
    Ping(),
]


@pytest.mark.parametrize("event", EVERY_CLIENT_EVENT, ids=lambda event: type(event).__name__)
def test_encode_then_decode_gives_the_same_event(event: JsonClientEvent) -> None:
    assert decode_text(encode_client_event(event)) == event


@pytest.mark.parametrize("event", EVERY_CLIENT_EVENT, ids=lambda event: type(event).__name__)
def test_encoded_client_events_start_with_their_type(event: JsonClientEvent) -> None:
    message = orjson.loads(encode_client_event(event))
    assert next(iter(message)) == "type"
    assert message["type"] == event.TYPE


def test_encoded_session_start_spells_every_field_as_documented() -> None:
    message = orjson.loads(encode_client_event(EVERY_CLIENT_EVENT[1]))
    assert message == {
        "type": "session.start",
        "mode": "text",
        "provider": "chat",
        "model": "gpt",
        "voice": "alloy",
        "instructions": "hi",
        "locale": "en-US",
        "audio": {"input_rate": 48000, "output_rate": 8000},
        "tools": ["a", "b"],
        "metadata": {"k": "v"},
        "resume": {"session_id": "s", "resume_token": "t"},
        "tool_dialect": "json",
        "event_id": "e0",
    }


def test_audio_append_encodes_base64() -> None:
    message = orjson.loads(encode_client_event(AudioAppend(audio=b"\x00\x01")))
    assert message == {"type": "audio.append", "audio": "AAE="}


def test_enum_fields_accept_their_string_values() -> None:
    event = SessionStart(mode="text", provider="openai", tool_dialect="native")  # type: ignore[arg-type]
    assert event.mode is Mode.TEXT
    assert event.provider == "openai"  # a provider is named by a plain string
    assert event.tool_dialect is ToolDialect.NATIVE
    decision = ConfirmationRespond(confirmation_id="c", decision="approve")  # type: ignore[arg-type]
    assert decision.decision is Decision.APPROVE
    assert SessionUpdate(mode="voice").mode is Mode.VOICE  # type: ignore[arg-type]


def test_a_list_of_tools_is_stored_as_a_tuple() -> None:
    event = SessionStart(mode=Mode.VOICE, tools=["a"])  # type: ignore[arg-type]
    assert event.tools == ("a",)


def test_events_are_frozen() -> None:
    event = TextSend(text="hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.text = "bye"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("build", "code", "message"),
    [
        (
            lambda: SessionStart(mode="x"),  # type: ignore[arg-type]
            ErrorCode.INVALID_EVENT,
            "session.start: 'mode' must be 'voice' or 'text'",
        ),
        (
            lambda: AudioFormat(input_rate=44100),
            ErrorCode.INVALID_EVENT,
            "session.start: 'audio.input_rate' must be one of 8000, 16000, 24000, 48000",
        ),
        (
            lambda: Resume(session_id="s", resume_token=""),
            ErrorCode.INVALID_EVENT,
            "session.start: 'resume.resume_token' must be a non-empty string",
        ),
        (
            lambda: AudioAppend(audio=b"\x00", event_id="z"),
            ErrorCode.INVALID_AUDIO,
            "audio.append: PCM16 audio must have an even number of bytes, got 1",
        ),
        (
            lambda: BinaryAudio(pcm=b"\x00\x00\x00"),
            ErrorCode.INVALID_AUDIO,
            "binary frame: PCM16 audio must have an even number of bytes, got 3",
        ),
        (
            lambda: AudioPlayback(response_id="r", played_ms=-5),
            ErrorCode.INVALID_EVENT,
            "audio.playback: 'played_ms' must be an integer >= 0",
        ),
        (
            lambda: TextSend(text="x" * 16001),
            ErrorCode.INVALID_EVENT,
            "text.send: 'text' must be 1 to 16000 characters",
        ),
        (
            lambda: ConfirmationRespond(confirmation_id="c", decision="maybe"),  # type: ignore[arg-type]
            ErrorCode.INVALID_EVENT,
            "confirmation.respond: 'decision' must be 'approve' or 'reject'",
        ),
        (
            lambda: SessionUpdate(),
            ErrorCode.INVALID_EVENT,
            "session.update: 'mode', 'instructions', 'audio.input_rate', 'turn_detection' or "
            "'tool_choice' is required",
        ),
        (
            lambda: Ping(id=[1]),  # type: ignore[arg-type]
            ErrorCode.INVALID_EVENT,
            "ping: 'id' must be a string, number, boolean or null",
        ),
    ],
)
def test_constructors_reject_invalid_values(
    build: Callable[[], object], code: ErrorCode, message: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        build()
    assert caught.value.code is code
    assert caught.value.message == message


def test_constructor_errors_carry_the_event_id() -> None:
    with pytest.raises(ProtocolError) as caught:
        TextSend(text="", event_id="t-1")
    assert caught.value.event_id == "t-1"
