"""What a new Gemini Live connection is given of the user's audio (``Uplink``): what came while
offline, and before it what was sent since the service last saved the session or answered the
user (a resumed session does not have it)."""

from __future__ import annotations

import base64

import orjson

from transports.gemini_live.uplink import MIN_APPEND_BYTES, OFFLINE_AUDIO_BYTES, Uplink


def sent(frames: list[str]) -> bytes:
    return b"".join(
        base64.b64decode(orjson.loads(f)["realtimeInput"]["audio"]["data"]) for f in frames
    )


def test_blocks_of_at_least_twenty_milliseconds_go_out() -> None:
    uplink = Uplink()
    assert uplink.audio(b"\x01" * (MIN_APPEND_BYTES // 2), connected=True) == []
    frames = uplink.audio(b"\x02" * (MIN_APPEND_BYTES // 2), connected=True)
    assert sent(frames) == b"\x01" * (MIN_APPEND_BYTES // 2) + b"\x02" * (MIN_APPEND_BYTES // 2)


def test_audio_sent_since_the_last_save_is_given_again_before_the_offline_audio() -> None:
    uplink = Uplink()
    uplink.audio(b"\x01" * MIN_APPEND_BYTES, connected=True)
    uplink.saved()  # a resumable handle: the service holds it
    uplink.audio(b"\x02" * MIN_APPEND_BYTES, connected=True)
    uplink.connection_lost()
    uplink.audio(b"\x03" * MIN_APPEND_BYTES, connected=False)
    again = sent(uplink.for_new_connection())
    assert again == b"\x02" * MIN_APPEND_BYTES + b"\x03" * MIN_APPEND_BYTES
    assert uplink.for_new_connection() == []  # given once


def test_a_cleared_utterance_is_not_given_again() -> None:
    uplink = Uplink()
    uplink.audio(b"\x01" * MIN_APPEND_BYTES, connected=True)
    uplink.clear()
    uplink.connection_lost()
    assert uplink.for_new_connection() == []


def test_what_is_given_again_is_bounded() -> None:
    uplink = Uplink()
    for _ in range(OFFLINE_AUDIO_BYTES // MIN_APPEND_BYTES + 50):
        uplink.audio(b"\x01" * MIN_APPEND_BYTES, connected=True)
    uplink.connection_lost()
    assert len(sent(uplink.for_new_connection())) == OFFLINE_AUDIO_BYTES
