"""How the local model "speaks": words, one tone per word, and 20 ms audio chunks.

Pure and deterministic: the same text at the same rate always gives the same bytes. Each word is
``WORD_TONE_MS`` of a sine whose pitch is derived from the word (a CRC, not ``hash()``, which is
salted per process) followed by ``WORD_GAP_MS`` of silence, so a reply of ``n`` words is exactly
``n * WORD_MS`` of audio and tests can compute its size.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from transports.local.tones import n_samples, silence, tone

__all__ = [
    "CHUNK_MS",
    "WORD_GAP_MS",
    "WORD_MS",
    "WORD_TONE_MS",
    "SpokenWord",
    "plan_speech",
    "split_words",
    "word_audio_bytes",
    "word_frequency_hz",
    "words_heard",
]

WORD_TONE_MS = 80
WORD_GAP_MS = 20
WORD_MS = WORD_TONE_MS + WORD_GAP_MS
CHUNK_MS = 20

_WORD = re.compile(r"\s*\S+")


@dataclass(frozen=True, slots=True)
class SpokenWord:
    # The word with the whitespace before it, so that the deltas join back into the text.
    delta: str
    chunks: tuple[bytes, ...]


def split_words(text: str) -> list[str]:
    """Word deltas of ``text``: ``"Hi there"`` → ``["Hi", " there"]``."""
    return _WORD.findall(text)


def word_frequency_hz(word: str) -> float:
    """A pitch between 220 and 879 Hz that depends only on the word."""
    return 220.0 + zlib.crc32(word.strip().lower().encode()) % 660


def word_audio_bytes(rate: int) -> int:
    """Bytes of audio one word produces at ``rate``."""
    return 2 * (n_samples(WORD_TONE_MS, rate) + n_samples(WORD_GAP_MS, rate))


def _chunked(pcm: bytes, rate: int) -> tuple[bytes, ...]:
    size = 2 * max(1, n_samples(CHUNK_MS, rate))
    return tuple(pcm[offset : offset + size] for offset in range(0, len(pcm), size))


def plan_speech(text: str, rate: int) -> list[SpokenWord]:
    words = []
    for delta in split_words(text):
        pcm = tone(word_frequency_hz(delta), WORD_TONE_MS, rate, fade_ms=4)
        words.append(SpokenWord(delta, _chunked(pcm + silence(WORD_GAP_MS, rate), rate)))
    return words


def words_heard(played_ms: int) -> int:
    """How many words a listener heard after ``played_ms``: a word counts once its tone ended."""
    if played_ms < WORD_TONE_MS:
        return 0
    return (played_ms - WORD_TONE_MS) // WORD_MS + 1
