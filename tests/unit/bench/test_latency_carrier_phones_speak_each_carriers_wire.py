"""The latency bench's carrier phones speak each carrier's wire as the gateway reads it: their
opening is claimed by their carrier alone, their frames decode to the caller's audio, and they
take the gateway's media for reply audio and answer its markers as the carrier would.

The bench may not import the gateway's edges; its tests check the bench against them."""

from __future__ import annotations

import base64

import orjson
import pytest

from bench.latency.carrier_peers import (
    ExotelPhone,
    PlivoPhone,
    TelnyxPhone,
    VonagePhone,
    pack_plivo_header_value,
)
from gateway.edges.exotel.wire import ExotelCarrier, ExotelSpeaker
from gateway.edges.phone.wire import (
    Audio,
    Carrier,
    Hangup,
    Ignored,
    LineFormat,
    Played,
    StreamStarted,
)
from gateway.edges.plivo.wire import PlivoCarrier, PlivoSpeaker, unpack_header_value
from gateway.edges.telnyx.wire import TelnyxCarrier, TelnyxSpeaker
from gateway.edges.twilio.wire import TwilioCarrier
from gateway.edges.vonage.wire import VonageCarrier, VonageSpeaker

PCMU = LineFormat("pcmu", 8000)
# /phone/media asks each carrier, in this order, to claim the first messages
CARRIERS: tuple[Carrier, ...] = (
    TwilioCarrier(),
    TelnyxCarrier(),
    PlivoCarrier(),
    VonageCarrier(),
    ExotelCarrier(),
)


def started_by(opening: list[str], name: str) -> StreamStarted:
    """The stream's start, as /phone/media finds it: the first message a carrier claims must be
    claimed by ``name`` (and by no carrier asked before it), and its decoding is the start."""
    for message in opening:
        claimed = [carrier for carrier in CARRIERS if carrier.claims(message)]
        if claimed:
            assert [carrier.name for carrier in claimed] == [name]
            started = claimed[0].decode(message)
            assert isinstance(started, StreamStarted)
            return started
    raise AssertionError(f"no carrier claims {opening}")


# -- Telnyx -----------------------------------------------------------------------------------


def test_a_telnyx_phone_opens_as_telnyx_with_its_token_in_client_state() -> None:
    peer = TelnyxPhone("http://gw", token="tok.en-1", call_control_id="v3:c1", stream_id="s1")
    assert peer.url == "ws://gw/phone/media"
    assert isinstance(TelnyxCarrier().decode(peer.opening()[0]), Ignored)  # connected
    started = started_by(peer.opening(), "telnyx")
    assert (started.call_id, started.stream_id, started.token) == ("v3:c1", "s1", "tok.en-1")
    assert started.line == PCMU
    assert started_by(TelnyxPhone("http://gw").opening(), "telnyx").token is None  # auth off


def test_a_telnyx_phone_sends_numbered_ulaw_media() -> None:
    peer = TelnyxPhone("http://gw", stream_id="s1")
    peer.opening()  # connected (unnumbered), then start: sequence number 1
    first, second = peer.encode(b"\xff" * 160), peer.encode(b"\x7f" * 160)
    assert TelnyxCarrier().decode(first) == Audio(b"\xff" * 160, sequence=1)
    assert TelnyxCarrier().decode(second) == Audio(b"\x7f" * 160, sequence=2)
    sent = orjson.loads(second)
    assert sent["sequence_number"] == "3"
    assert sent["media"]["track"] == "inbound"
    assert sent["stream_id"] == "s1"


def test_a_telnyx_phone_hears_media_echoes_marks_and_counts_clears() -> None:
    peer, speaker, carrier = TelnyxPhone("http://gw"), TelnyxSpeaker(PCMU), TelnyxCarrier()
    assert peer.hear(speaker.media(b"\xff" * 160)).audio
    heard = peer.hear(speaker.marker("r1:20:1"))
    assert not heard.audio
    assert [carrier.decode(reply) for reply in heard.replies] == [Played("r1:20:1")]
    assert peer.hear(speaker.clear()) == peer.hear('{"event":"other"}')  # nothing to hear
    assert peer.events == {"telnyx:clear": 1, "telnyx:other": 1}
    assert carrier.decode(peer.goodbye()[0]) == Hangup("stop")


# -- Plivo ------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["", "eyJhbGciOi.J9-x_Z", "é"])
def test_the_plivo_token_is_packed_as_the_gateway_unpacks_it(token: str) -> None:
    packed = pack_plivo_header_value(token)
    assert packed.isalnum() or packed == ""
    assert unpack_header_value(packed) == token


def test_a_plivo_phone_opens_as_plivo_with_its_token_in_extra_headers() -> None:
    peer = PlivoPhone("http://gw", token="a.b-c", call_id="c1", stream_id="s1")
    assert peer.url == "ws://gw/phone/media"
    started = started_by(peer.opening(), "plivo")
    assert (started.call_id, started.stream_id, started.token) == ("c1", "s1", "a.b-c")
    assert started.line == PCMU
    assert not started_by(PlivoPhone("http://gw").opening(), "plivo").token  # auth off: ""


def test_a_plivo_phone_sends_ulaw_media_on_its_stream() -> None:
    peer = PlivoPhone("http://gw", stream_id="s1")
    peer.opening()
    message = peer.encode(b"\xff" * 160)
    assert PlivoCarrier().decode(message) == Audio(b"\xff" * 160)
    sent = orjson.loads(message)
    assert (sent["streamId"], sent["sequenceNumber"], sent["media"]["chunk"]) == ("s1", 2, 1)


def test_a_plivo_phone_hears_play_audio_and_answers_checkpoints_and_clears() -> None:
    peer, carrier = PlivoPhone("http://gw", stream_id="s1"), PlivoCarrier()
    speaker = PlivoSpeaker("s1", PCMU)
    assert peer.hear(speaker.media(b"\xff" * 160)).audio
    heard = peer.hear(speaker.marker("r1:100:2"))
    assert not heard.audio
    assert [carrier.decode(reply) for reply in heard.replies] == [Played("r1:100:2")]
    cleared = peer.hear(speaker.clear())
    assert not cleared.audio
    assert [carrier.decode(reply) for reply in cleared.replies] == [Ignored("clearedAudio")]
    assert peer.events == {"plivo:clearAudio": 1}
    assert peer.goodbye() == []  # Plivo just closes the socket


# -- Vonage -----------------------------------------------------------------------------------


def test_a_vonage_phone_opens_with_websocket_connected_at_16_khz() -> None:
    peer = VonagePhone("http://gw", token="t1", call_uuid="u1")
    assert peer.url == "ws://gw/phone/media"
    started = started_by(peer.opening(), "vonage")
    assert (started.call_id, started.stream_id, started.token) == ("u1", "u1", "t1")
    assert started.line == LineFormat("pcm16", 16000)
    first = orjson.loads(peer.opening()[0])
    assert first["content-type"] == "audio/l16;rate=16000"
    assert started_by(VonagePhone("http://gw").opening(), "vonage").token is None


def test_a_vonage_phone_sends_each_20_ms_frame_as_one_binary_message() -> None:
    frame = bytes(range(256)) * 2 + bytes(128)  # 640 bytes: 20 ms at 16 kHz
    message = VonagePhone("http://gw").encode(frame)
    assert message == frame
    assert VonageCarrier().decode(message) == Audio(frame)


def test_a_vonage_phone_hears_binary_audio_and_echoes_notify() -> None:
    peer, carrier = VonagePhone("http://gw"), VonageCarrier()
    speaker = VonageSpeaker(LineFormat("pcm16", 16000))
    assert peer.hear(speaker.media(bytes(640))).audio
    assert not peer.hear(b"").audio
    heard = peer.hear(speaker.marker("r1:20:1"))
    assert not heard.audio
    assert [carrier.decode(reply) for reply in heard.replies] == [Played("r1:20:1")]
    cleared = peer.hear(speaker.clear())
    assert [carrier.decode(reply) for reply in cleared.replies] == [Ignored("websocket:cleared")]
    assert peer.events == {"vonage:clear": 1}
    assert peer.goodbye() == []  # Vonage just closes the socket


# -- Exotel -----------------------------------------------------------------------------------


def test_an_exotel_phone_opens_as_exotel_with_pcm16_at_8_khz() -> None:
    peer = ExotelPhone("http://gw", token="t1", call_sid="c1", stream_sid="MZ1")
    assert peer.url == "ws://gw/phone/media"
    assert isinstance(ExotelCarrier().decode(peer.opening()[0]), Ignored)  # connected
    started = started_by(peer.opening(), "exotel")
    assert (started.call_id, started.stream_id, started.token) == ("c1", "MZ1", "t1")
    assert started.line == LineFormat("pcm16", 8000)
    media_format = orjson.loads(peer.opening()[1])["start"]["media_format"]
    assert media_format == {"encoding": "audio/x-raw", "sample_rate": "8000", "bit_rate": "16"}
    assert started_by(ExotelPhone("http://gw").opening(), "exotel").token is None


def test_an_exotel_phone_holds_20_ms_frames_until_a_100_ms_chunk_is_whole() -> None:
    peer = ExotelPhone("http://gw", stream_sid="MZ1")
    frames = [bytes([n]) * 320 for n in range(10)]  # 20 ms of PCM16 at 8 kHz each
    sent = [peer.encode(frame) for frame in frames]
    assert [message is not None for message in sent] == [False] * 4 + [True] + [False] * 4 + [True]
    first, second = sent[4], sent[9]
    assert first is not None
    assert second is not None
    assert ExotelCarrier().decode(first) == Audio(b"".join(frames[:5]))  # 1,600 bytes
    assert ExotelCarrier().decode(second) == Audio(b"".join(frames[5:]))
    media = orjson.loads(second)
    assert media["stream_sid"] == "MZ1"
    assert media["media"]["chunk"] == "2"
    assert len(base64.b64decode(media["media"]["payload"])) == 1600


def test_an_exotel_phone_hears_media_echoes_marks_and_says_stop() -> None:
    peer, carrier = ExotelPhone("http://gw", stream_sid="MZ1"), ExotelCarrier()
    speaker = ExotelSpeaker("MZ1", LineFormat("pcm16", 8000))
    assert peer.hear(speaker.media(bytes(3200))).audio  # the gateway's 200 ms chunks
    heard = peer.hear(speaker.marker("r1:200:1"))
    assert not heard.audio
    assert [carrier.decode(reply) for reply in heard.replies] == [Played("r1:200:1")]
    assert not peer.hear(speaker.clear()).audio
    assert peer.events == {"exotel:clear": 1}
    assert carrier.decode(peer.goodbye()[0]) == Hangup("callended")
