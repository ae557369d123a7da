"""Uplink: batching, the uncommitted tail resent after a drop (bounded by what the server still
holds under VAD), the bounded offline buffer."""

from __future__ import annotations

from transports.openai_realtime.uplink import (
    MIN_APPEND_BYTES,
    OFFLINE_AUDIO_BYTES,
    REPLAY_APPEND_BYTES,
    UNCOMMITTED_TAIL_BYTES,
    VAD_DETECTION_MARGIN_MS,
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


SECOND = 1000 * (MIN_APPEND_BYTES // 20)  # bytes of one second of 24 kHz PCM16


def _seconds(up: Uplink, n: float) -> None:
    for _ in range(int(n * 50)):
        up.take(b"s" * MIN_APPEND_BYTES)


def _held_after_a_drop(up: Uplink) -> int:
    up.lost()
    return sum(map(len, up.replay()))


def test_under_server_vad_the_tail_between_utterances_is_the_padding_and_a_margin() -> None:
    up = Uplink()
    up.server_vad(300)
    _seconds(up, 8)  # silence: the server keeps only its prefix padding of it
    quiet = (300 + VAD_DETECTION_MARGIN_MS) * SECOND // 1000
    assert _held_after_a_drop(up) == quiet


def test_under_server_vad_an_utterance_is_kept_from_speech_started_to_the_commit() -> None:
    up = Uplink()
    up.server_vad(300)
    _seconds(up, 3)
    up.speech_started()
    _seconds(up, 4)
    quiet = (300 + VAD_DETECTION_MARGIN_MS) * SECOND // 1000
    assert _held_after_a_drop(up) == quiet + 4 * SECOND


def test_after_a_commit_the_tail_is_bounded_to_the_quiet_limit_again() -> None:
    up = Uplink()
    up.server_vad(0)
    up.speech_started()
    _seconds(up, 4)
    up.committed()
    _seconds(up, 4)
    assert _held_after_a_drop(up) == VAD_DETECTION_MARGIN_MS * SECOND // 1000


def test_without_vad_or_with_an_unknown_padding_every_uncommitted_byte_is_kept() -> None:
    up = Uplink()
    up.server_vad(300)
    up.server_vad(None)  # turn detection switched off (or semantic VAD)
    _seconds(up, 8)
    assert _held_after_a_drop(up) == 8 * SECOND


def test_replayed_audio_is_an_utterance_in_progress_until_the_next_commit() -> None:
    up = Uplink()
    up.server_vad(300)
    up.speech_started()
    _seconds(up, 5)
    up.lost()
    assert sum(map(len, up.replay())) == 5 * SECOND
    up.server_vad(300)  # the new session's session.updated, before the server hears speech
    assert _held_after_a_drop(up) == 5 * SECOND  # dropped again: the utterance is sent again
