"""The peer's audio as the session's input: aiortc decodes Opus into 20 ms frames of packed
stereo PCM16 at 48 kHz; the session takes mono PCM16 at 48 kHz (it resamples to the
upstream's rate itself, with the low-delay path)."""

from __future__ import annotations

import numpy as np

__all__ = ["mono_pcm16"]


def mono_pcm16(samples: np.ndarray, channels: int) -> bytes:
    """A frame's samples (``AudioFrame.to_ndarray()`` of packed s16: shape (1, n × channels))
    as mono PCM16 bytes: the channels averaged."""
    flat = samples.reshape(-1)
    if channels == 1:
        mono: bytes = flat.astype("<i2", copy=False).tobytes()
        return mono
    pairs = flat.reshape(-1, channels).astype(np.int32)
    averaged: bytes = (pairs.sum(axis=1) // channels).astype("<i2").tobytes()
    return averaged
