"""Tiny PCM16 helpers for the local model: a tone, silence and a loudness measure.

Private to ``transports/local`` on purpose: the local model must stay exact and predictable
whatever happens to the gateway's own audio package, so it carries the few lines it needs.
PCM16 here is signed 16-bit little-endian mono, the format every transport speaks.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["FULL_SCALE", "n_samples", "pcm_duration_ms", "rms_dbfs", "silence", "tone"]

FULL_SCALE = 32768.0
_PCM16 = np.dtype("<i2")


def n_samples(ms: int, rate: int) -> int:
    """Whole samples in ``ms`` milliseconds at ``rate`` Hz (rounded down)."""
    return rate * ms // 1000


def pcm_duration_ms(n_bytes: int, rate: int) -> float:
    """Duration of ``n_bytes`` of PCM16 at ``rate``; a trailing odd byte is not a sample."""
    return (n_bytes // 2) * 1000.0 / rate


def tone(freq_hz: float, ms: int, rate: int, amplitude: float = 0.3, fade_ms: int = 0) -> bytes:
    """A sine of ``ms`` milliseconds, with optional linear ramps against clicks at both ends."""
    count = n_samples(ms, rate)
    wave = amplitude * np.sin(2.0 * math.pi * freq_hz * np.arange(count, dtype=np.float64) / rate)
    ramp = min(n_samples(fade_ms, rate), count // 2)
    if ramp > 0:
        envelope = np.linspace(0.0, 1.0, ramp, endpoint=False)
        wave[:ramp] *= envelope
        wave[count - ramp :] *= envelope[::-1]
    return np.round(wave * (FULL_SCALE - 1)).astype(_PCM16).tobytes()


def silence(ms: int, rate: int) -> bytes:
    return bytes(2 * n_samples(ms, rate))


def rms_dbfs(pcm: bytes) -> float:
    """Loudness of a frame in dBFS; ``-inf`` for digital silence or an empty frame."""
    samples = np.frombuffer(pcm, dtype=_PCM16, count=len(pcm) // 2).astype(np.float64)
    if samples.size == 0:
        return -math.inf
    rms = math.sqrt(float(np.mean(samples * samples)))
    return 20.0 * math.log10(rms / FULL_SCALE) if rms > 0.0 else -math.inf
