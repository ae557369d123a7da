"""Telnyx's media-stream frames on the phone contract: every documented frame decoded, malformed
ones refused by field, other carriers' starts not claimed, and the frames we send exactly as
Telnyx documents them (developers.telnyx.com, "Stream call media over WebSocket")."""

from __future__ import annotations

import base64
import copy
from typing import Any

import orjson
import pytest

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
from gateway.edges.telnyx.call_control import answer_request
from gateway.edges.telnyx.wire import TelnyxCarrier

CARRIER = TelnyxCarrier()

# The documented start frame, as the Telnyx reference shows it.
START: dict[str, Any] = {
    "event": "start",
    "sequence_number": "1",
    "stream_id": "32DE0DEA-53CB-4B21-89A4-9E1819C043BC",
    "start": {
        "user_id": "3E6F995F-85F7-4705-9741-53B116D28237",
        "call_control_id": "v2:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ",
        "call_session_id": "ff55a038-6f5d-11ef-9692-02420aeffb1f",
        "from": "+13122010094",
        "to": "+13122123456",
        "tags": ["TAG1", "TAG2"],
        "client_state": "aGF2ZSBhIG5pY2UgZGF5ID1d",
        "custom_parameters": {"customer_id": "customer_123"},
        "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
    },
}
STREAM_ID = START["stream_id"]
CALL_ID = START["start"]["call_control_id"]

TWILIO_START = (
    '{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC1","streamSid":"MZ1",'
    '"callSid":"CA1","tracks":["inbound"],"customParameters":{"token":"t"},"mediaFormat":'
    '{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"MZ1"}'
)
EXOTEL_START = (
    '{"event":"start","sequence_number":1,"stream_sid":"s1","start":{"stream_sid":"s1",'
    '"call_sid":"c1","account_sid":"a1","from":"1","to":"2","custom_parameters":{},'
    '"media_format":{"encoding":"raw","sample_rate":"8000","bit_rate":"128kbps"}}}'
)
PLIVO_START = (
    '{"event":"start","sequenceNumber":1,"start":{"callId":"c1","streamId":"s1",'
    '"accountId":"MA1","tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw",'
    '"sampleRate":8000}},"extra_headers":"token=t"}'
)
VONAGE_CONNECTED = '{"event":"websocket:connected","content-type":"audio/l16;rate=16000"}'


def text(frame: dict[str, Any]) -> str:
    return orjson.dumps(frame).decode()


def start_with(**changes: Any) -> str:
    """The documented start with ``start.<key>`` changed (None: removed)."""
    frame = copy.deepcopy(START)
    for key, value in changes.items():
        if value is None:
            frame["start"].pop(key, None)
        else:
            frame["start"][key] = value
    return text(frame)


def media(audio: bytes = b"\xff" * 160, **fields: Any) -> str:
    body: dict[str, Any] = {"track": "inbound", "chunk": "2", "timestamp": "5"}
    body["payload"] = base64.b64encode(audio).decode()
    body.update(fields)
    return text({"event": "media", "sequence_number": "4", "media": body, "stream_id": STREAM_ID})


# -- inbound ------------------------------------------------------------------------------------


def test_the_documented_start_is_the_stream_started() -> None:
    event = CARRIER.decode(text(START))
    assert event == StreamStarted(
        call_id=CALL_ID,
        stream_id=STREAM_ID,
        token="have a nice day =]",  # the documented client_state, base64-decoded
        line=LineFormat("pcmu", 8000),
        parameters={"customer_id": "customer_123"},
    )
    assert event.parameters == {"customer_id": "customer_123"}


def test_the_token_the_answer_puts_in_client_state_comes_back_in_the_start() -> None:
    answer = answer_request(CALL_ID, "wss://gw.example/phone/media", "tok.en-1/2+3=")
    event = CARRIER.decode(start_with(client_state=answer.body["client_state"]))
    assert isinstance(event, StreamStarted)
    assert event.token == "tok.en-1/2+3="
    assert event.call_id == CALL_ID


@pytest.mark.parametrize("client_state", [None, ""])
def test_a_start_without_client_state_has_no_token(client_state: str | None) -> None:
    frame = copy.deepcopy(START)
    if client_state is None:
        del frame["start"]["client_state"]
    else:
        frame["start"]["client_state"] = client_state
    event = CARRIER.decode(text(frame))
    assert isinstance(event, StreamStarted)
    assert event.token is None


def test_a_null_client_state_is_no_token_and_absent_parameters_are_none() -> None:
    frame = copy.deepcopy(START)
    frame["start"]["client_state"] = None
    del frame["start"]["custom_parameters"]
    event = CARRIER.decode(text(frame))
    assert isinstance(event, StreamStarted)
    assert (event.token, dict(event.parameters)) == (None, {})


@pytest.mark.parametrize(
    ("media_format", "line"),
    [
        ({"encoding": "PCMA", "sample_rate": 8000, "channels": 1}, LineFormat("pcma", 8000)),
        ({"encoding": "pcmu", "sample_rate": "8000", "channels": "1"}, LineFormat("pcmu", 8000)),
        ({"encoding": "PCMU", "sample_rate": 8000}, LineFormat("pcmu", 8000)),
    ],
)
def test_the_line_is_read_from_media_format(media_format: dict[str, Any], line: LineFormat) -> None:
    event = CARRIER.decode(start_with(media_format=media_format))
    assert isinstance(event, StreamStarted)
    assert event.line == line


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"media_format": {"encoding": "L16", "sample_rate": 16000}}, "media_format.encoding"),
        ({"media_format": {"encoding": "G722", "sample_rate": 8000}}, "media_format.encoding"),
        ({"media_format": {"encoding": "PCMU", "sample_rate": 16000}}, "media_format.sample_rate"),
        ({"media_format": {"encoding": "PCMU", "sample_rate": "8k"}}, "media_format.sample_rate"),
        ({"media_format": {"sample_rate": 8000}}, "media_format.encoding"),
        ({"media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 2}}, "channels"),
        ({"media_format": None}, "start.media_format"),
        ({"call_control_id": None}, "start.call_control_id"),
        ({"call_control_id": 7}, "start.call_control_id"),
        ({"client_state": "not base64!"}, "start.client_state"),
        ({"client_state": base64.b64encode(b"\xff\xfe").decode()}, "start.client_state"),
        ({"client_state": 12}, "start.client_state"),
        ({"custom_parameters": {"n": 1}}, "start.custom_parameters"),
        ({"custom_parameters": ["token"]}, "start.custom_parameters"),
    ],
)
def test_a_malformed_start_is_refused_by_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(PhoneFormatError, match=field.replace(".", r"\.")):
        CARRIER.decode(start_with(**changes))


def test_a_start_without_stream_id_or_body_is_refused() -> None:
    frame = copy.deepcopy(START)
    del frame["stream_id"]
    with pytest.raises(PhoneFormatError, match="stream_id"):
        CARRIER.decode(text(frame))
    with pytest.raises(PhoneFormatError, match="start must be an object"):
        CARRIER.decode(text({"event": "start", "stream_id": "s"}))


def test_connected_is_ignored_with_or_without_an_auth_token() -> None:
    assert CARRIER.decode('{"event":"connected","version":"1.0.0"}') == Ignored("connected")
    with_token = {"event": "connected", "connected": {"x-telnyx-streaming-auth-token": "t"}}
    assert CARRIER.decode(text(with_token)) == Ignored("connected")


def test_media_is_audio_numbered_by_chunk() -> None:
    assert CARRIER.decode(media(b"\x01\x02\x03")) == Audio(b"\x01\x02\x03", sequence=2)
    assert CARRIER.decode(media(b"\x7f", chunk=41)) == Audio(b"\x7f", sequence=41)


def test_media_of_the_outbound_track_is_ignored() -> None:
    assert CARRIER.decode(media(track="outbound")) == Ignored("media")
    assert CARRIER.decode(media(track="outbound_track")) == Ignored("media")
    assert CARRIER.decode(media(b"\x05", track="inbound_track")) == Audio(b"\x05", sequence=2)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"payload": "***"}, "media.payload"),
        ({"payload": 5}, "media.payload"),
        ({"chunk": "-1"}, "media.chunk"),
        ({"chunk": "two"}, "media.chunk"),
        ({"chunk": True}, "media.chunk"),
        ({"chunk": "9" * 40}, "media.chunk"),
    ],
)
def test_malformed_media_is_refused_by_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(PhoneFormatError, match=field.replace(".", r"\.")):
        CARRIER.decode(media(**fields))


def test_media_without_a_chunk_or_body_is_refused() -> None:
    frame = orjson.loads(media())
    del frame["media"]["chunk"]
    with pytest.raises(PhoneFormatError, match=r"media\.chunk"):
        CARRIER.decode(text(frame))
    with pytest.raises(PhoneFormatError, match="media must be an object"):
        CARRIER.decode('{"event":"media","stream_id":"s"}')


def test_dtmf_mark_and_stop() -> None:
    dtmf = {"event": "dtmf", "stream_id": STREAM_ID, "dtmf": {"digit": "#"}}
    assert CARRIER.decode(text(dtmf)) == Digit("#")
    mark = {"event": "mark", "sequence_number": "9", "stream_id": STREAM_ID, "mark": {"name": "r7"}}
    assert CARRIER.decode(text(mark)) == Played("r7")
    stop = {"event": "stop", "stream_id": STREAM_ID, "stop": {"call_control_id": CALL_ID}}
    assert CARRIER.decode(text(stop)) == Hangup("stop")
    assert CARRIER.decode('{"event":"stop"}') == Hangup("stop")


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        ({"event": "dtmf", "dtmf": {}}, "dtmf.digit"),
        ({"event": "dtmf"}, "dtmf must be an object"),
        ({"event": "mark", "mark": {"name": ""}}, "mark.name"),
        ({"event": "mark", "mark": "r7"}, "mark must be an object"),
    ],
)
def test_malformed_dtmf_and_mark_are_refused(frame: dict[str, Any], field: str) -> None:
    with pytest.raises(PhoneFormatError, match=field.replace(".", r"\.")):
        CARRIER.decode(text(frame))


def test_an_error_frame_is_unknown_named_by_its_code_and_title() -> None:
    error = {"code": 100003, "title": "malformed_frame", "detail": "x"}
    frame = {"event": "error", "stream_id": STREAM_ID, "payload": error}
    assert CARRIER.decode(text(frame)) == Unknown("error 100003 malformed_frame")
    assert CARRIER.decode('{"event":"error"}') == Unknown("error")
    assert CARRIER.decode('{"event":"error","payload":{"code":true}}') == Unknown("error")


def test_an_event_telnyx_adds_later_is_unknown() -> None:
    assert CARRIER.decode('{"event":"transcription","stream_id":"s"}') == Unknown("transcription")


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON list"),
        ('"start"', "JSON str"),
        ('{"stream_id":"s"}', "event must be"),
        ('{"event":""}', "event must be"),
        (b'{"event":"connected"}', "binary"),
    ],
)
def test_junk_is_refused(message: str | bytes, problem: str) -> None:
    with pytest.raises(PhoneFormatError, match=problem):
        CARRIER.decode(message)


# -- claims -------------------------------------------------------------------------------------


def test_claims_telnyx_start_only() -> None:
    assert CARRIER.claims(text(START))
    assert CARRIER.claims(start_with(client_state=None, custom_parameters=None))


@pytest.mark.parametrize(
    "message",
    [
        TWILIO_START,
        EXOTEL_START,
        PLIVO_START,
        VONAGE_CONNECTED,
        '{"event":"connected","version":"1.0.0"}',
        '{"event":"connected","protocol":"Call","version":"1.0.0"}',
        media(),
        start_with(media_format=None),
        start_with(call_control_id=None),
        "not json",
        "[1]",
        "",
        b'{"event":"start"}',
        text(START).encode(),
    ],
)
def test_does_not_claim_others_or_junk(message: str | bytes) -> None:
    assert not CARRIER.claims(message)


# -- outbound -----------------------------------------------------------------------------------


def test_the_speaker_sends_telnyx_client_frames() -> None:
    started = CARRIER.decode(text(START))
    assert isinstance(started, StreamStarted)
    speaker = CARRIER.speaker(started)
    assert speaker.line == LineFormat("pcmu", 8000)
    assert speaker.echoes_markers is True
    audio = bytes(range(160))
    assert orjson.loads(speaker.media(audio)) == {
        "event": "media",
        "media": {"payload": base64.b64encode(audio).decode()},
    }
    assert orjson.loads(speaker.marker("r3-7")) == {"event": "mark", "mark": {"name": "r3-7"}}
    assert orjson.loads(speaker.clear()) == {"event": "clear"}


def test_the_speaker_plays_the_configured_codec_whatever_telnyx_sends() -> None:
    started = CARRIER.decode(start_with(media_format={"encoding": "PCMA", "sample_rate": 8000}))
    assert isinstance(started, StreamStarted)
    assert started.line == LineFormat("pcma", 8000)
    assert CARRIER.speaker(started).line == LineFormat("pcmu", 8000)
    assert TelnyxCarrier("PCMA").speaker(started).line == LineFormat("pcma", 8000)


def test_the_carrier_is_named_and_takes_only_g711_codecs() -> None:
    assert CARRIER.name == "telnyx"
    with pytest.raises(ValueError, match="PCMU or PCMA"):
        TelnyxCarrier("L16")  # type: ignore[arg-type]
