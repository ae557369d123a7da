"""Uplink: batching, the uncommitted tail resent after a drop, the bounded offline buffer."""

from __future__ import annotations

from transports.openai_realtime.uplink import (
    MIN_APPEND_BYTES,
    OFFLINE_AUDIO_BYTES,
    REPLAY_APPEND_BYTES,
    UNCOMMITTED_TAIL_BYTES,
    Uplink,
)


def test_whole_frames_go_as_they_are_and_pieces_are_gathered() -> None:
    up = Uplink()
    frame = b"\x01" * MIN_APPEND_BYTES
    assert up.take(frame) is frame
    assert up.take(b"\x02" * 100) is None
    assert up.flush() == b"\x02" * 100
    assert up.flush() is None
    assert up.uncommitted == MIN_APPEND_BYTES + 100


def test_a_drop_mid_utterance_resends_what_the_server_held_then_the_offline_audio() -> None:
    up = Uplink()
    up.take(b"a" * MIN_APPEND_BYTES)
    up.committed()  # the server committed the first utterance: it is not resent
    up.take(b"b" * MIN_APPEND_BYTES)
    up.take(b"c" * 10)  # gathered, not sent yet
    up.lost()
    up.keep_offline(b"d" * 10)
    audio = b"".join(up.replay())
    assert audio == b"b" * MIN_APPEND_BYTES + b"c" * 10 + b"d" * 10
    assert up.uncommitted == len(audio)  # the new session holds it uncommitted again


def test_offline_audio_is_bounded_to_the_newest() -> None:
    up = Uplink()
    up.keep_offline(b"o" * OFFLINE_AUDIO_BYTES)
    up.keep_offline(b"n" * 1000)
    chunks = up.replay()
    assert sum(map(len, chunks)) == OFFLINE_AUDIO_BYTES
    assert chunks[-1].endswith(b"n" * 1000)
    assert max(map(len, chunks)) == REPLAY_APPEND_BYTES


def test_the_uncommitted_tail_is_bounded() -> None:
    up = Uplink()
    for _ in range(UNCOMMITTED_TAIL_BYTES // MIN_APPEND_BYTES + 50):
        up.take(b"x" * MIN_APPEND_BYTES)
    up.lost()
    assert sum(map(len, up.replay())) <= UNCOMMITTED_TAIL_BYTES


def test_clear_forgets_everything() -> None:
    up = Uplink()
    up.take(b"x" * 10)
    up.keep_offline(b"y" * 10)
    up.clear()
    up.lost()
    assert up.replay() == []
    assert up.uncommitted == 0
