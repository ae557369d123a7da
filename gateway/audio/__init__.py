"""Pure audio codecs: PCM16 helpers, a streaming resampler, G.711 µ-law/A-law.

A leaf package: synchronous, no I/O, and no imports from the rest of ``gateway``, so that
``transports/`` can use it too.
"""

from gateway.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
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
    "alaw_decode",
    "alaw_encode",
    "bytes_for_ms",
    "duration_ms",
    "is_speech",
    "rms_dbfs",
    "silence",
    "to_int16",
    "tone",
    "ulaw_decode",
    "ulaw_encode",
]
