"""The sounds the soak's callers make, cut into 20 ms frames once: a loud square wave (speech
to any energy VAD) and silence, as PCM16 at a browser's rates and as µ-law for phone calls."""

from __future__ import annotations

from functools import cache

from gateway.audio import g711

__all__ = ["FRAME_MS", "pcm_frames", "ulaw_frames"]

FRAME_MS = 20
_AMPLITUDE = 8000


def _tone(rate: int, ms: int) -> bytes:
    samples = rate * ms // 1000
    half_period = max(rate // 400, 2) // 2
    high = _AMPLITUDE.to_bytes(2, "little", signed=True)
    low = (-_AMPLITUDE).to_bytes(2, "little", signed=True)
    return b"".join(high if (i // half_period) % 2 == 0 else low for i in range(samples))


@cache
def pcm_frames(rate: int) -> tuple[bytes, bytes]:
    """(speech, silence): one 20 ms PCM16 frame of each at ``rate``."""
    return _tone(rate, FRAME_MS), bytes(rate * FRAME_MS // 1000 * 2)


@cache
def ulaw_frames() -> tuple[bytes, bytes]:
    """(speech, silence): one 20 ms µ-law frame (160 bytes) of each, 8 kHz."""
    speech, silence = pcm_frames(8000)
    return g711.ulaw_encode(speech), g711.ulaw_encode(silence)
