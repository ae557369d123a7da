"""PCM16 helpers: little-endian, signed 16-bit, mono — the one raw format the gateway relays.

Everything here is a pure function of bytes and numbers. Sizes are counted in whole samples: a
frame is ``2 * n`` bytes, and a trailing odd byte is never a sample.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = [
    "FULL_SCALE",
    "SAMPLE_WIDTH",
    "bytes_for_ms",
    "duration_ms",
    "is_speech",
    "rms_dbfs",
    "silence",
    "to_int16",
    "tone",
]

SAMPLE_WIDTH = 2
"""Bytes per PCM16 sample."""

FULL_SCALE = 32768.0
"""The 0 dBFS reference: a full-scale square wave has an RMS of 32768."""

# Explicit little-endian, so a big-endian host reads the wire format correctly too.
_PCM16 = np.dtype("<i2")

# Ramps at the ends of a tone: 5 ms is long enough to remove the click of a waveform that
# starts or stops at a non-zero value, and short enough to leave a word-sized tone intact.
_TONE_FADE_MS = 5.0


def duration_ms(n_bytes: int, rate: int) -> float:
    """Milliseconds of audio in ``n_bytes`` of PCM16 at ``rate`` Hz (whole samples only)."""
    _check_rate(rate)
    return (n_bytes // SAMPLE_WIDTH) * 1000.0 / rate


def bytes_for_ms(ms: float, rate: int) -> int:
    """Bytes of PCM16 holding ``ms`` milliseconds at ``rate`` Hz, rounded to a whole sample."""
    _check_rate(rate)
    if ms < 0:
        raise ValueError(f"duration must not be negative, got {ms} ms")
    return round(ms * rate / 1000.0) * SAMPLE_WIDTH


def to_int16(frame: bytes) -> npt.NDArray[np.int16]:
    """View ``frame`` as int16 samples without copying (the array is read-only)."""
    if len(frame) % SAMPLE_WIDTH:
        raise ValueError(f"PCM16 frame has an odd length ({len(frame)} bytes)")
    return np.frombuffer(frame, dtype=_PCM16)


def rms_dbfs(frame: bytes) -> float:
    """Loudness of ``frame`` in dB relative to full scale; ``-inf`` for digital silence.

    A full-scale sine reads about -3 dBFS and a quiet room picked up by a laptop microphone
    roughly -60 to -50 dBFS. Cost is one float32 conversion and one dot product.
    """
    samples = to_int16(frame)
    if samples.size == 0:
        return -math.inf
    # float32 so the squares cannot overflow; its precision is ample for a level in dB.
    as_float = samples.astype(np.float32)
    mean_square = float(np.dot(as_float, as_float)) / samples.size
    if mean_square == 0.0:
        return -math.inf
    return 10.0 * math.log10(mean_square / (FULL_SCALE * FULL_SCALE))


def is_speech(frame: bytes, threshold_dbfs: float = -40.0) -> bool:
    """Energy gate: True when ``frame`` is at least ``threshold_dbfs`` loud.

    This is a loudness test, not a speech classifier; it suits the embedded local model and
    tests, where the only "speech" is tones and the only "silence" is zeros or faint noise.
    """
    return rms_dbfs(frame) >= threshold_dbfs


def silence(ms: float, rate: int) -> bytes:
    """``ms`` milliseconds of digital silence at ``rate`` Hz."""
    return bytes(bytes_for_ms(ms, rate))


def tone(freq_hz: float, ms: float, rate: int, amplitude: float = 0.3) -> bytes:
    """A sine of ``freq_hz`` lasting ``ms`` milliseconds, peak ``amplitude`` of full scale.

    Both ends are shaped by a raised-cosine fade, so tones (and silences) concatenated back
    to back join without a click.
    """
    n_samples = bytes_for_ms(ms, rate) // SAMPLE_WIDTH
    if not 0.0 < amplitude <= 1.0:
        raise ValueError(f"amplitude must be in (0, 1], got {amplitude}")
    if not 0.0 < freq_hz < rate / 2:
        raise ValueError(f"frequency must be in (0, {rate / 2}) Hz at {rate} Hz, got {freq_hz}")
    t = np.arange(n_samples, dtype=np.float64) / rate
    wave = np.sin(2.0 * np.pi * freq_hz * t) * (amplitude * 32767.0)
    fade_len = min(round(_TONE_FADE_MS * rate / 1000.0), n_samples // 2)
    if fade_len > 0:
        # Half a cosine period from 0 to 1; the last ramp sample stays below 1 so the
        # mirrored fade-out ends at exactly 0.
        ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(fade_len) / fade_len)
        wave[:fade_len] *= ramp
        wave[n_samples - fade_len :] *= ramp[::-1]
    return np.rint(wave).astype(_PCM16).tobytes()


def _check_rate(rate: int) -> None:
    if rate <= 0:
        raise ValueError(f"sample rate must be positive, got {rate} Hz")
