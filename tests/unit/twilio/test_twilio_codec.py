"""Twilio Media Streams messages: every inbound event, malformed frames named by field, outbound."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.edges.twilio import codec
from gateway.edges.twilio.codec import (
    Connected,
    Dtmf,
    Mark,
    Media,
    MediaFormat,
    Start,
    Stop,
    TwilioFormatError,
    UnknownTwilio,
)

STREAM = "MZ18ad3ab5a668481ce02b83e7395059f0"
CALL = "CA0123456789abcdef0123456789abcdef"
ACCOUNT = "AC0123456789abcdef0123456789abcdef"
AUDIO = bytes(range(256)) * 2 + b"\xff" * 8

CONNECTED = {"event": "connected", "protocol": "Call", "version": "1.0.0"}
START = {
    "event": "start",
    "sequenceNumber": "1",
    "start": {
        "accountSid": ACCOUNT,
        "streamSid": STREAM,
        "callSid": CALL,
        "tracks": ["inbound"],
        "customParameters": {"token": "t0k3n"},
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
    },
    "streamSid": STREAM,
}
MEDIA = {
    "event": "media",
    "sequenceNumber": "3",
    "media": {
        "track": "inbound",
        "chunk": "1",
        "timestamp": "5",
        "payload": base64.b64encode(AUDIO).decode(),
    },
    "streamSid": STREAM,
}
MARK = {"event": "mark", "sequenceNumber": "4", "streamSid": STREAM, "mark": {"name": "r1:100:0"}}
DTMF = {
    "event": "dtmf",
    "streamSid": STREAM,
    "sequenceNumber": "5",
    "dtmf": {"track": "inbound_track", "digit": "1"},
}
STOP = {
    "event": "stop",
    "sequenceNumber": "6",
    "streamSid": STREAM,
    "stop": {"accountSid": ACCOUNT, "callSid": CALL},
}


def text(message: Any) -> str:
    return json.dumps(message)


def without(message: dict[str, Any], *path: str) -> dict[str, Any]:
    copy: dict[str, Any] = orjson.loads(orjson.dumps(message))
    inner = copy
    for key in path[:-1]:
        inner = inner[key]
    del inner[path[-1]]
    return copy


def replaced(message: dict[str, Any], value: Any, *path: str) -> dict[str, Any]:
    copy: dict[str, Any] = orjson.loads(orjson.dumps(message))
    inner = copy
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return copy


def decodes_or_refuses(frame: str) -> None:
    """Nothing but the format error escapes, and what decodes is one of the union's cases."""
    try:
        event = codec.decode(frame)
    except TwilioFormatError:
        return
    assert isinstance(event, (Connected, Start, Media, Mark, Dtmf, Stop, UnknownTwilio))


# --- inbound --------------------------------------------------------------------------------


def test_connected() -> None:
    assert codec.decode(text(CONNECTED)) == Connected(protocol="Call", version="1.0.0")


def test_start_carries_identity_parameters_and_format() -> None:
    event = codec.decode(text(START))
    assert event == Start(
        stream_sid=STREAM,
        call_sid=CALL,
        account_sid=ACCOUNT,
        tracks=("inbound",),
        custom_parameters={"token": "t0k3n"},
        media_format=MediaFormat(encoding="audio/x-mulaw", sample_rate=8000, channels=1),
    )
    assert event.type == "start"


def test_start_without_custom_parameters_has_none() -> None:
    event = codec.decode(text(without(START, "start", "customParameters")))
    assert isinstance(event, Start)
    assert event.custom_parameters == {}


def test_media_numbers_arrive_as_strings_and_the_payload_is_decoded() -> None:
    event = codec.decode(text(MEDIA))
    assert event == Media(
        stream_sid=STREAM, track="inbound", chunk=1, timestamp_ms=5, payload=AUDIO
    )
    # Plain numbers are read too.
    numeric = replaced(replaced(MEDIA, 7, "media", "chunk"), 140, "media", "timestamp")
    event = codec.decode(text(numeric))
    assert isinstance(event, Media)
    assert (event.chunk, event.timestamp_ms) == (7, 140)


def test_media_with_an_empty_payload_is_empty_audio() -> None:
    event = codec.decode(text(replaced(MEDIA, "", "media", "payload")))
    assert isinstance(event, Media)
    assert event.payload == b""


def test_mark_dtmf_stop() -> None:
    assert codec.decode(text(MARK)) == Mark(stream_sid=STREAM, name="r1:100:0")
    assert codec.decode(text(DTMF)) == Dtmf(stream_sid=STREAM, digit="1")
    assert codec.decode(text(STOP)) == Stop(stream_sid=STREAM, call_sid=CALL)


def test_an_event_twilio_adds_later_is_unknown_not_an_error() -> None:
    message = {"event": "transcription", "streamSid": STREAM, "text": "hello"}
    event = codec.decode(text(message))
    assert event == UnknownTwilio(event="transcription", raw=message)


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        ("not json", "not JSON"),
        (text(MEDIA)[:-1], "not JSON"),
        ("[1, 2]", "list"),
        ('"media"', "str"),
        ("{}", "event"),
        (text({"event": 5}), "event"),
        (text({"event": ""}), "event"),
        (text(without(CONNECTED, "protocol")), "protocol"),
        (text(replaced(CONNECTED, 1, "version")), "version"),
        (text(without(START, "start")), "start"),
        (text(replaced(START, "x", "start")), "start"),
        (text(without(START, "start", "callSid")), "start.callSid"),
        (text(without(START, "start", "accountSid")), "start.accountSid"),
        (text(without(without(START, "start", "streamSid"), "streamSid")), "start.streamSid"),
        (text(replaced(START, "inbound", "start", "tracks")), "start.tracks"),
        (text(replaced(START, [1], "start", "tracks")), "start.tracks"),
        (text(replaced(START, {"a": 1}, "start", "customParameters")), "customParameters"),
        (text(replaced(START, ["a"], "start", "customParameters")), "customParameters"),
        (text(without(START, "start", "mediaFormat")), "start.mediaFormat"),
        (
            text(replaced(START, "8k", "start", "mediaFormat", "sampleRate")),
            "start.mediaFormat.sampleRate",
        ),
        (
            text(without(START, "start", "mediaFormat", "channels")),
            "start.mediaFormat.channels",
        ),
        (
            text(without(START, "start", "mediaFormat", "encoding")),
            "start.mediaFormat.encoding",
        ),
        (text(without(MEDIA, "media")), "media"),
        (text(without(MEDIA, "streamSid")), "streamSid"),
        (text(without(MEDIA, "media", "track")), "media.track"),
        (text(replaced(MEDIA, "-1", "media", "chunk")), "media.chunk"),
        (text(replaced(MEDIA, -1, "media", "chunk")), "media.chunk"),
        (text(replaced(MEDIA, True, "media", "chunk")), "media.chunk"),
        (text(replaced(MEDIA, "1.5", "media", "timestamp")), "media.timestamp"),
        (text(replaced(MEDIA, "9" * 5000, "media", "timestamp")), "media.timestamp"),
        (text(replaced(MEDIA, "٣", "media", "timestamp")), "media.timestamp"),
        (text(without(MEDIA, "media", "payload")), "media.payload"),
        (text(replaced(MEDIA, 12, "media", "payload")), "media.payload"),
        (text(replaced(MEDIA, "not base64!", "media", "payload")), "media.payload"),
        (text(replaced(MEDIA, "QUJ", "media", "payload")), "media.payload"),
        (text(without(MARK, "mark", "name")), "mark.name"),
        (text(replaced(MARK, None, "mark")), "mark"),
        (text(without(DTMF, "dtmf", "digit")), "dtmf.digit"),
        (text(without(DTMF, "streamSid")), "streamSid"),
        (text(without(STOP, "stop", "callSid")), "stop.callSid"),
        (text(without(STOP, "stop")), "stop"),
    ],
)
def test_malformed_frames_name_the_field(frame: str, field: str) -> None:
    with pytest.raises(TwilioFormatError, match=field.replace(".", r"\.")):
        codec.decode(frame)


def test_the_format_error_is_a_value_error() -> None:
    assert issubclass(TwilioFormatError, ValueError)


@given(st.text(max_size=200))
def test_any_text_decodes_or_raises_the_format_error(frame: str) -> None:
    decodes_or_refuses(frame)


@given(
    st.dictionaries(
        st.sampled_from(["event", "streamSid", "media", "start", "mark", "stop", "dtmf"]),
        st.one_of(
            st.sampled_from(["media", "start", "mark", "stop", "dtmf", "connected"]),
            st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=4),
            st.integers(),
            st.none(),
        ),
    )
)
def test_any_object_decodes_or_raises_the_format_error(message: dict[str, Any]) -> None:
    decodes_or_refuses(text(message))


# --- outbound -------------------------------------------------------------------------------


def test_media_out() -> None:
    frame = codec.media(STREAM, AUDIO)
    assert " " not in frame
    assert orjson.loads(frame) == {
        "event": "media",
        "streamSid": STREAM,
        "media": {"payload": base64.b64encode(AUDIO).decode()},
    }


def test_mark_out_and_clear() -> None:
    assert codec.mark(STREAM, 'r:20:0 "quoted"') == (
        '{"event":"mark","streamSid":"' + STREAM + '","mark":{"name":"r:20:0 \\"quoted\\""}}'
    )
    assert codec.clear(STREAM) == '{"event":"clear","streamSid":"' + STREAM + '"}'


@given(st.binary(max_size=400), st.text(min_size=1, max_size=20))
def test_what_we_send_twilio_echoes_back_as_we_read_it(audio: bytes, name: str) -> None:
    # Twilio's own frames have the shape of ours plus fields; ours decode with the same code.
    sent = orjson.loads(codec.media(STREAM, audio))
    sent["media"] |= {"track": "outbound", "chunk": "1", "timestamp": "0"}
    event = codec.decode(text(sent))
    assert isinstance(event, Media)
    assert event.payload == audio
    assert codec.decode(codec.mark(STREAM, name)) == Mark(stream_sid=STREAM, name=name)
