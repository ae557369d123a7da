"""Pure audio: PCM16 helpers and a streaming resampler.

A leaf package: synchronous, no I/O, and no imports from the rest of ``gateway``, so that
``transports/`` can use it too.
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
