"""Every client mistake is refused with OpenAI's error: code, message, ``param``, and the
client's ``event_id`` echoed; the ``error`` event built from it is one the SDK parses."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from compat_kit import b64, sdk_parse, translator

from gateway.edges.realtime.client_wire import UnknownEvent, decode_client_event
from gateway.edges.realtime.errors import CompatError


def refusal(event: dict[str, Any]) -> CompatError:
    with pytest.raises(CompatError) as caught:
        decode_client_event(orjson.dumps({**event, "event_id": "evt_c1"}))
    return caught.value


def session(**fields: Any) -> dict[str, Any]:
    return {"type": "session.update", "session": {"type": "realtime", **fields}}


def item(**fields: Any) -> dict[str, Any]:
    return {"type": "conversation.item.create", "item": fields}


def user_text(**part: Any) -> dict[str, Any]:
    return item(type="message", role="user", content=[part])


def response(**fields: Any) -> dict[str, Any]:
    return {"type": "response.create", "response": fields}


def audio_in(**fields: Any) -> dict[str, Any]:
    return session(audio={"input": fields})


VAD = "session.audio.input.turn_detection"
CASES: list[tuple[str, dict[str, Any], str, str | None]] = [
    # (name, event, code, param)
    ("type not a string", {"type": 5}, "invalid_type", "type"),
    ("no session", {"type": "session.update"}, "missing_required_parameter", "session"),
    (
        "session not an object",
        {"type": "session.update", "session": "realtime"},
        "invalid_type",
        "session",
    ),
    (
        "no session type",
        {"type": "session.update", "session": {"instructions": "x"}},
        "missing_required_parameter",
        "session.type",
    ),
    ("transcription session", session(type="transcription"), "invalid_value", "session.type"),
    ("beta modalities", session(modalities=["audio"]), "unknown_parameter", "session.modalities"),
    ("beta temperature", session(temperature=0.8), "unknown_parameter", "session.temperature"),
    ("instructions type", session(instructions=5), "invalid_type", "session.instructions"),
    (
        "two modalities",
        session(output_modalities=["audio", "text"]),
        "invalid_value",
        "session.output_modalities",
    ),
    (
        "modality not a list",
        session(output_modalities="audio"),
        "invalid_type",
        "session.output_modalities",
    ),
    (
        "pcmu input",
        audio_in(format={"type": "audio/pcmu"}),
        "invalid_value",
        "session.audio.input.format.type",
    ),
    (
        "16 kHz input",
        audio_in(format={"type": "audio/pcm", "rate": 16000}),
        "invalid_value",
        "session.audio.input.format.rate",
    ),
    (
        "format without a type",
        audio_in(format={"rate": 24000}),
        "missing_required_parameter",
        "session.audio.input.format.type",
    ),
    (
        "pcma output",
        session(audio={"output": {"format": {"type": "audio/pcma"}}}),
        "invalid_value",
        "session.audio.output.format.type",
    ),
    (
        "voice type",
        session(audio={"output": {"voice": 5}}),
        "invalid_type",
        "session.audio.output.voice",
    ),
    (
        "unknown audio key",
        session(audio={"input": {"rate": 24000}}),
        "unknown_parameter",
        "session.audio.input.rate",
    ),
    ("vad type", audio_in(turn_detection={"type": "none"}), "invalid_value", f"{VAD}.type"),
    (
        "vad without type",
        audio_in(turn_detection={"threshold": 0.5}),
        "missing_required_parameter",
        f"{VAD}.type",
    ),
    (
        "vad silence type",
        audio_in(turn_detection={"type": "server_vad", "silence_duration_ms": "500"}),
        "invalid_type",
        f"{VAD}.silence_duration_ms",
    ),
    (
        "vad threshold range",
        audio_in(turn_detection={"type": "server_vad", "threshold": 2}),
        "invalid_value",
        f"{VAD}.threshold",
    ),
    (
        "vad eagerness",
        audio_in(turn_detection={"type": "semantic_vad", "eagerness": "eager"}),
        "invalid_value",
        f"{VAD}.eagerness",
    ),
    (
        "transcription type",
        audio_in(transcription="whisper-1"),
        "invalid_type",
        "session.audio.input.transcription",
    ),
    ("tools type", session(tools={"name": "x"}), "invalid_type", "session.tools"),
    (
        "chat completions tool form",
        session(tools=[{"type": "function", "function": {"name": "x"}}]),
        "unknown_parameter",
        "session.tools[0].function",
    ),
    (
        "mcp tool",
        session(tools=[{"type": "mcp", "server_label": "x"}]),
        "invalid_value",
        "session.tools[0].type",
    ),
    (
        "tool without a name",
        session(tools=[{"type": "function", "description": "x"}]),
        "missing_required_parameter",
        "session.tools[0].name",
    ),
    ("tool choice", session(tool_choice="sometimes"), "invalid_value", "session.tool_choice"),
    (
        "forced tool without a name",
        session(tool_choice={"type": "function"}),
        "missing_required_parameter",
        "session.tool_choice.name",
    ),
    (
        "append without audio",
        {"type": "input_audio_buffer.append"},
        "missing_required_parameter",
        "audio",
    ),
    (
        "append audio type",
        {"type": "input_audio_buffer.append", "audio": 5},
        "invalid_type",
        "audio",
    ),
    (
        "append bad base64",
        {"type": "input_audio_buffer.append", "audio": "not base64!"},
        "invalid_value",
        "audio",
    ),
    (
        "append half a sample",
        {"type": "input_audio_buffer.append", "audio": "AAAA"},  # 3 bytes (the SDK capture's)
        "invalid_value",
        "audio",
    ),
    ("no item", {"type": "conversation.item.create"}, "missing_required_parameter", "item"),
    ("item without type", item(role="user"), "missing_required_parameter", "item.type"),
    (
        "function_call item",
        item(type="function_call", name="f", call_id="c", arguments="{}"),
        "invalid_value",
        "item.type",
    ),
    (
        "assistant message",
        item(type="message", role="assistant", content=[]),
        "invalid_value",
        "item.role",
    ),
    (
        "message without role",
        item(type="message", content=[]),
        "missing_required_parameter",
        "item.role",
    ),
    (
        "message without content",
        item(type="message", role="user"),
        "missing_required_parameter",
        "item.content",
    ),
    (
        "image part",
        user_text(type="input_image", image_url="data:image/png;base64,AA=="),
        "invalid_value",
        "item.content[0].type",
    ),
    (
        "text part without text",
        user_text(type="input_text"),
        "missing_required_parameter",
        "item.content[0].text",
    ),
    (
        "audio part bad base64",
        user_text(type="input_audio", audio="%%%"),
        "invalid_value",
        "item.content[0].audio",
    ),
    (
        "system audio part",
        item(
            type="message", role="system", content=[{"type": "input_audio", "audio": b64(b"\0\0")}]
        ),
        "invalid_value",
        "item.content[0].type",
    ),
    (
        "output not a string",
        item(type="function_call_output", call_id="call_1", output={"temp": 21}),
        "invalid_type",
        "item.output",
    ),
    (
        "output missing",
        item(type="function_call_output", call_id="call_1"),
        "missing_required_parameter",
        "item.output",
    ),
    (
        "call id pattern",
        item(type="function_call_output", call_id="call 1!", output=""),
        "invalid_value",
        "item.call_id",
    ),
    (
        "previous item id type",
        {**user_text(type="input_text", text="hi"), "previous_item_id": 3},
        "invalid_type",
        "previous_item_id",
    ),
    (
        "delete without id",
        {"type": "conversation.item.delete"},
        "missing_required_parameter",
        "item_id",
    ),
    (
        "retrieve id type",
        {"type": "conversation.item.retrieve", "item_id": 5},
        "invalid_type",
        "item_id",
    ),
    (
        "truncate negative",
        {
            "type": "conversation.item.truncate",
            "item_id": "i",
            "content_index": 0,
            "audio_end_ms": -1,
        },
        "invalid_value",
        "audio_end_ms",
    ),
    (
        "truncate index type",
        {
            "type": "conversation.item.truncate",
            "item_id": "i",
            "content_index": "0",
            "audio_end_ms": 5,
        },
        "invalid_type",
        "content_index",
    ),
    (
        "truncate without end",
        {"type": "conversation.item.truncate", "item_id": "i", "content_index": 0},
        "missing_required_parameter",
        "audio_end_ms",
    ),
    (
        "response not an object",
        {"type": "response.create", "response": []},
        "invalid_type",
        "response",
    ),
    ("response temperature", response(temperature=1), "unknown_parameter", "response.temperature"),
    (
        "response modalities",
        response(output_modalities=["text", "audio"]),
        "invalid_value",
        "response.output_modalities",
    ),
    (
        "response conversation",
        response(conversation="conv_9"),
        "invalid_value",
        "response.conversation",
    ),
    (
        "metadata pairs",
        response(metadata={f"k{i}": "v" for i in range(17)}),
        "invalid_value",
        "response.metadata",
    ),
    ("metadata value", response(metadata={"k": 1}), "invalid_type", "response.metadata.k"),
    (
        "cancel id type",
        {"type": "response.cancel", "response_id": 5},
        "invalid_type",
        "response_id",
    ),
]


@pytest.mark.parametrize(
    ("event", "code", "param"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_bad_field_is_refused_naming_it(
    event: dict[str, Any], code: str, param: str | None
) -> None:
    error = refusal(event)
    assert (error.code, error.param, error.event_id) == (code, param, "evt_c1")
    assert error.type == "invalid_request_error"
    assert error.message


def test_openai_messages_are_worded_as_the_api_words_them() -> None:
    assert refusal(session(temperature=1)).message == "Unknown parameter: 'session.temperature'."
    assert refusal({"type": "session.update", "session": {}}).message == (
        "Missing required parameter: 'session.type'."
    )
    assert refusal(session(instructions=5)).message == (
        "Invalid type for 'session.instructions': expected a string, but got an integer instead."
    )
    assert refusal(session(tool_choice="x")).message == (
        "Invalid value: 'x'. Supported values are: 'auto', 'none', and 'required'."
    )
    assert refusal(session(output_modalities=["audio", "text"])).message == (
        "Invalid value: ['audio', 'text']. Supported values are: ['audio'] and ['text']."
    )


@pytest.mark.parametrize(
    ("frame", "code"),
    [(b"{not json", "invalid_json"), (b"[1, 2]", "invalid_type"), (b'"hello"', "invalid_type")],
)
def test_a_frame_that_is_not_a_json_object_is_refused(frame: bytes, code: str) -> None:
    with pytest.raises(CompatError) as caught:
        decode_client_event(frame)
    assert (caught.value.code, caught.value.param, caught.value.event_id) == (code, None, None)


def test_a_missing_type_is_refused_with_the_event_id() -> None:
    with pytest.raises(CompatError) as caught:
        decode_client_event(b'{"event_id": "evt_c2"}')
    error = caught.value
    assert (error.code, error.param, error.event_id) == (
        "missing_required_parameter",
        "type",
        "evt_c2",
    )
    assert error.message == "Missing required parameter: 'type'."


def test_a_non_string_event_id_is_not_echoed() -> None:
    with pytest.raises(CompatError) as caught:
        decode_client_event(b'{"type": "session.update", "event_id": 7}')
    assert caught.value.event_id is None


def test_an_unknown_type_is_answered_as_openai_answers_it() -> None:
    event = decode_client_event(b'{"type": "session.teleport", "event_id": "evt_c3"}')
    assert isinstance(event, UnknownEvent)
    error = event.error()
    assert (error.code, error.param, error.event_id) == ("invalid_value", "type", "evt_c3")
    assert error.message.startswith("Invalid value: 'session.teleport'. Supported values are: ")
    assert "'session.update'" in error.message
    assert "'response.cancel'" in error.message


def test_output_audio_buffer_clear_is_for_webrtc_only() -> None:
    event = decode_client_event(b'{"type": "output_audio_buffer.clear"}')
    assert isinstance(event, UnknownEvent)
    assert event.error().message == (
        "output_audio_buffer.clear is only supported for WebRTC and SIP sessions."
    )


def test_the_error_event_has_openais_shape_and_the_sdk_parses_it() -> None:
    error = refusal(session(temperature=1))
    event = translator().error_event(error)
    assert event == {
        "type": "error",
        "event_id": event["event_id"],
        "error": {
            "type": "invalid_request_error",
            "code": "unknown_parameter",
            "message": "Unknown parameter: 'session.temperature'.",
            "param": "session.temperature",
            "event_id": "evt_c1",
        },
    }
    assert event["event_id"].startswith("event_")
    sdk_parse(event)
