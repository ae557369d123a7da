"""The user's audio in the failover bench: a loud square-wave tone (the fakes' energy VAD hears
every 10 ms of it as speech) and digital silence, PCM16 little-endian mono, in 20 ms frames.
Pure."""

from __future__ import annotations

__all__ = ["FRAME_MS", "frame_bytes", "silence", "tone"]

FRAME_MS = 20
_AMPLITUDE = 8000
_TONE_HZ = 400


def frame_bytes(rate: int) -> int:
    return rate * FRAME_MS // 1000 * 2


def tone(ms: int, rate: int) -> bytes:
    """``ms`` of a 400 Hz square wave at ``rate`` (``ms`` a whole number of frames)."""
    if ms <= 0 or ms % FRAME_MS:
        raise ValueError(f"a tone lasts a whole number of {FRAME_MS} ms frames: {ms}")
    samples = rate * ms // 1000
    half = max(rate // _TONE_HZ // 2, 1)
    high = _AMPLITUDE.to_bytes(2, "little", signed=True)
    low = (-_AMPLITUDE).to_bytes(2, "little", signed=True)
    return b"".join(high if (i // half) % 2 == 0 else low for i in range(samples))


def silence(ms: int, rate: int) -> bytes:
    return bytes(rate * ms // 1000 * 2)
