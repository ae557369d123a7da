"""Exotel's Voicebot stream: every documented inbound message, malformed ones named by field,
``claims`` against the other carriers' starts and junk, and the outbound messages as documented
(https://developer.exotel.com/docs/agentstream/websocket-protocol)."""

from __future__ import annotations

import base64
import copy
from typing import Any

import orjson
import pytest

from gateway.edges.exotel.wire import TOKEN_PARAMETER, ExotelCarrier, ExotelSpeaker
from gateway.edges.phone.wire import (
    Audio,
    Digit,
    Hangup,
    Ignored,
    LineFormat,
    PhoneFormatError,
    Played,
    StreamStarted,
    Unknown,
)

STREAM = "MZ18ad3ab5a668481ce02b83e7395059f0"
CALL = "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4"
ACCOUNT = "exotel_account"
PCM = bytes(range(256)) * 25  # 6400 bytes: 400 ms of PCM16 at 8 kHz

START: dict[str, Any] = {
    "event": "start",
    "sequence_number": "1",
    "stream_sid": STREAM,
    "start": {
        "stream_sid": STREAM,
        "call_sid": CALL,
        "account_sid": ACCOUNT,
        "from": "+919876543210",
        "to": "+918047491899",
        "custom_parameters": {"token": "t0k3n", "tenant": "acme"},
        "media_format": {"encoding": "audio/x-raw", "sample_rate": "8000", "bit_rate": "16"},
    },
}
MEDIA: dict[str, Any] = {
    "event": "media",
    "sequence_number": "3",
    "stream_sid": STREAM,
    "media": {"chunk": "2", "timestamp": "200", "payload": base64.b64encode(PCM).decode()},
}
DTMF: dict[str, Any] = {
    "event": "dtmf",
    "sequence_number": "7",
    "stream_sid": STREAM,
    "dtmf": {"digit": "5", "duration": "100"},
}
MARK: dict[str, Any] = {
    "event": "mark",
    "sequence_number": "15",
    "stream_sid": STREAM,
    "mark": {"name": "turn-3-end"},
}
STOP: dict[str, Any] = {
    "event": "stop",
    "sequence_number": "20",
    "stream_sid": STREAM,
    "stop": {"call_sid": CALL, "account_sid": ACCOUNT, "reason": "callended"},
}

TWILIO_START = (
    '{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC1","streamSid":"MZ1",'
    '"callSid":"CA1","tracks":["inbound"],"customParameters":{"token":"t"},"mediaFormat":'
    '{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"MZ1"}'
)
TELNYX_START = (
    '{"event":"start","sequence_number":"1","start":{"user_id":"u1","call_control_id":"v3:cc",'
    '"call_session_id":"s1","client_state":"dA==","media_format":{"encoding":"PCMU",'
    '"sample_rate":8000,"channels":1}},"stream_id":"32de0dea-53cb-4b21-89a4-9610e3b2b5b4"}'
)
PLIVO_START = (
    '{"event":"start","sequenceNumber":0,"start":{"callId":"c1","streamId":"s1","accountId":"a1",'
    '"tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000}}}'
)

carrier = ExotelCarrier()


def text(message: dict[str, Any]) -> str:
    return orjson.dumps(message).decode()


def altered(message: dict[str, Any], path: str, value: object) -> str:
    """``message`` with the field at dotted ``path`` set to ``value`` (``...`` deletes it)."""
    changed = copy.deepcopy(message)
    *parents, last = path.split(".")
    node = changed
    for key in parents:
        node = node[key]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return text(changed)


# -- decode: every documented message -----------------------------------------------------------


def test_connected_is_ignored() -> None:
    assert carrier.decode('{"event":"connected"}') == Ignored("connected")


def test_start_becomes_stream_started() -> None:
    started = carrier.decode(text(START))
    assert isinstance(started, StreamStarted)
    assert started.call_id == CALL
    assert started.stream_id == STREAM
    assert started.token == "t0k3n"
    assert started.line == LineFormat("pcm16", 8000)
    assert dict(started.parameters) == {"tenant": "acme"}  # the token is not repeated


def test_start_with_numbers_for_rate_and_sequence() -> None:
    # The applet page shows numbers where the protocol page shows strings.
    message = copy.deepcopy(START)
    message["sequence_number"] = 1
    message["start"]["media_format"] = {"encoding": "raw", "sample_rate": 16000, "bit_rate": 128}
    started = carrier.decode(text(message))
    assert isinstance(started, StreamStarted)
    assert started.line == LineFormat("pcm16", 16000)


@pytest.mark.parametrize(
    ("encoding", "rate", "line"),
    [
        ("audio/x-raw", "8000", LineFormat("pcm16", 8000)),
        ("linear16", "16000", LineFormat("pcm16", 16000)),
        ("audio/L16;rate=16000", "16000", LineFormat("pcm16", 16000)),
        ("audio/x-mulaw", "8000", LineFormat("pcmu", 8000)),
        ("audio/x-mulaw;rate=8000", 8000, LineFormat("pcmu", 8000)),
    ],
)
def test_start_line_formats(encoding: str, rate: object, line: LineFormat) -> None:
    message = copy.deepcopy(START)
    message["start"]["media_format"] = {"encoding": encoding, "sample_rate": rate}
    started = carrier.decode(text(message))
    assert isinstance(started, StreamStarted)
    assert started.line == line


def test_start_stream_sid_only_at_the_top_level() -> None:
    started = carrier.decode(altered(START, "start.stream_sid", ...))
    assert isinstance(started, StreamStarted)
    assert started.stream_id == STREAM


def test_start_without_custom_parameters_has_no_token() -> None:
    started = carrier.decode(altered(START, "start.custom_parameters", ...))
    assert isinstance(started, StreamStarted)
    assert started.token is None
    assert dict(started.parameters) == {}


def test_start_with_an_empty_token_has_none() -> None:
    started = carrier.decode(altered(START, f"start.custom_parameters.{TOKEN_PARAMETER}", ""))
    assert isinstance(started, StreamStarted)
    assert started.token is None


def test_media_is_the_decoded_payload_in_socket_order() -> None:
    audio = carrier.decode(text(MEDIA))
    assert isinstance(audio, Audio)
    assert audio.payload == PCM
    assert audio.sequence is None


def test_media_with_numeric_chunk_and_no_timestamp() -> None:
    message = copy.deepcopy(MEDIA)
    message["media"]["chunk"] = 2
    del message["media"]["timestamp"]
    assert carrier.decode(text(message)) == Audio(PCM)


def test_media_of_the_outbound_track_is_ignored() -> None:
    assert carrier.decode(altered(MEDIA, "media.track", "outbound")) == Ignored("media")
    assert carrier.decode(altered(MEDIA, "media.track", "inbound")) == Audio(PCM)


def test_odd_length_payload_is_passed_on_as_is() -> None:
    # decode is stateless: it cannot know the line of this stream; the bridge can.
    odd = PCM[:3201]
    message = altered(MEDIA, "media.payload", base64.b64encode(odd).decode())
    assert carrier.decode(message) == Audio(odd)


@pytest.mark.parametrize(("digit", "expected"), [("5", "5"), ("*", "*"), ("#", "#"), (7, "7")])
def test_dtmf(digit: object, expected: str) -> None:
    assert carrier.decode(altered(DTMF, "dtmf.digit", digit)) == Digit(expected)


def test_mark_echo_is_played() -> None:
    assert carrier.decode(text(MARK)) == Played("turn-3-end")


@pytest.mark.parametrize("reason", ["callended", "stopped"])
def test_stop_is_a_hangup_with_its_reason(reason: str) -> None:
    assert carrier.decode(altered(STOP, "stop.reason", reason)) == Hangup(reason)


def test_stop_without_a_body_is_still_a_hangup() -> None:
    assert carrier.decode(altered(STOP, "stop", ...)) == Hangup("stop")
    assert carrier.decode(altered(STOP, "stop.reason", ...)) == Hangup("stop")


@pytest.mark.parametrize("event", ["silence", "clear", "something-new"])
def test_unknown_events(event: str) -> None:
    assert carrier.decode(text({"event": event, "stream_sid": STREAM})) == Unknown(event)


# -- decode: malformed messages name the field --------------------------------------------------


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON list"),
        ('"start"', "JSON str"),
        ('{"stream_sid": "MZ1"}', "event"),
        ('{"event": ""}', "event"),
        ('{"event": 5}', "event"),
        (altered(START, "start", ...), "start must be an object"),
        (altered(START, "start.call_sid", ...), "start.call_sid"),
        (altered(START, "start.call_sid", 42), "start.call_sid"),
        (
            text({**START, "stream_sid": None, "start": {**START["start"], "stream_sid": ""}}),
            "start.stream_sid",
        ),
        (
            altered(orjson.loads(altered(START, "stream_sid", ...)), "start.stream_sid", ...),
            "start.stream_sid",
        ),
        (altered(START, "start.custom_parameters", ["token"]), "start.custom_parameters"),
        (altered(START, "start.custom_parameters.tenant", 5), "start.custom_parameters"),
        (altered(START, "start.media_format", ...), "start.media_format"),
        (altered(START, "start.media_format.encoding", ...), "start.media_format.encoding"),
        (altered(START, "start.media_format.encoding", "opus"), "start.media_format.encoding"),
        (altered(START, "start.media_format.sample_rate", ...), "start.media_format.sample_rate"),
        (altered(START, "start.media_format.sample_rate", "8k"), "start.media_format.sample_rate"),
        (altered(START, "start.media_format.sample_rate", 0), "start.media_format.sample_rate"),
        (altered(START, "start.media_format.sample_rate", True), "start.media_format.sample_rate"),
        (
            altered(START, "start.media_format.sample_rate", "9" * 5000),
            "start.media_format.sample_rate",
        ),
        (altered(START, "start.media_format.sample_rate", "24000"), "sample_rate 24000"),
        (altered(MEDIA, "media", ...), "media must be an object"),
        (altered(MEDIA, "media.payload", ...), "media.payload"),
        (altered(MEDIA, "media.payload", 12), "media.payload"),
        (altered(MEDIA, "media.payload", "not base64!"), "media.payload"),
        (altered(DTMF, "dtmf", ...), "dtmf must be an object"),
        (altered(DTMF, "dtmf.digit", ...), "dtmf.digit"),
        (altered(DTMF, "dtmf.digit", "55"), "dtmf.digit"),
        (altered(DTMF, "dtmf.digit", "x"), "dtmf.digit"),
        (altered(DTMF, "dtmf.digit", 12), "dtmf.digit"),
        (altered(MARK, "mark", ...), "mark must be an object"),
        (altered(MARK, "mark.name", ...), "mark.name"),
        (altered(MARK, "mark.name", ""), "mark.name"),
    ],
)
def test_malformed_messages_name_the_field(message: str, field: str) -> None:
    with pytest.raises(PhoneFormatError, match=field.replace(".", r"\.").replace("[", r"\[")):
        carrier.decode(message)


def test_mulaw_at_16k_is_refused() -> None:
    message = altered(
        START, "start.media_format", {"encoding": "audio/x-mulaw", "sample_rate": 16000}
    )
    with pytest.raises(PhoneFormatError, match=r"start\.media_format\.sample_rate"):
        carrier.decode(message)


def test_binary_frames_are_refused() -> None:
    with pytest.raises(PhoneFormatError, match="binary"):
        carrier.decode(text(START).encode())


# -- claims ---------------------------------------------------------------------------------------


def test_claims_exotel_start() -> None:
    assert carrier.claims(text(START)) is True
    assert carrier.claims(altered(START, "start.stream_sid", ...)) is True
    assert carrier.claims(altered(START, "stream_sid", ...)) is True


@pytest.mark.parametrize("other", [TWILIO_START, TELNYX_START, PLIVO_START])
def test_does_not_claim_other_carriers_starts(other: str) -> None:
    assert carrier.claims(other) is False


@pytest.mark.parametrize(
    "junk",
    [
        "not json",
        "\ud800",  # a lone surrogate: not UTF-8, not JSON
        "[1, 2, 3]",
        "null",
        '"start"',
        "",
        b"\x00\x01\xff",
        text(START).encode(),  # Exotel's start, but as a binary frame
        '{"event":"connected"}',
        text(MEDIA),
        '{"event":"start","start":"nope","stream_sid":"MZ1"}',
        '{"event":"start","start":{"stream_sid":"MZ1"}}',
        '{"event":"start","start":{"call_sid":"CA1"}}',
        '{"event":"start","start":{"call_sid":5,"stream_sid":"MZ1"}}',
        '{"event":"start","start":{"call_sid":"","stream_sid":"MZ1"}}',
    ],
)
def test_does_not_claim_junk(junk: str | bytes) -> None:
    assert carrier.claims(junk) is False


def test_name() -> None:
    assert carrier.name == "exotel"


# -- outbound -------------------------------------------------------------------------------------


PCM16_8K = LineFormat("pcm16", 8000)


def speaker(line: LineFormat = PCM16_8K) -> ExotelSpeaker:
    started = StreamStarted(call_id=CALL, stream_id=STREAM, token=None, line=line)
    return carrier.speaker(started)


def test_speaker_plays_the_stream_line_and_echoes_marks() -> None:
    out = speaker(LineFormat("pcm16", 16000))
    assert out.line == LineFormat("pcm16", 16000)
    assert out.stream_sid == STREAM
    assert out.echoes_markers is True


def test_media_message_as_documented() -> None:
    frame = PCM[:320]  # 20 ms at 8 kHz
    sent = speaker().media(frame)
    assert isinstance(sent, str)
    assert orjson.loads(sent) == {
        "event": "media",
        "stream_sid": STREAM,
        "media": {"payload": base64.b64encode(frame).decode()},
    }


def test_mulaw_media_of_any_length() -> None:
    sent = speaker(LineFormat("pcmu", 8000)).media(b"\xff" * 161)
    assert base64.b64decode(orjson.loads(sent)["media"]["payload"]) == b"\xff" * 161


def test_partial_pcm16_sample_is_a_bug_not_a_message() -> None:
    with pytest.raises(ValueError, match="321 bytes"):
        speaker().media(PCM[:321])


def test_mark_message_as_documented() -> None:
    assert orjson.loads(speaker().marker("reply-7")) == {
        "event": "mark",
        "stream_sid": STREAM,
        "mark": {"name": "reply-7"},
    }


def test_clear_message_as_documented() -> None:
    assert orjson.loads(speaker().clear()) == {"event": "clear", "stream_sid": STREAM}


def test_a_mark_we_send_comes_back_as_played() -> None:
    # Exotel echoes our mark as is (with its own sequence_number): the name round-trips.
    echoed = orjson.loads(speaker().marker("reply-7"))
    echoed["sequence_number"] = "16"
    assert carrier.decode(text(echoed)) == Played("reply-7")
