"""The Vonage Voice WebSocket: every documented inbound message, malformed ones named by field,
``claims`` against the other carriers' starts and junk, and the outbound messages as documented
(https://developer.vonage.com/en/voice/voice-api/concepts/websockets)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.edges.phone.wire import (
    Audio,
    Carrier,
    Digit,
    Ignored,
    LineFormat,
    PhoneFormatError,
    Played,
    Speaker,
    StreamStarted,
    Unknown,
)
from gateway.edges.vonage.wire import (
    VonageCarrier,
    VonageSpeaker,
    content_type,
    parse_content_type,
)

CALL = "aaaaaaaa-bbbb-cccc-dddd-0123456789ab"
PCM_20MS_16K = bytes(range(256)) * 2 + bytes(range(128))  # 640 bytes
PCM_20MS_8K = PCM_20MS_16K[:320]

# The docs' first message, with the headers our NCCO sets (and one more, as an operator's).
CONNECTED: dict[str, Any] = {
    "event": "websocket:connected",
    "content-type": "audio/l16;rate=16000",
    "call_uuid": CALL,
    "token": "t0k3n",
    "language": "en-GB",
}
TWILIO_START = (
    '{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC1","streamSid":"MZ1",'
    '"callSid":"CA1","tracks":["inbound"],"customParameters":{"token":"t"},"mediaFormat":'
    '{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"MZ1"}'
)
OTHER_CARRIERS_FIRST_MESSAGES = [
    TWILIO_START,
    '{"event":"connected","protocol":"Call","version":"1.0.0"}',  # Twilio, Exotel
    '{"event":"connected","version":"1.0.0"}',  # Telnyx
    '{"event":"start","start":{"callId":"c","streamId":"s","mediaFormat":'
    '{"encoding":"audio/x-l16","sampleRate":8000}},"extra_headers":"{}"}',  # Plivo's shape
]

carrier = VonageCarrier()


def text(message: dict[str, Any]) -> str:
    return orjson.dumps(message).decode()


def started(rate: int = 16000) -> StreamStarted:
    event = carrier.decode(text(CONNECTED | {"content-type": f"audio/l16;rate={rate}"}))
    assert isinstance(event, StreamStarted)
    return event


def test_it_is_a_carrier_named_vonage() -> None:
    as_carrier: Carrier = carrier
    as_speaker: Speaker = carrier.speaker(started())
    assert as_carrier.name == "vonage"
    assert as_speaker.echoes_markers is True


# claims ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [8000, 16000])
def test_claims_the_connected_message(rate: int) -> None:
    assert carrier.claims(text(CONNECTED | {"content-type": f"audio/l16;rate={rate}"}))


def test_claims_a_connected_message_without_our_headers() -> None:
    # The docs' own example: the stream is Vonage's even if its headers are not ours.
    assert carrier.claims('{"event":"websocket:connected","content-type":"audio/l16;rate=16000"}')


@pytest.mark.parametrize("message", OTHER_CARRIERS_FIRST_MESSAGES)
def test_does_not_claim_the_other_carriers_first_messages(message: str) -> None:
    assert not carrier.claims(message)


@pytest.mark.parametrize(
    "message",
    [
        "",
        "not json",
        "[]",
        '["websocket:connected"]',
        "null",
        '"websocket:connected"',
        '{"event":"websocket:connected"}',  # no content-type
        '{"event":"websocket:connected","content-type":"audio/pcmu"}',
        '{"event":"websocket:connected","content-type":"audio/l16;rate=24000"}',
        '{"event":"websocket:connected","content-type":16000}',
        '{"event":"websocket:dtmf","digit":"1","duration":260}',
        "\ud800",  # not even encodable text
    ],
)
def test_does_not_claim_junk(message: str) -> None:
    assert not carrier.claims(message)


@pytest.mark.parametrize("message", [PCM_20MS_16K, text(CONNECTED).encode(), b""])
def test_never_claims_a_binary_message(message: bytes) -> None:
    assert not carrier.claims(message)


@given(st.one_of(st.text(), st.binary()))
def test_claims_never_raises(message: str | bytes) -> None:
    assert carrier.claims(message) in (True, False)


# decode: the first message -------------------------------------------------------------------


def test_connected_starts_the_stream_with_the_headers_our_answer_set() -> None:
    event = carrier.decode(text(CONNECTED))
    assert event == StreamStarted(
        call_id=CALL,
        stream_id=CALL,  # Vonage names no stream: the call's uuid stands for it
        token="t0k3n",
        line=LineFormat("pcm16", 16000),
        parameters={"language": "en-GB"},  # the operator's own header: for the log
    )


def test_connected_at_8khz() -> None:
    event = carrier.decode(text(CONNECTED | {"content-type": "audio/l16;rate=8000"}))
    assert isinstance(event, StreamStarted)
    assert event.line == LineFormat("pcm16", 8000)


@pytest.mark.parametrize("token", [None, ""])
def test_connected_without_a_token_has_none(token: str | None) -> None:
    message = {k: v for k, v in CONNECTED.items() if k != "token"}
    if token is not None:
        message["token"] = token
    event = carrier.decode(text(message))
    assert isinstance(event, StreamStarted)
    assert event.token is None
    assert event.call_id == CALL


def test_non_string_headers_are_left_out_of_the_parameters() -> None:
    event = carrier.decode(text(CONNECTED | {"count": 3, "flags": {"a": 1}}))
    assert isinstance(event, StreamStarted)
    assert dict(event.parameters) == {"language": "en-GB"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"call_uuid": None}, "websocket:connected.call_uuid"),
        ({"call_uuid": ""}, "websocket:connected.call_uuid"),
        ({"call_uuid": 42}, "websocket:connected.call_uuid"),
        ({"token": 42}, "websocket:connected.token"),
        ({"content-type": None}, "websocket:connected.content-type"),
        ({"content-type": "audio/l16;rate=24000"}, "websocket:connected.content-type"),
        ({"content-type": "audio/x-mulaw;rate=8000"}, "websocket:connected.content-type"),
    ],
)
def test_a_malformed_connected_names_its_field(change: dict[str, Any], field: str) -> None:
    message = {k: v for k, v in (CONNECTED | change).items() if v is not None}
    with pytest.raises(PhoneFormatError, match=field):
        carrier.decode(text(message))


# decode: audio, DTMF, notify, cleared, unknown -------------------------------------------------


@pytest.mark.parametrize("frame", [PCM_20MS_16K, PCM_20MS_8K, b"\x00\x80"])
def test_binary_messages_are_the_callers_audio(frame: bytes) -> None:
    assert carrier.decode(frame) == Audio(frame)  # in socket order: no sequence


@pytest.mark.parametrize(
    ("frame", "problem"),
    [(PCM_20MS_16K + b"\x01", "641 bytes: not whole 16-bit samples"), (b"", "empty")],
)
def test_a_binary_message_of_half_samples_is_refused(frame: bytes, problem: str) -> None:
    with pytest.raises(PhoneFormatError, match=problem):
        carrier.decode(frame)


@pytest.mark.parametrize("digit", list("0123456789*#"))
def test_dtmf(digit: str) -> None:
    message = {"event": "websocket:dtmf", "digit": digit, "duration": 260}
    assert carrier.decode(text(message)) == Digit(digit)


@pytest.mark.parametrize("digit", [None, "", "12", 5, "x"])
def test_a_malformed_dtmf_names_its_digit(digit: object) -> None:
    message = {"event": "websocket:dtmf", "duration": 260}
    if digit is not None:
        message["digit"] = digit
    with pytest.raises(PhoneFormatError, match=r"websocket:dtmf\.digit"):
        carrier.decode(text(message))


def test_notify_echo_is_the_marker_played() -> None:
    message = {"event": "websocket:notify", "payload": {"name": "resp_1:120:3"}}
    assert carrier.decode(text(message)) == Played("resp_1:120:3")


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"event": "websocket:notify"}, "websocket:notify.payload must be an object"),
        ({"event": "websocket:notify", "payload": "m1"}, "websocket:notify.payload must"),
        ({"event": "websocket:notify", "payload": {}}, "websocket:notify.payload.name"),
        ({"event": "websocket:notify", "payload": {"name": 7}}, "websocket:notify.payload.name"),
    ],
)
def test_a_malformed_notify_names_its_field(message: dict[str, Any], field: str) -> None:
    with pytest.raises(PhoneFormatError, match=field):
        carrier.decode(text(message))


def test_cleared_is_ignored() -> None:
    assert carrier.decode('{"event":"websocket:cleared"}') == Ignored("websocket:cleared")


@pytest.mark.parametrize("event", ["websocket:media:update", "websocket:hangup", "later"])
def test_an_event_added_later_is_unknown(event: str) -> None:
    assert carrier.decode(text({"event": event, "anything": [1, 2]})) == Unknown(event)


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "a JSON list, not an object"),
        ("{}", "event must be a non-empty string"),
        ('{"event": 3}', "event must be a non-empty string"),
        ('{"event": ""}', "event must be a non-empty string"),
    ],
)
def test_a_malformed_text_message_is_refused(message: str, problem: str) -> None:
    with pytest.raises(PhoneFormatError, match=problem):
        carrier.decode(message)


# outbound --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rate", "frame"), [(16000, PCM_20MS_16K), (8000, PCM_20MS_8K)])
def test_media_is_the_frame_itself_as_a_binary_message(rate: int, frame: bytes) -> None:
    speaker = carrier.speaker(started(rate))
    assert speaker.line == LineFormat("pcm16", rate)
    out = speaker.media(frame)
    assert isinstance(out, bytes)
    assert out == frame


@pytest.mark.parametrize("size", [0, 2, 638, 642, 1280])
def test_media_of_anything_but_20_ms_is_a_bug(size: int) -> None:
    speaker = carrier.speaker(started(16000))
    with pytest.raises(ValueError, match="640 bytes"):
        speaker.media(b"\x00" * size)


def test_marker_is_a_notify_with_the_name_in_its_payload() -> None:
    out = carrier.speaker(started()).marker("resp_1:120:3")
    assert out == '{"action":"notify","payload":{"name":"resp_1:120:3"}}'


def test_vonages_echo_of_our_marker_decodes_to_its_name() -> None:
    sent = orjson.loads(carrier.speaker(started()).marker("resp_9:40:1"))
    echo = {"event": "websocket:notify", "payload": sent["payload"]}  # as Vonage echoes it
    assert carrier.decode(text(echo)) == Played("resp_9:40:1")


def test_clear_is_the_documented_text_message() -> None:
    assert carrier.speaker(started()).clear() == '{"action":"clear"}'


def test_without_notify_markers_the_bridge_keeps_time_itself() -> None:
    speaker = VonageCarrier(notify_markers=False).speaker(started())
    assert speaker.echoes_markers is False
    with pytest.raises(RuntimeError, match="notify"):
        speaker.marker("m1")
    assert speaker.clear() == '{"action":"clear"}'


def test_the_speaker_is_frozen() -> None:
    speaker = VonageSpeaker(LineFormat("pcm16", 8000))
    assert speaker.frame_bytes == 320
    with pytest.raises(AttributeError):
        speaker.echoes_markers = False  # type: ignore[misc]


# content types ---------------------------------------------------------------------------------


def test_content_type() -> None:
    assert content_type(16000) == "audio/l16;rate=16000"
    assert content_type(8000) == "audio/l16;rate=8000"
    with pytest.raises(ValueError, match="24000"):
        content_type(24000)


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("audio/l16;rate=16000", LineFormat("pcm16", 16000)),
        ("audio/l16; rate=8000", LineFormat("pcm16", 8000)),
        ("AUDIO/L16;Rate=16000", LineFormat("pcm16", 16000)),
        ("audio/l16;rate=24000", None),
        ("audio/l16;rate=0016000", None),
        ("audio/l16;rate=", None),
        ("audio/l16", None),
        ("audio/l16;bits=16", None),
        ("audio/l16;rate=１６０００", None),  # full-width digits are digits to str.isdigit
        ("audio/pcmu;rate=8000", None),
        (None, None),
    ],
)
def test_parse_content_type(value: object, line: LineFormat | None) -> None:
    assert parse_content_type(value) == line
