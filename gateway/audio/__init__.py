"""Pure audio: PCM16 helpers, a streaming resampler, and the session's audio converter
(``gateway.audio.convert``: µ-law and rates, or untouched).

Synchronous, no I/O, and no imports from the rest of ``gateway`` (G.711 comes from
``transports.twilio.g711``, below it).
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
