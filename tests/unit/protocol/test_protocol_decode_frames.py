"""decode_text's gates before the fields: size, JSON, shape, type, event_id; decode_binary."""

from __future__ import annotations

import pytest

from gateway.protocol import (
    DEFAULT_MAX_BINARY_FRAME_BYTES,
    DEFAULT_MAX_TEXT_FRAME_BYTES,
    AudioCommit,
    BinaryAudio,
    ErrorCode,
    Ping,
    ProtocolError,
    decode_binary,
    decode_text,
)


def decode_error(frame: str | bytes, **limits: int) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        decode_text(frame, **limits)
    return caught.value


def test_defaults_are_the_documented_limits() -> None:
    assert DEFAULT_MAX_TEXT_FRAME_BYTES == 256 * 1024
    assert DEFAULT_MAX_BINARY_FRAME_BYTES == 64 * 1024


@pytest.mark.parametrize("as_bytes", [False, True])
def test_accepts_str_and_utf8_bytes(as_bytes: bool) -> None:
    frame = '{"type":"ping","id":"ü"}'
    assert decode_text(frame.encode() if as_bytes else frame) == Ping(id="ü")


# --- size ------------------------------------------------------------------------------------


def padded_ping(size: int) -> str:
    head = '{"type":"ping","id":"'
    return head + "x" * (size - len(head) - 2) + '"}'


def test_a_frame_of_exactly_the_limit_is_accepted() -> None:
    frame = padded_ping(1000)
    assert len(frame) == 1000
    assert isinstance(decode_text(frame, max_bytes=1000), Ping)


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_frame_over_the_limit_is_payload_too_large(as_bytes: bool) -> None:
    frame = padded_ping(1001)
    error = decode_error(frame.encode() if as_bytes else frame, max_bytes=1000)
    assert error.code is ErrorCode.PAYLOAD_TOO_LARGE
    assert "1001" in error.message
    assert error.event_id is None


def test_the_size_of_a_str_frame_is_counted_in_utf8_bytes() -> None:
    frame = '{"type":"ping","id":"' + "é" * 10 + '"}'
    assert (len(frame), len(frame.encode())) == (33, 43)
    assert isinstance(decode_text(frame, max_bytes=43), Ping)
    assert decode_error(frame, max_bytes=42).code is ErrorCode.PAYLOAD_TOO_LARGE


def test_the_default_text_limit_is_256_kib() -> None:
    assert isinstance(decode_text(padded_ping(256 * 1024)), Ping)
    assert decode_error(padded_ping(256 * 1024 + 1)).code is ErrorCode.PAYLOAD_TOO_LARGE


def test_size_is_checked_before_json() -> None:
    assert decode_error("x" * 11, max_bytes=10).code is ErrorCode.PAYLOAD_TOO_LARGE


# --- JSON ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        "",
        " ",
        "{",
        "{'type': 'ping'}",
        "nul",
        '{"type":"ping",}',
        b"\xff\xfe",
        "\ud800",
        "[" * 2000,
    ],
)
def test_unparseable_frames_are_invalid_json(frame: str | bytes) -> None:
    error = decode_error(frame)
    assert error.code is ErrorCode.INVALID_JSON
    assert error.event_id is None


# --- shape and type --------------------------------------------------------------------------


@pytest.mark.parametrize("frame", ["[]", "1", '"ping"', "null", "true", '[{"type":"ping"}]'])
def test_a_frame_that_is_not_an_object_is_invalid_event(frame: str) -> None:
    error = decode_error(frame)
    assert error.code is ErrorCode.INVALID_EVENT
    assert "object" in error.message


@pytest.mark.parametrize(
    "frame",
    ['{"event_id":"e-1"}', '{"type":null,"event_id":"e-1"}', '{"type":7,"event_id":"e-1"}'],
)
def test_an_object_without_a_string_type_is_invalid_event_with_its_event_id(frame: str) -> None:
    error = decode_error(frame)
    assert error.code is ErrorCode.INVALID_EVENT
    assert "'type'" in error.message
    assert error.event_id == "e-1"


def test_an_unknown_type_is_unknown_event_with_its_event_id() -> None:
    error = decode_error('{"type":"session.begin","event_id":"e-2"}')
    assert error.code is ErrorCode.UNKNOWN_EVENT
    assert "session.begin" in error.message
    assert error.event_id == "e-2"
    assert not error.fatal


def test_an_unknown_type_with_a_non_string_event_id_is_still_unknown_event() -> None:
    error = decode_error('{"type":"nope","event_id":5}')
    assert error.code is ErrorCode.UNKNOWN_EVENT
    assert error.event_id is None


def test_a_long_unknown_type_is_clipped_in_the_message() -> None:
    error = decode_error('{"type":"' + "z" * 10_000 + '"}')
    assert error.code is ErrorCode.UNKNOWN_EVENT
    assert len(error.message) < 200


def test_types_are_case_sensitive() -> None:
    assert decode_error('{"type":"PING"}').code is ErrorCode.UNKNOWN_EVENT


# --- event_id --------------------------------------------------------------------------------


@pytest.mark.parametrize("event_id", ["5", "true", "[]", "{}", "1.5"])
def test_a_non_string_event_id_on_a_known_type_is_invalid_event(event_id: str) -> None:
    error = decode_error('{"type":"audio.commit","event_id":' + event_id + "}")
    assert error.code is ErrorCode.INVALID_EVENT
    assert error.message == "audio.commit: 'event_id' must be a string"
    assert error.event_id is None


def test_a_null_event_id_means_none() -> None:
    assert decode_text('{"type":"audio.commit","event_id":null}') == AudioCommit()


def test_the_event_id_is_kept_on_the_event() -> None:
    assert decode_text('{"type":"audio.commit","event_id":"c-1"}') == AudioCommit(event_id="c-1")


def test_unknown_fields_are_ignored() -> None:
    frame = '{"type":"audio.commit","event_id":"c","future":{"x":[1,2]},"v":2}'
    assert decode_text(frame) == AudioCommit(event_id="c")


def test_the_last_duplicate_key_wins_as_in_json_parse() -> None:
    assert decode_text('{"type":"ping","id":1,"id":2}') == Ping(id=2)


# --- binary frames ---------------------------------------------------------------------------


def test_a_binary_frame_of_whole_samples_is_audio() -> None:
    assert decode_binary(b"\x01\x00\xff\x7f") == BinaryAudio(pcm=b"\x01\x00\xff\x7f")


def test_an_odd_length_binary_frame_is_invalid_audio() -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_binary(b"\x00\x01\x02")
    assert caught.value.code is ErrorCode.INVALID_AUDIO
    assert "even" in caught.value.message


def test_an_empty_binary_frame_is_invalid_audio() -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_binary(b"")
    assert caught.value.code is ErrorCode.INVALID_AUDIO


def test_binary_limit_is_inclusive_and_configurable() -> None:
    assert len(decode_binary(b"\x00" * 64 * 1024).pcm) == 64 * 1024
    with pytest.raises(ProtocolError) as caught:
        decode_binary(b"\x00" * (64 * 1024 + 2))
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE
    assert len(decode_binary(b"\x00" * 200, max_bytes=200).pcm) == 200
    with pytest.raises(ProtocolError) as caught:
        decode_binary(b"\x00" * 202, max_bytes=200)
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE


def test_binary_size_is_checked_before_sample_alignment() -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_binary(b"\x00" * 11, max_bytes=10)
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE
