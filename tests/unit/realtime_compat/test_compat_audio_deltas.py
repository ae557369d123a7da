"""Assistant audio frames become ``response.output_audio.delta`` events whose base64 decodes
back to exactly the PCM sent, attributed to the response speaking now."""

from __future__ import annotations

import base64
import os

from compat_kit import SPEECH_STARTED, done, sdk_parse_all, started, translator, types

from gateway.edges.realtime.client_wire import InputAudioAppend, decode_client_event


def test_audio_deltas_round_trip_through_base64() -> None:
    compat = translator()
    compat.on_event(started())
    frames = [os.urandom(960) for _ in range(5)] + [os.urandom(2)]
    deltas = [event for pcm in frames for event in compat.on_audio(pcm)]
    deltas = [event for event in deltas if event["type"] == "response.output_audio.delta"]
    assert b"".join(base64.b64decode(event["delta"]) for event in deltas) == b"".join(frames)
    sdk_parse_all(deltas)


def test_the_first_frame_opens_the_item_and_its_audio_part() -> None:
    compat = translator()
    compat.on_event(started())
    events = compat.on_audio(b"\x01\x00" * 480)
    assert types(events) == [
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        "response.output_audio.delta",
    ]
    assert events[2]["part"] == {"type": "audio", "transcript": ""}
    assert types(compat.on_audio(b"\x01\x00" * 480)) == ["response.output_audio.delta"]


def test_audio_outside_a_response_is_dropped() -> None:
    compat = translator()
    assert compat.on_audio(b"\x00\x00" * 100) == []
    compat.on_event(started())
    compat.on_audio(b"\x00\x00" * 100)
    compat.on_event(done("completed"))
    assert compat.on_audio(b"\x00\x00" * 100) == []
    assert compat.on_audio(b"") == []


def test_audio_goes_to_the_response_started_last() -> None:
    compat = translator()
    first = compat.on_event(started("r1"))[0]["response"]["id"]
    second = compat.on_event(started("r2"))[0]["response"]["id"]  # e.g. a holding line
    delta = compat.on_audio(b"\x00\x00" * 10)[-1]
    assert delta["response_id"] == second != first


def test_appended_client_audio_decodes_to_the_same_bytes() -> None:
    pcm = os.urandom(480) + b"\x00\x00"
    frame = b'{"type": "input_audio_buffer.append", "audio": "%s"}' % base64.b64encode(pcm)
    event = decode_client_event(frame)
    assert event == InputAudioAppend(audio=pcm, encoded=base64.b64encode(pcm).decode())


def test_the_upstreams_base64_is_the_delta_as_is() -> None:
    compat = translator()
    compat.on_event(started())
    # "AAB=" decodes to two zero bytes with a stray bit: only passing it on keeps the "B"
    delta = compat.on_audio(b"\x00\x00", "AAB=")[-1]
    assert delta["delta"] == "AAB="
    assert compat.on_audio(b"\x00\x00")[-1]["delta"] == "AAA="


def test_no_audio_of_an_interrupted_reply_is_needed_after_speech_started() -> None:
    compat = translator()
    compat.on_event(started())
    compat.on_audio(b"\x00\x00" * 10)
    compat.on_event(SPEECH_STARTED)
    compat.on_event(done("interrupted"))
    assert compat.on_audio(b"\x00\x00" * 10) == []
