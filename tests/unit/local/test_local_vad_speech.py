"""The local model's pure audio parts: the energy VAD, word speech and the tone helpers."""

from __future__ import annotations

import math

import pytest

from transports.local.speech import plan_speech, split_words, word_audio_bytes, words_heard
from transports.local.tones import rms_dbfs, silence, tone
from transports.local.vad import EnergyVad, UtteranceEnded, VadEvent, VadSpeechStarted

RATE = 16000


def feed_in_chunks(vad: EnergyVad, pcm: bytes, chunk_bytes: int = 640) -> list[VadEvent]:
    events: list[VadEvent] = []
    for offset in range(0, len(pcm), chunk_bytes):
        events.extend(vad.feed(pcm[offset : offset + chunk_bytes]))
    return events


def test_rms_of_a_tone_silence_and_nothing() -> None:
    # A sine of amplitude a has an RMS of a/√2: 0.3 → about −13.5 dBFS.
    assert rms_dbfs(tone(440, 100, RATE)) == pytest.approx(
        20 * math.log10(0.3 / math.sqrt(2)), 0.01
    )
    assert rms_dbfs(silence(20, RATE)) == -math.inf
    assert rms_dbfs(b"") == -math.inf


@pytest.mark.parametrize("chunk_bytes", [640, 333, 10_000])
def test_tone_then_silence_is_one_utterance(chunk_bytes: int) -> None:
    vad = EnergyVad(RATE)
    events = feed_in_chunks(vad, silence(100, RATE) + tone(440, 500, RATE) + silence(400, RATE))
    assert events == [VadSpeechStarted(), UtteranceEnded(500, speech_detected=True)]


def test_speech_starts_after_60_ms_and_ends_after_300_ms_of_silence() -> None:
    vad = EnergyVad(RATE)
    assert vad.feed(tone(440, 50, RATE)) == []
    assert vad.feed(tone(440, 10, RATE)) == [VadSpeechStarted()]
    assert vad.speaking
    assert vad.feed(silence(290, RATE)) == []
    assert vad.feed(silence(10, RATE)) == [UtteranceEnded(60, speech_detected=True)]
    assert not vad.speaking


def test_short_pauses_stay_inside_the_utterance() -> None:
    vad = EnergyVad(RATE)
    pcm = tone(440, 200, RATE) + silence(200, RATE) + tone(300, 100, RATE) + silence(300, RATE)
    assert vad.feed(pcm) == [VadSpeechStarted(), UtteranceEnded(500, speech_detected=True)]


def test_a_click_is_not_speech() -> None:
    vad = EnergyVad(RATE)
    assert vad.feed(tone(440, 40, RATE) + silence(500, RATE)) == []
    assert vad.commit() == UtteranceEnded(540, speech_detected=False)


def test_commit_ends_speech_at_once_and_empty_commit_is_nothing() -> None:
    vad = EnergyVad(RATE)
    assert vad.feed(tone(440, 200, RATE)) == [VadSpeechStarted()]
    assert vad.commit() == UtteranceEnded(200, speech_detected=True)
    assert vad.commit() is None


def test_clear_drops_everything() -> None:
    vad = EnergyVad(RATE)
    vad.feed(tone(440, 200, RATE) + b"\x00")
    vad.clear()
    assert not vad.speaking
    assert vad.commit() is None


def test_words_keep_their_spaces() -> None:
    assert split_words("You said:  hi there") == ["You", " said:", "  hi", " there"]
    assert split_words("") == []


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
def test_each_word_is_100_ms_in_20_ms_chunks(rate: int) -> None:
    words = plan_speech("one two", rate)
    assert [w.delta for w in words] == ["one", " two"]
    for word in words:
        assert len(word.chunks) == 5
        assert {len(chunk) for chunk in word.chunks} == {2 * rate // 50}
        assert sum(len(chunk) for chunk in word.chunks) == word_audio_bytes(rate)
    assert plan_speech("one two", rate) == words  # deterministic
    assert words[0].chunks[0] != words[1].chunks[0]  # the pitch depends on the word


def test_words_heard_counts_finished_tones() -> None:
    assert [words_heard(ms) for ms in (0, 79, 80, 179, 180, 1000)] == [0, 0, 1, 1, 2, 10]
