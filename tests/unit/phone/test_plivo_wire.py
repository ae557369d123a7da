"""Plivo Audio Streams on the wire: every documented message decoded, malformed ones refused by
field, unknown events, ``claims`` against the other carriers, the token's packing, and the
outbound messages exactly as Plivo documents them."""

from __future__ import annotations

import base64
import copy
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

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
from gateway.edges.plivo.wire import (
    PlivoCarrier,
    PlivoSpeaker,
    pack_header_value,
    unpack_header_value,
)

CALL = "12345678-1234-1234-1234-123456789abc"
STREAM = "87654321-4321-4321-4321-cba987654321"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJjYWxsIjoiMTIzIn0.sig-nat_ure"
PACKED = "eyJhbGciOiJIUzI1NiJ9Z2EeyJjYWxsIjoiMTIzIn0Z2EsigZ2DnatZ5Fure"
AUDIO = bytes(range(256)) + b"\xff" * 64

# The protocol reference's start, with the gateway's token among the extra headers.
START: dict[str, Any] = {
    "event": "start",
    "sequenceNumber": 1,
    "start": {
        "callId": CALL,
        "streamId": STREAM,
        "accountId": "MAXXXXXXXXXXXXXXXXXX",
        "tracks": ["inbound"],
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
    },
    "extra_headers": f"token={PACKED};userId=12345",
}
MEDIA: dict[str, Any] = {
    "event": "media",
    "sequenceNumber": 42,
    "streamId": STREAM,
    "media": {
        "track": "inbound",
        "timestamp": "1705312200000",
        "chunk": 41,
        "payload": base64.b64encode(AUDIO).decode(),
    },
    "extra_headers": f"token={PACKED}",
}
DTMF: dict[str, Any] = {
    "event": "dtmf",
    "sequenceNumber": 7,
    "streamId": STREAM,
    "dtmf": {"track": "inbound", "digit": "5", "timestamp": "1705312200500"},
}
PLAYED = {"event": "playedStream", "sequenceNumber": 9, "streamId": STREAM, "name": "reply-3"}
CLEARED = {"sequenceNumber": 0, "event": "clearedAudio", "streamId": STREAM}

TWILIO_START = (
    '{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC1","streamSid":"MZ1",'
    '"callSid":"CA1","tracks":["inbound"],"customParameters":{"token":"t"},"mediaFormat":'
    '{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"MZ1"}'
)
TELNYX_START = (
    '{"event":"start","sequence_number":"1","start":{"user_id":"u1","call_control_id":"v3:c",'
    '"client_state":"dA==","media_format":{"encoding":"PCMU","sample_rate":8000,"channels":1}},'
    '"stream_id":"s1"}'
)
EXOTEL_START = (
    '{"event":"start","sequence_number":"1","stream_sid":"MZ1","start":{"stream_sid":"MZ1",'
    '"call_sid":"CA1","account_sid":"AC1","custom_parameters":{},"media_format":'
    '{"encoding":"audio/x-raw","sample_rate":"8000","bit_rate":"16"}}}'
)
VONAGE_CONNECTED = '{"event":"websocket:connected","content-type":"audio/l16;rate=16000"}'

carrier = PlivoCarrier()


def encoded(message: dict[str, Any]) -> str:
    return orjson.dumps(message).decode()


def changed(message: dict[str, Any], path: str, value: Any) -> str:
    """``message`` with the field at dotted ``path`` set to ``value``, or deleted for ``...``."""
    copied = copy.deepcopy(message)
    *parents, last = path.split(".")
    node = copied
    for key in parents:
        node = node[key]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return encoded(copied)


# -- start ---------------------------------------------------------------------------------------


def test_start_is_the_stream_with_its_call_token_and_line() -> None:
    event = carrier.decode(encoded(START))
    assert event == StreamStarted(
        call_id=CALL,
        stream_id=STREAM,
        token=TOKEN,
        line=LineFormat("pcmu", 8000),
        parameters={"userId": "12345"},
    )


@pytest.mark.parametrize(
    "extra_headers",
    [
        f"token={PACKED},userId=12345",  # the XML attribute's separator
        f"userId=12345; token={PACKED}",
        f'{{"token": "{PACKED}", "userId": "12345"}}',  # "a JSON string" (Plivo's Python SDK)
        {"token": PACKED, "userId": "12345"},
        f"X-PH-token={PACKED};userId=12345",
    ],
)
def test_the_token_is_read_from_every_form_of_extra_headers(extra_headers: Any) -> None:
    event = carrier.decode(changed(START, "extra_headers", extra_headers))
    assert isinstance(event, StreamStarted)
    assert event.token == TOKEN
    assert dict(event.parameters) == {"userId": "12345"}


@pytest.mark.parametrize("extra_headers", [..., "", "userId=12345", None])
def test_a_start_without_a_token_has_none(extra_headers: Any) -> None:
    event = carrier.decode(changed(START, "extra_headers", extra_headers))
    assert isinstance(event, StreamStarted)
    assert event.token is None


@pytest.mark.parametrize(
    ("encoding", "rate", "line"),
    [
        ("audio/x-mulaw", "8000", LineFormat("pcmu", 8000)),  # a rate as a decimal string
        ("audio/x-mulaw;rate=8000", 8000, LineFormat("pcmu", 8000)),
        ("audio/x-l16", 8000, LineFormat("pcm16", 8000)),
        ("audio/x-l16", 16000, LineFormat("pcm16", 16000)),
    ],
)
def test_the_line_is_the_media_format_plivo_sends(
    encoding: str, rate: int | str, line: LineFormat
) -> None:
    message = copy.deepcopy(START)
    message["start"]["mediaFormat"] = {"encoding": encoding, "sampleRate": rate}
    event = carrier.decode(encoded(message))
    assert isinstance(event, StreamStarted)
    assert event.line == line


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("start", ..., "start"),
        ("start", "x", "start"),
        ("start.callId", ..., "start.callId"),
        ("start.callId", "", "start.callId"),
        ("start.streamId", 7, "start.streamId"),
        ("start.mediaFormat", ..., "start.mediaFormat"),
        ("start.mediaFormat.encoding", None, "start.mediaFormat.encoding"),
        ("start.mediaFormat.sampleRate", -8000, "start.mediaFormat.sampleRate"),
        ("start.mediaFormat.sampleRate", True, "start.mediaFormat.sampleRate"),
        ("start.mediaFormat.sampleRate", "8k", "start.mediaFormat.sampleRate"),
        ("start.mediaFormat.encoding", "audio/x-alaw", "start.mediaFormat"),
        ("start.mediaFormat.sampleRate", 16000, "start.mediaFormat"),  # µ-law is 8 kHz
        ("extra_headers", 5, "extra_headers"),
        ("extra_headers", "{not json", "extra_headers"),
        ("extra_headers", "token=a.b", "extra_headers token"),
        ("extra_headers", "token=Z4", "extra_headers token"),
    ],
)
def test_a_malformed_start_is_refused_naming_the_field(path: str, value: Any, named: str) -> None:
    with pytest.raises(PhoneFormatError, match=named.replace(".", r"\.")):
        carrier.decode(changed(START, path, value))


# -- media, dtmf, checkpoints, the end ------------------------------------------------------------


def test_media_is_the_decoded_payload_in_socket_order() -> None:
    assert carrier.decode(encoded(MEDIA)) == Audio(AUDIO, sequence=None)
    assert carrier.decode(encoded(MEDIA).encode()) == Audio(AUDIO)  # a binary frame of JSON


def test_media_without_a_track_is_the_callers() -> None:
    assert carrier.decode(changed(MEDIA, "media.track", ...)) == Audio(AUDIO)


def test_media_of_another_track_is_ignored() -> None:
    assert carrier.decode(changed(MEDIA, "media.track", "outbound")) == Ignored("media.outbound")


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("media", ..., "media"),
        ("media", [], "media"),
        ("media.payload", ..., "media.payload"),
        ("media.payload", 12, "media.payload"),
        ("media.payload", "not base64!", "media.payload"),
        ("media.track", 1, "media.track"),
    ],
)
def test_malformed_media_is_refused_naming_the_field(path: str, value: Any, named: str) -> None:
    with pytest.raises(PhoneFormatError, match=named.replace(".", r"\.")):
        carrier.decode(changed(MEDIA, path, value))


@pytest.mark.parametrize("digit", [*"0123456789*#ABCD"])
def test_every_dtmf_digit(digit: str) -> None:
    assert carrier.decode(changed(DTMF, "dtmf.digit", digit)) == Digit(digit)


def test_a_lower_case_dtmf_letter_is_upper_cased() -> None:
    assert carrier.decode(changed(DTMF, "dtmf.digit", "b")) == Digit("B")


@pytest.mark.parametrize(
    ("path", "value"),
    [("dtmf", ...), ("dtmf.digit", ...), ("dtmf.digit", "12"), ("dtmf.digit", "x")],
)
def test_a_malformed_dtmf_is_refused_naming_the_field(path: str, value: Any) -> None:
    with pytest.raises(PhoneFormatError, match=r"dtmf"):
        carrier.decode(changed(DTMF, path, value))


@pytest.mark.parametrize("event", ["playedStream", "played"])
def test_a_checkpoints_echo_is_played(event: str) -> None:
    assert carrier.decode(changed(PLAYED, "event", event)) == Played("reply-3")


@pytest.mark.parametrize("name", [..., "", 3])
def test_an_echo_without_a_name_is_refused(name: Any) -> None:
    with pytest.raises(PhoneFormatError, match="name"):
        carrier.decode(changed(PLAYED, "name", name))


def test_cleared_audio_is_an_acknowledgement_with_nothing_to_do() -> None:
    assert carrier.decode(encoded(CLEARED)) == Ignored("clearedAudio")


def test_a_stop_is_a_hangup_with_its_reason() -> None:
    stop = {"event": "stop", "sequenceNumber": 99, "streamId": STREAM, "reason": "hangup"}
    assert carrier.decode(encoded(stop)) == Hangup("hangup")
    assert carrier.decode(changed(stop, "reason", ...)) == Hangup("stop")


def test_an_event_plivo_adds_later_is_unknown() -> None:
    assert carrier.decode('{"event": "sendDTMFAck", "streamId": "s"}') == Unknown("sendDTMFAck")


@pytest.mark.parametrize(
    ("frame", "named"),
    [
        ("not json", "not JSON"),
        (b"\x00\xff\x10", "binary frame is not JSON"),
        ("[1, 2]", "JSON list"),
        ('"start"', "JSON str"),
        ('{"streamId": "s"}', "event"),
        ('{"event": 5}', "event"),
        ('{"event": ""}', "event"),
    ],
)
def test_junk_is_refused_not_crashed_on(frame: str | bytes, named: str) -> None:
    with pytest.raises(PhoneFormatError, match=named):
        carrier.decode(frame)


# -- claims --------------------------------------------------------------------------------------


def test_plivos_start_is_claimed_as_text_or_bytes() -> None:
    assert carrier.claims(encoded(START))
    assert carrier.claims(encoded(START).encode())
    assert carrier.claims(changed(START, "extra_headers", ...))


@pytest.mark.parametrize(
    "message",
    [
        TWILIO_START,
        TELNYX_START,
        EXOTEL_START,
        VONAGE_CONNECTED,
        encoded(MEDIA),
        encoded(DTMF),
        changed(START, "start.mediaFormat", ...),
        changed(START, "start.callId", 1),
        "not json",
        "[]",
        '["start"]',
        b"\x00\x01\xfe\xff" * 40,
        "",
    ],
)
def test_nothing_else_is_claimed(message: str | bytes) -> None:
    assert carrier.claims(message) is False


def test_the_carrier_is_named_plivo() -> None:
    assert carrier.name == "plivo"


# -- the token in extraHeaders -------------------------------------------------------------------


def test_packing_escapes_all_but_letters_and_digits() -> None:
    assert pack_header_value(TOKEN) == PACKED
    assert pack_header_value("Zz.-_é") == "Z5AzZ2EZ2DZ5FZC3ZA9"
    assert pack_header_value("abc123") == "abc123"


@given(st.text(max_size=64))
def test_packing_round_trips_to_letters_and_digits(value: str) -> None:
    packed = pack_header_value(value)
    assert packed.isascii()
    assert packed.isalnum() or not value
    assert unpack_header_value(packed) == value


@pytest.mark.parametrize("packed", ["Z2", "ZZZ", "Zg0", "a.b", "a b", "ZFF", "Z2E Z"])
def test_what_packing_cannot_make_is_refused(packed: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies with the fault
        unpack_header_value(packed)


# -- outbound ------------------------------------------------------------------------------------


MULAW = LineFormat("pcmu", 8000)


def started(line: LineFormat = MULAW) -> StreamStarted:
    return StreamStarted(call_id=CALL, stream_id=STREAM, token=None, line=line)


def test_the_speaker_plays_what_the_stream_sends_and_echoes_checkpoints() -> None:
    speaker = carrier.speaker(started())
    assert speaker.line == LineFormat("pcmu", 8000)
    assert speaker.echoes_markers is True


def test_media_is_a_play_audio_of_mulaw_8k() -> None:
    message = orjson.loads(carrier.speaker(started()).media(AUDIO))
    assert message == {
        "event": "playAudio",
        "streamId": STREAM,
        "media": {
            "contentType": "audio/x-mulaw",
            "sampleRate": 8000,
            "payload": base64.b64encode(AUDIO).decode(),
        },
    }


@pytest.mark.parametrize("rate", [8000, 16000])
def test_linear_pcm_is_played_as_l16_at_its_rate(rate: int) -> None:
    message = orjson.loads(carrier.speaker(started(LineFormat("pcm16", rate))).media(b"\x01\x00"))
    assert message["media"]["contentType"] == "audio/x-l16"
    assert message["media"]["sampleRate"] == rate
    assert base64.b64decode(message["media"]["payload"]) == b"\x01\x00"


def test_a_marker_is_a_checkpoint_by_name() -> None:
    message = orjson.loads(carrier.speaker(started()).marker("reply-3"))
    assert message == {"event": "checkpoint", "streamId": STREAM, "name": "reply-3"}


def test_clear_is_clear_audio() -> None:
    assert orjson.loads(carrier.speaker(started()).clear()) == {
        "event": "clearAudio",
        "streamId": STREAM,
    }


def test_plivo_plays_no_alaw() -> None:
    with pytest.raises(ValueError, match="not pcma"):
        PlivoSpeaker(STREAM, LineFormat("pcma", 8000))
