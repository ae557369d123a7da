"""PlaybackTracker: exact 20 ms framing, mark cadence and names, played position, barge-in."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.edges.phone.playback import Frame, MarkOut, PlaybackTracker, parse_mark_name

SILENCE = b"\xff"


def audio(size: int, seed: int = 0) -> bytes:
    """Distinct µ-law bytes without 0xFF, so padding is told apart from audio."""
    return bytes((seed + i) % 255 for i in range(size))


def drain(tracker: PlaybackTracker) -> list[Frame | MarkOut]:
    return tracker.next_items(10_000)


def frames_of(items: list[Frame | MarkOut]) -> list[Frame]:
    return [item for item in items if isinstance(item, Frame)]


def marks_of(items: list[Frame | MarkOut]) -> list[str]:
    return [item.name for item in items if isinstance(item, MarkOut)]


def shape(items: list[Frame | MarkOut]) -> str:
    """``F`` per frame, ``M`` per mark: the order of what is sent."""
    return "".join("F" if isinstance(item, Frame) else "M" for item in items)


# --- framing --------------------------------------------------------------------------------


def test_whole_frames_go_out_and_the_partial_one_waits_for_end() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(400))
    assert tracker.pending_frames == 2
    items = drain(tracker)
    assert [f.audio for f in frames_of(items)] == [audio(400)[:160], audio(400)[160:320]]
    assert tracker.pending_frames == 0
    assert drain(tracker) == []  # 80 bytes held, not padded yet
    tracker.end("r1")
    assert tracker.pending_frames == 1
    last = drain(tracker)
    assert shape(last) == "FM"
    assert frames_of(last)[0].audio == audio(400)[320:] + SILENCE * 80


def test_audio_of_a_whole_number_of_frames_gets_no_padding() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(320))
    tracker.end("r1")
    items = drain(tracker)
    assert shape(items) == "FFM"
    assert b"".join(f.audio for f in frames_of(items)) == audio(320)


def test_frames_carry_their_response() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160))
    assert drain(tracker) == [Frame("r1", audio(160))]


def test_other_frame_sizes() -> None:
    tracker = PlaybackTracker(frame_bytes=80, mark_every_frames=2)
    tracker.add("r", audio(250))
    tracker.end("r")
    items = drain(tracker)
    assert shape(items) == "FFMFFM"
    assert marks_of(items) == ["r:20:0", "r:31:1"]  # 250 bytes = 31.25 ms, floored
    assert b"".join(f.audio for f in frames_of(items)) == audio(250) + SILENCE * 70


# --- marks ----------------------------------------------------------------------------------


def test_a_mark_every_five_frames_and_after_the_last() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160 * 12))
    tracker.end("r1")
    items = drain(tracker)
    assert shape(items) == "FFFFFMFFFFFMFFM"
    assert marks_of(items) == ["r1:100:0", "r1:200:1", "r1:240:2"]


def test_no_extra_mark_when_the_last_frame_completes_a_cadence() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160 * 10))
    tracker.end("r1")
    assert marks_of(drain(tracker)) == ["r1:100:0", "r1:200:1"]


def test_the_last_mark_counts_audio_not_padding() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(1000))  # 125 ms: six frames and 40 bytes
    tracker.end("r1")
    items = drain(tracker)
    assert shape(items) == "FFFFFMFFM"
    assert marks_of(items) == ["r1:100:0", "r1:125:1"]


def test_end_after_everything_was_sent_still_sends_the_final_mark() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160 * 3))
    assert shape(drain(tracker)) == "FFF"
    tracker.end("r1")
    assert tracker.pending_frames == 0
    assert tracker.next_items(0) == [MarkOut("r1:60:0")]


def test_a_response_without_audio_sends_nothing() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", b"")
    tracker.end("r1")
    tracker.end("r2")
    assert drain(tracker) == []


def test_max_frames_limits_frames_and_the_mark_right_after_comes_along() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160 * 7))
    tracker.end("r1")
    first = tracker.next_items(5)
    assert shape(first) == "FFFFFM"
    assert tracker.pending_frames == 2
    assert shape(tracker.next_items(1)) == "F"
    assert shape(tracker.next_items(1)) == "FM"
    assert tracker.next_items(1) == []
    with pytest.raises(ValueError, match="max_frames"):
        tracker.next_items(-1)


@pytest.mark.parametrize("response_id", ["r1", "resp:with:colons", "", "é 1"])
def test_mark_names_parse_back(response_id: str) -> None:
    tracker = PlaybackTracker()
    tracker.add(response_id, audio(160 * 6))
    tracker.end(response_id)
    names = marks_of(drain(tracker))
    assert [parse_mark_name(name) for name in names] == [
        (response_id, 100, 0),
        (response_id, 120, 1),
    ]
    assert parse_mark_name("no-colons") is None
    assert parse_mark_name("r:x:1") is None


# --- played position ------------------------------------------------------------------------


def test_echoes_give_the_played_position_and_confirm_earlier_marks() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160 * 12))
    tracker.end("r1")
    names = marks_of(drain(tracker))
    assert tracker.unconfirmed_ms == 240
    assert tracker.echoed(names[0]) == ("r1", 100)
    assert tracker.unconfirmed_ms == 140
    # The last echo confirms the one before it too (Twilio echoes in order).
    assert tracker.echoed(names[2]) == ("r1", 240)
    assert tracker.unconfirmed_ms == 0
    assert tracker.echoed(names[1]) is None
    assert tracker.echoed(names[2]) is None  # once only


def test_unknown_and_not_yet_sent_marks_are_none() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160 * 10))
    assert tracker.echoed("r1:100:0") is None  # queued, not sent
    tracker.next_items(5)
    assert tracker.echoed("nonsense") is None
    assert tracker.echoed("r1:200:1") is None
    assert tracker.echoed("r1:100:0") == ("r1", 100)


def test_unconfirmed_counts_frames_sent_after_the_last_mark() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160 * 7))
    items = tracker.next_items(7)
    assert shape(items) == "FFFFFMFF"
    assert tracker.unconfirmed_ms == 140
    tracker.echoed(marks_of(items)[0])
    assert tracker.unconfirmed_ms == 40


def test_two_responses_back_to_back_keep_separate_positions() -> None:
    tracker = PlaybackTracker()
    tracker.add("a", audio(160 * 6))
    tracker.end("a")
    tracker.add("b", audio(160 * 3, seed=7))
    tracker.end("b")
    items = drain(tracker)
    assert shape(items) == "FFFFFMFMFFFM"
    assert marks_of(items) == ["a:100:0", "a:120:1", "b:60:2"]
    assert [f.response_id for f in frames_of(items)] == ["a"] * 6 + ["b"] * 3
    assert tracker.echoed("a:120:1") == ("a", 120)
    assert tracker.echoed("b:60:2") == ("b", 60)


def test_audio_of_another_response_ends_the_current_one_first() -> None:
    tracker = PlaybackTracker()
    tracker.add("a", audio(200))
    tracker.add("b", audio(160, seed=3))
    items = drain(tracker)
    assert shape(items) == "FFMF"
    assert marks_of(items) == ["a:25:0"]
    assert frames_of(items)[1].audio == audio(200)[160:] + SILENCE * 120
    assert frames_of(items)[2] == Frame("b", audio(160, seed=3))
    tracker.end("a")  # already ended: nothing more
    assert drain(tracker) == []


def test_audio_after_end_is_a_caller_error() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(10))
    tracker.end("r1")
    with pytest.raises(ValueError, match="already ended"):
        tracker.add("r1", audio(10))


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        PlaybackTracker(frame_bytes=0)
    with pytest.raises(ValueError, match="positive"):
        PlaybackTracker(mark_every_frames=0)


# --- barge-in -------------------------------------------------------------------------------


def test_clear_drops_the_queue_and_ignores_late_audio_of_the_interrupted_reply() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(160 * 12 + 50))
    sent = tracker.next_items(6)
    assert tracker.echoed(marks_of(sent)[0]) == ("r1", 100)
    assert tracker.clear() == "r1"
    assert tracker.pending_frames == 0
    assert tracker.unconfirmed_ms == 0
    assert drain(tracker) == []
    # The rest of the interrupted reply still streams in: none of it plays.
    tracker.add("r1", audio(800))
    tracker.end("r1")
    assert tracker.pending_frames == 0
    assert drain(tracker) == []
    # Twilio echoes the marks it dropped: stale.
    assert tracker.echoed("r1:200:1") is None
    # The next reply plays from its own start.
    tracker.add("r2", audio(160 * 5))
    assert marks_of(drain(tracker)) == ["r2:100:2"]


def test_clear_with_nothing_playing_is_none() -> None:
    tracker = PlaybackTracker()
    assert tracker.clear() is None
    tracker.add("r1", audio(320))
    tracker.end("r1")
    names = marks_of(drain(tracker))
    tracker.echoed(names[-1])
    assert tracker.clear() is None  # all of r1 was played
    tracker.add("r2", audio(160))  # not ignored
    assert tracker.pending_frames == 1


def test_clear_names_a_reply_whose_audio_is_only_sent_or_only_held() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(320))
    tracker.end("r1")
    drain(tracker)
    assert tracker.clear() == "r1"  # sent, not confirmed
    tracker.add("r2", audio(100))
    assert tracker.clear() == "r2"  # only a partial frame held
    tracker.add("r2", audio(400))
    assert tracker.pending_frames == 0


def test_clear_names_the_latest_reply_when_several_are_unplayed() -> None:
    tracker = PlaybackTracker()
    tracker.add("a", audio(320))
    tracker.end("a")
    tracker.next_items(1)
    tracker.add("b", audio(320))
    assert tracker.clear() == "b"
    tracker.add("b", audio(320))
    assert tracker.pending_frames == 0


def test_a_different_reply_lifts_the_ignore() -> None:
    tracker = PlaybackTracker()
    tracker.add("r1", audio(320))
    tracker.clear()
    tracker.add("r2", audio(160))
    with pytest.raises(ValueError, match="already ended"):
        tracker.add("r1", audio(160))


# --- properties -----------------------------------------------------------------------------

payloads = st.lists(st.integers(0, 700), min_size=1, max_size=4)


@st.composite
def split_of(draw: st.DrawFn, size: int) -> list[int]:
    cuts = sorted(draw(st.lists(st.integers(0, size), max_size=8)))
    bounds = [0, *cuts, size]
    return [b - a for a, b in itertools.pairwise(bounds)]


@given(sizes=payloads, data=st.data(), every=st.integers(1, 6))
def test_any_split_into_adds_yields_the_same_items(
    sizes: list[int], data: st.DataObject, every: int
) -> None:
    responses = [(f"r{n}", audio(size, seed=n)) for n, size in enumerate(sizes)]

    def run(split: bool) -> list[Frame | MarkOut]:
        tracker = PlaybackTracker(mark_every_frames=every)
        for response_id, pcm in responses:
            parts = data.draw(split_of(len(pcm))) if split else [len(pcm)]
            offset = 0
            for part in parts:
                tracker.add(response_id, pcm[offset : offset + part])
                offset += part
            tracker.end(response_id)
        return drain(tracker)

    whole = run(split=False)
    assert run(split=True) == whole
    for response_id, pcm in responses:
        frames = [f.audio for f in frames_of(whole) if f.response_id == response_id]
        assert all(len(frame) == 160 for frame in frames)
        padding = -len(pcm) % 160
        assert b"".join(frames) == pcm + SILENCE * padding
        parsed = [parse_mark_name(name) for name in marks_of(whole)]
        ends = [end for rid, end, _ in filter(None, parsed) if rid == response_id]
        assert ends == sorted(ends)
        assert ends[-1:] == ([len(pcm) // 8] if pcm else [])


@given(sizes=payloads, batches=st.lists(st.integers(0, 4), min_size=1, max_size=30))
def test_sending_in_any_batches_keeps_the_order(sizes: list[int], batches: list[int]) -> None:
    def tracker_with_audio() -> PlaybackTracker:
        tracker = PlaybackTracker()
        for n, size in enumerate(sizes):
            tracker.add(f"r{n}", audio(size, seed=n))
            tracker.end(f"r{n}")
        return tracker

    batched = tracker_with_audio()
    items: list[Frame | MarkOut] = []
    for batch in batches:
        got = batched.next_items(batch)
        assert len(frames_of(got)) <= batch
        items += got
    items += drain(batched)
    assert items == drain(tracker_with_audio())
    # Echoing every mark in turn gives each one's position and leaves nothing unconfirmed.
    for name in marks_of(items):
        parsed = parse_mark_name(name)
        assert parsed is not None
        assert batched.echoed(name) == parsed[:2]
    assert batched.unconfirmed_ms == 0
