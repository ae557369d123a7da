"""Sounds the gateway makes itself. Pure.

``holding_tone``: what a caller hears while a slow tool call runs and the provider cannot say a
holding line: two soft notes going up (C5, E5), faded in and out against clicks, at a tenth of
full scale so that it sits well under speech.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["holding_tone"]

_PCM16 = np.dtype("<i2")
_NOTES = ((523.25, 140), (0.0, 70), (659.25, 180))  # (Hz, ms); 0 Hz is a pause
_LEVEL = 0.1
_FADE_MS = 15


def holding_tone(rate: int) -> bytes:
    """The cue as PCM16 mono at ``rate``."""
    parts = []
    for freq, ms in _NOTES:
        count = rate * ms // 1000
        if freq == 0.0:
            parts.append(np.zeros(count))
            continue
        wave = _LEVEL * np.sin(2.0 * math.pi * freq * np.arange(count) / rate)
        ramp = min(rate * _FADE_MS // 1000, count // 2)
        envelope = np.linspace(0.0, 1.0, ramp, endpoint=False)
        wave[:ramp] *= envelope
        wave[count - ramp :] *= envelope[::-1]
        parts.append(wave)
    samples = np.concatenate(parts)
    return np.round(samples * 32767).astype(_PCM16).tobytes()
