"""Every client event of docs/protocol.md section 5: valid frames, and each invalid field."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from gateway.protocol import (
    AudioAppend,
    AudioClear,
    AudioCommit,
    AudioFormat,
    AudioPlayback,
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
)


def decode(message: dict[str, Any]) -> JsonClientEvent:
    return decode_text(orjson.dumps(message))


# --- valid frames ----------------------------------------------------------------------------


def test_minimal_session_start_gets_the_documented_defaults() -> None:
    event = decode({"type": "session.start", "mode": "voice"})
    assert event == SessionStart(mode=Mode.VOICE)
    assert isinstance(event, SessionStart)
    assert event.audio == AudioFormat(input_rate=16000, output_rate=24000)
    assert event.tools is None  # every tool the user may use
    assert event.metadata == {}
    assert (event.provider, event.model, event.resume, event.tool_dialect) == (None,) * 4


def test_full_session_start() -> None:
    event = decode(
        {
            "type": "session.start",
            "event_id": "s-1",
            "mode": "text",
            "provider": "gemini",
            "model": "m",
            "voice": "v",
            "instructions": "be brief",
            "locale": "de-DE",
            "audio": {"input_rate": 8000, "output_rate": 48000},
            "tools": ["get_weather", "end_call"],
            "metadata": {"tenant": "acme", "channel": "web"},
            "resume": {"session_id": "sess", "resume_token": "tok"},
            "tool_dialect": "inline",
        }
    )
    assert event == SessionStart(
        event_id="s-1",
        mode=Mode.TEXT,
        provider="gemini",
        model="m",
        voice="v",
        instructions="be brief",
        locale="de-DE",
        audio=AudioFormat(input_rate=8000, output_rate=48000),
        tools=("get_weather", "end_call"),
        metadata={"tenant": "acme", "channel": "web"},
        resume=Resume(session_id="sess", resume_token="tok"),
        tool_dialect=ToolDialect.INLINE,
    )


@pytest.mark.parametrize("provider", ["openai", "gemini", "chat", "local"])
def test_every_provider_is_accepted(provider: str) -> None:
    event = decode({"type": "session.start", "mode": "voice", "provider": provider})
    assert isinstance(event, SessionStart)
    assert event.provider == provider


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
def test_every_allowed_rate_is_accepted_and_a_missing_rate_defaults(rate: int) -> None:
    only_input = decode({"type": "session.start", "mode": "voice", "audio": {"input_rate": rate}})
    only_output = decode({"type": "session.start", "mode": "voice", "audio": {"output_rate": rate}})
    assert isinstance(only_input, SessionStart)
    assert isinstance(only_output, SessionStart)
    assert only_input.audio == AudioFormat(input_rate=rate, output_rate=24000)
    assert only_output.audio == AudioFormat(input_rate=16000, output_rate=rate)


def test_null_optional_fields_mean_absent() -> None:
    event = decode(
        {
            "type": "session.start",
            "mode": "voice",
            "provider": None,
            "model": None,
            "audio": None,
            "tools": None,
            "metadata": None,
            "resume": None,
            "tool_dialect": None,
        }
    )
    assert event == SessionStart(mode=Mode.VOICE)


def test_an_empty_tool_list_means_no_tools() -> None:
    event = decode({"type": "session.start", "mode": "voice", "tools": []})
    assert isinstance(event, SessionStart)
    assert event.tools == ()


def test_sixteen_metadata_pairs_are_accepted() -> None:
    metadata = {f"k{i}": "v" for i in range(16)}
    event = decode({"type": "session.start", "mode": "voice", "metadata": metadata})
    assert isinstance(event, SessionStart)
    assert event.metadata == metadata


def test_audio_append_decodes_base64() -> None:
    pcm = bytes(range(256)) * 4
    event = decode({"type": "audio.append", "audio": base64.b64encode(pcm).decode()})
    assert event == AudioAppend(audio=pcm)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"type": "audio.commit"}, AudioCommit()),
        ({"type": "audio.clear", "event_id": "c"}, AudioClear(event_id="c")),
        (
            {"type": "audio.playback", "response_id": "r", "played_ms": 0},
            AudioPlayback(response_id="r", played_ms=0),
        ),
        (
            {"type": "audio.playback", "response_id": "r", "played_ms": 1234},
            AudioPlayback(response_id="r", played_ms=1234),
        ),
        ({"type": "text.send", "text": "h"}, TextSend(text="h")),
        ({"type": "text.send", "text": "é" * 16000}, TextSend(text="é" * 16000)),
        ({"type": "response.cancel"}, ResponseCancel()),
        (
            {"type": "confirmation.respond", "confirmation_id": "c1", "decision": "approve"},
            ConfirmationRespond(confirmation_id="c1", decision=Decision.APPROVE),
        ),
        (
            {
                "type": "confirmation.respond",
                "confirmation_id": "c1",
                "decision": "approve",
                "parameters": {"amount": 5, "to": ["a"]},
            },
            ConfirmationRespond(
                confirmation_id="c1",
                decision=Decision.APPROVE,
                parameters={"amount": 5, "to": ["a"]},
            ),
        ),
        (
            {"type": "confirmation.respond", "confirmation_id": "c1", "decision": "reject"},
            ConfirmationRespond(confirmation_id="c1", decision=Decision.REJECT),
        ),
        ({"type": "session.update", "mode": "text"}, SessionUpdate(mode=Mode.TEXT)),
        ({"type": "session.update", "instructions": ""}, SessionUpdate(instructions="")),
        (
            {"type": "session.update", "mode": "voice", "instructions": "x"},
            SessionUpdate(mode=Mode.VOICE, instructions="x"),
        ),
        (
            {"type": "session.update", "audio": {"input_rate": 24000}},
            SessionUpdate(input_rate=24000),
        ),
        ({"type": "session.end"}, SessionEnd()),
        ({"type": "session.end", "reason": "bye"}, SessionEnd(reason="bye")),
        ({"type": "ping"}, Ping()),
    ],
)
def test_valid_events(message: dict[str, Any], expected: JsonClientEvent) -> None:
    assert decode(message) == expected


@pytest.mark.parametrize("ping_id", ["abc", "", 0, -3, 2.5, True, False, None])
def test_ping_keeps_any_json_scalar_id(ping_id: object) -> None:
    event = decode({"type": "ping", "id": ping_id})
    assert isinstance(event, Ping)
    assert event.id == ping_id
    assert type(event.id) is type(ping_id)


def test_enum_fields_hold_enum_members() -> None:
    event = decode({"type": "session.start", "mode": "voice", "provider": "local"})
    assert isinstance(event, SessionStart)
    assert event.mode is Mode.VOICE
    assert event.provider == "local"


# --- invalid fields --------------------------------------------------------------------------

START = {"type": "session.start", "mode": "voice"}
CONFIRM = {"type": "confirmation.respond", "confirmation_id": "c1", "decision": "approve"}
PLAYBACK = {"type": "audio.playback", "response_id": "r", "played_ms": 10}

INVALID_EVENTS: list[tuple[dict[str, Any], str]] = [
    # session.start
    ({"type": "session.start"}, "session.start: 'mode' is required"),
    ({**START, "mode": "video"}, "session.start: 'mode' must be 'voice' or 'text'"),
    ({**START, "mode": 1}, "session.start: 'mode' must be 'voice' or 'text'"),
    ({**START, "mode": "VOICE"}, "session.start: 'mode' must be 'voice' or 'text'"),
    (
        {**START, "provider": "anthropic"},
        "session.start: 'provider' must be 'openai', 'gemini', 'chat' or 'local'",
    ),
    ({**START, "model": 4}, "session.start: 'model' must be a string"),
    ({**START, "voice": ["alloy"]}, "session.start: 'voice' must be a string"),
    ({**START, "instructions": {}}, "session.start: 'instructions' must be a string"),
    ({**START, "locale": False}, "session.start: 'locale' must be a string"),
    ({**START, "audio": 16000}, "session.start: 'audio' must be an object"),
    ({**START, "audio": [16000]}, "session.start: 'audio' must be an object"),
    (
        {**START, "audio": {"input_rate": 44100}},
        "session.start: 'audio.input_rate' must be one of 8000, 16000, 24000, 48000",
    ),
    (
        {**START, "audio": {"output_rate": "24000"}},
        "session.start: 'audio.output_rate' must be one of 8000, 16000, 24000, 48000",
    ),
    (
        {**START, "audio": {"input_rate": 16000.0}},
        "session.start: 'audio.input_rate' must be one of 8000, 16000, 24000, 48000",
    ),
    (
        {**START, "audio": {"input_rate": True}},
        "session.start: 'audio.input_rate' must be one of 8000, 16000, 24000, 48000",
    ),
    ({**START, "tools": "get_weather"}, "session.start: 'tools' must be a list"),
    ({**START, "tools": ["a", 3]}, "session.start: 'tools[1]' must be a non-empty string"),
    ({**START, "tools": [""]}, "session.start: 'tools[0]' must be a non-empty string"),
    ({**START, "metadata": ["a"]}, "session.start: 'metadata' must be an object"),
    ({**START, "metadata": "a=b"}, "session.start: 'metadata' must be an object"),
    ({**START, "metadata": {"a": 1}}, "session.start: 'metadata' must map strings to strings"),
    ({**START, "metadata": {"a": None}}, "session.start: 'metadata' must map strings to strings"),
    (
        {**START, "metadata": {f"k{i}": "v" for i in range(17)}},
        "session.start: 'metadata' must have at most 16 entries",
    ),
    ({**START, "resume": "sess"}, "session.start: 'resume' must be an object"),
    ({**START, "resume": {}}, "session.start: 'resume.session_id' is required"),
    (
        {**START, "resume": {"session_id": "s"}},
        "session.start: 'resume.resume_token' is required",
    ),
    (
        {**START, "resume": {"session_id": 5, "resume_token": "t"}},
        "session.start: 'resume.session_id' must be a string",
    ),
    (
        {**START, "resume": {"session_id": "", "resume_token": "t"}},
        "session.start: 'resume.session_id' must be a non-empty string",
    ),
    (
        {**START, "tool_dialect": "xml"},
        "session.start: 'tool_dialect' must be 'native', 'inline' or 'json'",
    ),
    # audio.append
    ({"type": "audio.append"}, "audio.append: 'audio' is required"),
    ({"type": "audio.append", "audio": 5}, "audio.append: 'audio' must be a string"),
    ({"type": "audio.append", "audio": "AAA"}, "audio.append: 'audio' must be standard base64"),
    ({"type": "audio.append", "audio": "AA AA"}, "audio.append: 'audio' must be standard base64"),
    ({"type": "audio.append", "audio": "AA-_"}, "audio.append: 'audio' must be standard base64"),
    ({"type": "audio.append", "audio": "ÄÄÄÄ"}, "audio.append: 'audio' must be standard base64"),
    # audio.playback
    ({"type": "audio.playback", "played_ms": 1}, "audio.playback: 'response_id' is required"),
    (
        {**PLAYBACK, "response_id": ""},
        "audio.playback: 'response_id' must be a non-empty string",
    ),
    ({**PLAYBACK, "response_id": 1}, "audio.playback: 'response_id' must be a string"),
    ({"type": "audio.playback", "response_id": "r"}, "audio.playback: 'played_ms' is required"),
    ({**PLAYBACK, "played_ms": -1}, "audio.playback: 'played_ms' must be an integer >= 0"),
    ({**PLAYBACK, "played_ms": 1.5}, "audio.playback: 'played_ms' must be an integer >= 0"),
    ({**PLAYBACK, "played_ms": "10"}, "audio.playback: 'played_ms' must be an integer >= 0"),
    ({**PLAYBACK, "played_ms": True}, "audio.playback: 'played_ms' must be an integer >= 0"),
    # text.send
    ({"type": "text.send"}, "text.send: 'text' is required"),
    ({"type": "text.send", "text": 42}, "text.send: 'text' must be a string"),
    ({"type": "text.send", "text": ""}, "text.send: 'text' must be 1 to 16000 characters"),
    (
        {"type": "text.send", "text": "x" * 16001},
        "text.send: 'text' must be 1 to 16000 characters",
    ),
    # confirmation.respond
    (
        {"type": "confirmation.respond", "decision": "approve"},
        "confirmation.respond: 'confirmation_id' is required",
    ),
    (
        {**CONFIRM, "confirmation_id": ""},
        "confirmation.respond: 'confirmation_id' must be a non-empty string",
    ),
    (
        {"type": "confirmation.respond", "confirmation_id": "c1"},
        "confirmation.respond: 'decision' is required",
    ),
    (
        {**CONFIRM, "decision": "approved"},
        "confirmation.respond: 'decision' must be 'approve' or 'reject'",
    ),
    (
        {**CONFIRM, "decision": True},
        "confirmation.respond: 'decision' must be 'approve' or 'reject'",
    ),
    ({**CONFIRM, "parameters": [1]}, "confirmation.respond: 'parameters' must be an object"),
    ({**CONFIRM, "parameters": "{}"}, "confirmation.respond: 'parameters' must be an object"),
    # session.update
    (
        {"type": "session.update", "audio": {"input_rate": 44100}},
        "session.update: 'audio.input_rate' must be one of 8000, 16000, 24000, 48000",
    ),
    (
        {"type": "session.update", "audio": {"input_rate": True}},
        "session.update: 'audio.input_rate' must be one of 8000, 16000, 24000, 48000",
    ),
    (
        {"type": "session.update", "audio": {}},
        "session.update: 'mode', 'instructions', 'audio.input_rate', 'turn_detection' or "
        "'tool_choice' is required",
    ),
    (
        {"type": "session.update"},
        "session.update: 'mode', 'instructions', 'audio.input_rate', 'turn_detection' or "
        "'tool_choice' is required",
    ),
    (
        {"type": "session.update", "mode": None, "instructions": None},
        "session.update: 'mode', 'instructions', 'audio.input_rate', 'turn_detection' or "
        "'tool_choice' is required",
    ),
    (
        {"type": "session.update", "mode": "chat"},
        "session.update: 'mode' must be 'voice' or 'text'",
    ),
    (
        {"type": "session.update", "instructions": 1},
        "session.update: 'instructions' must be a string",
    ),
    # session.end
    ({"type": "session.end", "reason": 1}, "session.end: 'reason' must be a string"),
    # ping
    ({"type": "ping", "id": [1]}, "ping: 'id' must be a string, number, boolean or null"),
    ({"type": "ping", "id": {"a": 1}}, "ping: 'id' must be a string, number, boolean or null"),
]


@pytest.mark.parametrize(("message", "expected_message"), INVALID_EVENTS)
def test_invalid_fields_are_invalid_event_naming_the_field(
    message: dict[str, Any], expected_message: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode({**message, "event_id": "bad-1"})
    assert caught.value.code is ErrorCode.INVALID_EVENT
    assert caught.value.message == expected_message
    assert caught.value.event_id == "bad-1"
    assert (caught.value.retryable, caught.value.fatal) == (False, False)


@pytest.mark.parametrize(("message", "expected_message"), INVALID_EVENTS[:3])
def test_invalid_event_without_event_id_has_none(
    message: dict[str, Any], expected_message: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode(message)
    assert caught.value.message == expected_message
    assert caught.value.event_id is None


@pytest.mark.parametrize(
    ("pcm", "problem"),
    [(b"\x01\x02\x03", "even number of bytes, got 3"), (b"", "no samples")],
)
def test_audio_append_of_partial_samples_is_invalid_audio(pcm: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode({"type": "audio.append", "audio": base64.b64encode(pcm).decode(), "event_id": "a"})
    assert caught.value.code is ErrorCode.INVALID_AUDIO
    assert problem in caught.value.message
    assert caught.value.event_id == "a"
