"""Property tests: decoding any input yields an event or a ProtocolError, never anything else."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.protocol import (
    BinaryAudio,
    ErrorCode,
    ProtocolError,
    decode_binary,
    decode_text,
    encode_client_event,
)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# The only codes a frame alone can cause; the others need session state.
DECODE_ERROR_CODES = {
    ErrorCode.PAYLOAD_TOO_LARGE,
    ErrorCode.INVALID_JSON,
    ErrorCode.INVALID_EVENT,
    ErrorCode.UNKNOWN_EVENT,
    ErrorCode.INVALID_AUDIO,
}

CLIENT_TYPES = [
    "session.start",
    "audio.append",
    "audio.commit",
    "audio.clear",
    "audio.playback",
    "text.send",
    "response.cancel",
    "confirmation.respond",
    "session.update",
    "session.end",
    "ping",
]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: the parser must refuse them politely
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

# Values that are often right, so that fuzzing reaches the deeper checks too.
plausible_values: dict[str, st.SearchStrategy[Any]] = {
    "mode": st.sampled_from(["voice", "text", "chat"]),
    "provider": st.sampled_from(["openai", "gemini", "chat", "local", "x"]),
    "decision": st.sampled_from(["approve", "reject", "approved"]),
    "tool_dialect": st.sampled_from(["native", "inline", "json", "yaml"]),
    "audio": st.one_of(
        st.builds(base64.b64encode, st.binary(max_size=16)).map(bytes.decode),
        st.fixed_dictionaries(
            {},
            optional={
                "input_rate": st.sampled_from([8000, 16000, 24000, 48000, 44100, True, "8000"]),
                "output_rate": st.sampled_from([8000, 16000, 24000, 48000, 0, None]),
            },
        ),
    ),
    "resume": st.fixed_dictionaries(
        {}, optional={"session_id": st.text(max_size=4), "resume_token": json_scalars}
    ),
    "tools": st.lists(st.text(max_size=6), max_size=3),
    "metadata": st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=18),
    "played_ms": st.integers(min_value=-2, max_value=10**6),
    "text": st.text(max_size=20),
    "parameters": st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    "event_id": st.text(max_size=6),
}
FIELD_NAMES = [
    *plausible_values,
    "model",
    "voice",
    "instructions",
    "locale",
    "response_id",
    "confirmation_id",
    "reason",
    "id",
]


@st.composite
def event_like_objects(draw: st.DrawFn) -> dict[str, Any]:
    """JSON objects shaped like client events, with right and wrong field values."""
    message: dict[str, Any] = {
        "type": draw(st.sampled_from(CLIENT_TYPES) | st.text(max_size=10) | json_scalars)
    }
    for name in draw(st.lists(st.sampled_from(FIELD_NAMES), max_size=6, unique=True)):
        right = plausible_values.get(name, st.text(max_size=6))
        message[name] = draw(right | json_values)
    return message


def decode_or_error(frame: str | bytes, **limits: int) -> object:
    """The event, or the ProtocolError after checking it is well formed."""
    try:
        return decode_text(frame, **limits)
    except ProtocolError as caught:
        error = caught
    assert error.code in DECODE_ERROR_CODES
    assert isinstance(error.message, str)
    assert error.message
    assert error.event_id is None or isinstance(error.event_id, str)
    return error


@FUZZ
@given(st.text())
def test_any_text_decodes_or_raises_protocol_error(frame: str) -> None:
    decode_or_error(frame)


@FUZZ
@given(st.binary())
def test_any_bytes_decode_or_raise_protocol_error(frame: bytes) -> None:
    decode_or_error(frame)


@FUZZ
@given(json_values)
def test_any_json_value_decodes_or_raises_protocol_error(value: Any) -> None:
    decode_or_error(json.dumps(value))


@FUZZ
@given(event_like_objects(), st.booleans())
def test_event_like_objects_decode_to_their_type_or_echo_the_event_id(
    message: dict[str, Any], as_bytes: bool
) -> None:
    frame = json.dumps(message)
    result = decode_or_error(frame.encode() if as_bytes else frame)
    if isinstance(result, ProtocolError):
        event_id = message.get("event_id")
        if isinstance(event_id, str) and result.code is not ErrorCode.INVALID_JSON:
            assert result.event_id == event_id
        return
    assert getattr(result, "TYPE", None) == message["type"]
    # Whatever decodes re-encodes to the same event.
    assert decode_text(encode_client_event(result)) == result  # type: ignore[arg-type]


@FUZZ
@given(event_like_objects(), st.integers(min_value=0, max_value=300))
def test_any_size_limit_gives_an_event_or_payload_too_large(
    message: dict[str, Any], max_bytes: int
) -> None:
    frame = json.dumps(message, ensure_ascii=False)
    result = decode_or_error(frame, max_bytes=max_bytes)
    too_large = len(frame.encode("utf-8", "surrogatepass")) > max_bytes
    assert too_large == (
        isinstance(result, ProtocolError) and result.code is ErrorCode.PAYLOAD_TOO_LARGE
    )


@FUZZ
@given(st.binary(max_size=600), st.integers(min_value=0, max_value=512))
def test_any_binary_frame_is_whole_samples_or_a_protocol_error(
    frame: bytes, max_bytes: int
) -> None:
    if len(frame) > max_bytes:
        expected_error: ErrorCode | None = ErrorCode.PAYLOAD_TOO_LARGE
    elif not frame or len(frame) % 2:
        expected_error = ErrorCode.INVALID_AUDIO
    else:
        expected_error = None
    try:
        event = decode_binary(frame, max_bytes=max_bytes)
    except ProtocolError as caught:
        error_code: ErrorCode | None = caught.code
    else:
        error_code = None
    assert error_code is expected_error
    if error_code is not None:
        return
    assert event == BinaryAudio(pcm=frame)
    assert len(event.pcm) % 2 == 0
    assert 0 < len(event.pcm) <= max_bytes
