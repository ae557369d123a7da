"""Pure audio: PCM16 helpers, a streaming resampler, G.711 µ-law and A-law (``g711``), and the
session's audio converter (``gateway.audio.convert``: µ-law and rates, or untouched).

Synchronous, no I/O, and a leaf of ``gateway``: it imports nothing of the rest of it.
"""

from gateway.audio.pcm import (
    FULL_SCALE,
    SAMPLE_WIDTH,
    bytes_for_ms,
    duration_ms,
    is_speech,
    rms_dbfs,
    silence,
    to_int16,
    tone,
)
from gateway.audio.resample import DEFAULT_QUALITY, ResampleQuality, StreamResampler

__all__ = [
    "DEFAULT_QUALITY",
    "FULL_SCALE",
    "SAMPLE_WIDTH",
    "ResampleQuality",
    "StreamResampler",
    "bytes_for_ms",
    "duration_ms",
    "is_speech",
    "rms_dbfs",
    "silence",
    "to_int16",
    "tone",
]
