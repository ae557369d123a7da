"""What the latency bench says: a synthetic utterance cut into 20 ms frames, in each wire format.

Pure. The fakes decide that a user stopped talking with an energy VAD (10 ms frames judged
speech above -40 dBFS, ``transports.local.vad``), so the utterance must stay well above that in
every 10 ms, in every format it travels in (PCM16 at 8–48 kHz, µ-law 8 kHz). It is a voiced
vowel: a 140 Hz fundamental with harmonics up to 3.4 kHz (telephone band, so µ-law at 8 kHz
keeps it whole) falling off as 1/k, under a 4 Hz syllable envelope of depth 0.4, at about
-20 dBFS RMS; its quietest 10 ms (-24 dBFS) is still 16 dB over the VAD's threshold. The waveform is
computed at each rate from the same formula, so every path hears the same sound. Silence is
digital zero.

The utterance ends as speech does, fading out (a 30 ms half cosine), and its last 5 ms are
silent, so that no 10 ms frame the VAD judges is near its threshold: the last one judged speech
is at about -31 dBFS and the next at about -55 dBFS, in every format and after any of the
gateway's resamplers. An abrupt cut on the frame grid would put the first silent VAD frame at
-32 to -36 dBFS after a resampler's sub-millisecond ringing, which the VAD takes for speech:
10 ms more of silence to wait, so a whole 20 ms frame more in the measurement, for a smear a
real utterance (ending anywhere in a frame, and fading) would almost never pay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gateway.audio.g711 import ulaw_encode

__all__ = [
    "FRAME_MS",
    "WireAudio",
    "WireFormat",
    "frame_bytes",
    "speech_pcm16",
    "utterance",
]

FRAME_MS = 20
F0_HZ = 140.0
TOP_HZ = 3400.0
SYLLABLE_HZ = 4.0
ENVELOPE_DEPTH = 0.4
PEAK = 0.5  # of full scale, before the envelope (the harmonics never sum over 1)
FADE_MS = 30
TAIL_MS = 5

WireFormat = Literal["pcm16", "pcmu"]


def speech_pcm16(ms: int, rate: int) -> bytes:
    """``ms`` of the synthetic vowel, its fade-out and silent tail included, as PCM16
    little-endian mono at ``rate``."""
    if ms < FADE_MS + TAIL_MS:
        raise ValueError(f"an utterance lasts at least {FADE_MS + TAIL_MS} ms: {ms}")
    count = ms * rate // 1000
    t = np.arange(count, dtype=np.float64) / rate
    harmonics = [k for k in range(1, 64) if k * F0_HZ <= min(TOP_HZ, rate / 2 * 0.9)]
    norm = sum(1 / k for k in harmonics)
    wave = sum(np.sin(2 * math.pi * k * F0_HZ * t) / k for k in harmonics) / norm
    envelope = 1 - ENVELOPE_DEPTH * (0.5 - 0.5 * np.cos(2 * math.pi * SYLLABLE_HZ * t))
    tail, fade = TAIL_MS * rate // 1000, FADE_MS * rate // 1000
    envelope[count - tail :] = 0
    step = np.arange(1, fade + 1)
    envelope[count - tail - fade : count - tail] *= 0.5 + 0.5 * np.cos(math.pi * step / fade)
    samples = np.round(np.asarray(wave) * envelope * PEAK * 32767).astype("<i2")
    return samples.tobytes()


def frame_bytes(wire: WireFormat, rate: int) -> int:
    """Bytes of one 20 ms frame on the wire."""
    samples = rate * FRAME_MS // 1000
    return samples if wire == "pcmu" else 2 * samples


@dataclass(frozen=True)
class WireAudio:
    """One utterance as frames on the wire, and the frame of silence that follows it."""

    wire: WireFormat
    rate: int
    speech: tuple[bytes, ...]
    silence: bytes

    @property
    def speech_ms(self) -> int:
        return len(self.speech) * FRAME_MS


def utterance(wire: WireFormat, rate: int, speech_ms: int) -> WireAudio:
    """``speech_ms`` (a multiple of 20) of the vowel in ``wire`` at ``rate``, framed."""
    if speech_ms <= 0 or speech_ms % FRAME_MS:
        raise ValueError(f"speech_ms must be a positive multiple of {FRAME_MS}: {speech_ms}")
    if wire == "pcmu" and rate != 8000:
        raise ValueError("µ-law is 8 kHz")
    pcm = speech_pcm16(speech_ms, rate)
    data = ulaw_encode(pcm) if wire == "pcmu" else pcm
    size = frame_bytes(wire, rate)
    frames = tuple(data[offset : offset + size] for offset in range(0, len(data), size))
    silence = ulaw_encode(bytes(2 * size)) if wire == "pcmu" else bytes(size)
    return WireAudio(wire, rate, frames, silence)
