"""The latency bench's utterance (what the fakes' VAD hears) and its turn bookkeeping."""

from __future__ import annotations

import pytest

from bench.latency.audio import frame_bytes, speech_pcm16, utterance
from bench.latency.turns import TurnSchedule, TurnTracker
from gateway.audio.g711 import ulaw_decode
from transports.local.tones import rms_dbfs
from transports.local.vad import EnergyVad, UtteranceEnded, VadSpeechStarted


@pytest.mark.parametrize("rate", [16000, 24000, 48000])
def test_an_utterance_is_whole_20_ms_frames_then_a_silent_frame(rate: int) -> None:
    audio = utterance("pcm16", rate, 300)
    assert len(audio.speech) == 15
    assert audio.speech_ms == 300
    assert {len(frame) for frame in audio.speech} == {frame_bytes("pcm16", rate)}
    assert audio.silence == bytes(frame_bytes("pcm16", rate))


def test_the_phone_utterance_is_mu_law_at_8_khz() -> None:
    audio = utterance("pcmu", 8000, 300)
    assert {len(frame) for frame in audio.speech} == {160}
    assert audio.silence == b"\xff" * 160  # µ-law's zero
    assert rms_dbfs(ulaw_decode(b"".join(audio.speech))) > -25
    with pytest.raises(ValueError, match="µ-law is 8 kHz"):
        utterance("pcmu", 16000, 300)
    with pytest.raises(ValueError, match="multiple of 20"):
        utterance("pcm16", 16000, 310)


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
def test_every_10_ms_is_far_from_the_vad_threshold(rate: int) -> None:
    """Speech well over -40 dBFS until it fades, then clearly silent: a filter's ringing
    cannot move the VAD's end of speech by a frame."""
    pcm = speech_pcm16(300, rate)
    step = 2 * rate // 100
    levels = [rms_dbfs(pcm[offset : offset + step]) for offset in range(0, len(pcm), step)]
    assert min(levels[:-2]) > -35
    assert levels[-1] < -50


def test_the_fakes_vad_hears_one_utterance_ending_where_it_fades() -> None:
    rate = 24000
    vad = EnergyVad(rate, end_silence_ms=500)
    events = vad.feed(speech_pcm16(300, rate) + bytes(2 * rate // 2))
    assert isinstance(events[0], VadSpeechStarted)
    ended = events[1]
    assert isinstance(ended, UtteranceEnded)
    assert ended.duration_ms == 290  # the last 10 ms is the fade's end and the silent tail


def test_the_schedule_puts_the_speech_at_the_start_of_each_slot() -> None:
    schedule = TurnSchedule(turns=3, warmup=1, slot_ms=1000, speech_ms=300)
    assert schedule.frames_per_slot == 50
    assert schedule.total_frames == 200
    assert schedule.duration_s == pytest.approx(4.0)
    assert [schedule.speech_index(frame) for frame in (0, 14, 15, 49, 50)] == [0, 14, None, None, 0]
    assert schedule.is_last_speech(14)
    assert schedule.is_last_speech(64)
    assert not schedule.is_last_speech(15)
    assert schedule.turn_of(149) == 2
    with pytest.raises(ValueError, match="shorter than slot_ms"):
        TurnSchedule(turns=3, warmup=0, slot_ms=1000, speech_ms=1000)
    with pytest.raises(ValueError, match="multiples of 20"):
        TurnSchedule(turns=3, warmup=0, slot_ms=1010, speech_ms=300)


def _turn(tracker: TurnTracker, index: int, start: float, audio: list[float]) -> None:
    tracker.speech_started(index, start)
    tracker.speech_ended(index, start + 0.28)
    for at in audio:
        tracker.audio(at)


def test_a_turns_latency_runs_from_its_last_speech_frame_to_the_first_reply_audio() -> None:
    tracker = TurnTracker()
    _turn(tracker, 0, 0.0, [0.8, 0.82, 0.84])
    _turn(tracker, 1, 1.3, [2.09, 2.2])
    assert tracker.latencies_s(0) == pytest.approx([0.52, 0.51])
    assert tracker.latencies_s(1) == pytest.approx([0.51])
    counts = tracker.counts(0)
    assert counts["measured"] == 2
    assert counts["missed"] == counts["overlapped"] == counts["stray_audio_messages"] == 0
    assert counts["min_quiet_ms"] == pytest.approx(460.0)


def test_a_turn_without_reply_is_missed_and_the_next_is_not_measured() -> None:
    tracker = TurnTracker()
    _turn(tracker, 0, 0.0, [])
    _turn(tracker, 1, 1.3, [1.7])  # could be turn 0's late reply
    _turn(tracker, 2, 2.6, [3.1])
    assert tracker.latencies_s(0) == [None, None, pytest.approx(0.22)]
    counts = tracker.counts(0)
    assert (counts["missed"], counts["overlapped"], counts["measured"]) == (1, 1, 1)


def test_a_reply_still_playing_when_the_next_turn_speaks_spoils_that_turn() -> None:
    tracker = TurnTracker(quiet_s=0.1)
    _turn(tracker, 0, 0.0, [0.8, 1.25])
    _turn(tracker, 1, 1.3, [1.8])  # speech began 50 ms after the last audio
    tracker.speech_started(2, 2.6)
    tracker.audio(2.7)  # while the user speaks
    tracker.speech_ended(2, 2.88)
    tracker.audio(3.4)
    assert tracker.latencies_s(0) == [pytest.approx(0.52), None, None]
    assert tracker.counts(0)["overlapped"] == 2
    assert tracker.stray == 1


def test_audio_before_any_turn_is_stray_and_an_end_needs_its_start() -> None:
    tracker = TurnTracker()
    tracker.audio(0.1)
    assert tracker.stray == 1
    with pytest.raises(ValueError, match="without its start"):
        tracker.speech_ended(0, 0.3)
