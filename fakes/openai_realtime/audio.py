"""Audio formats of the fake: ``audio/pcm`` (PCM16 at 24 kHz), ``audio/pcmu`` and ``audio/pcma``.

Pure. The local model speaks and listens in PCM16 (``transports.local``); this module converts
between that and the session's wire format, and says how many bytes a millisecond is. G.711 is
done with two small lookup tables built once with numpy (the standard library's ``audioop`` is
deprecated and would warn).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "AudioFormat",
    "alaw_decode",
    "alaw_encode",
    "decode_base64_audio",
    "format_of",
    "ulaw_decode",
    "ulaw_encode",
]

_PCM16 = np.dtype("<i2")


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """A wire format: its PCM rate, and bytes per millisecond on the wire."""

    type: str  # "audio/pcm" | "audio/pcmu" | "audio/pcma"
    rate: int

    @property
    def bytes_per_ms(self) -> int:
        return 48 if self.type == "audio/pcm" else 8

    def duration_ms(self, n_bytes: int) -> float:
        return n_bytes / self.bytes_per_ms

    def to_pcm16(self, data: bytes) -> bytes:
        """Wire bytes → PCM16 at ``rate``."""
        if self.type == "audio/pcmu":
            return ulaw_decode(data)
        if self.type == "audio/pcma":
            return alaw_decode(data)
        return data

    def from_pcm16(self, pcm: bytes) -> bytes:
        """PCM16 at ``rate`` → wire bytes."""
        if self.type == "audio/pcmu":
            return ulaw_encode(pcm)
        if self.type == "audio/pcma":
            return alaw_encode(pcm)
        return pcm


def format_of(config: Any) -> AudioFormat:
    """The ``AudioFormat`` of a (validated) session format object; PCM16 24 kHz by default."""
    kind = config.get("type") if isinstance(config, dict) else None
    if kind in ("audio/pcmu", "audio/pcma"):
        return AudioFormat(kind, 8000)
    return AudioFormat("audio/pcm", 24000)


def decode_base64_audio(text: Any) -> bytes | None:
    """Strict base64 (``None`` when it is not); the API rejects what does not decode."""
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


# G.711 (ITU-T, as in the classic Sun g711.c) ------------------------------------------------


def _segment(values: npt.NDArray[np.int64], ends: tuple[int, ...]) -> npt.NDArray[np.int64]:
    return np.searchsorted(np.array(ends), values, side="left").astype(np.int64)


@cache
def _ulaw_tables() -> tuple[npt.NDArray[np.int16], npt.NDArray[np.uint8]]:
    codes = np.arange(256, dtype=np.int64)
    inverted = ~codes & 0xFF
    magnitude = (((inverted & 0x0F) << 3) + 0x84) << ((inverted & 0x70) >> 4)
    decode = np.where(inverted & 0x80, 0x84 - magnitude, magnitude - 0x84).astype(np.int16)

    samples = np.arange(-32768, 32768, dtype=np.int64) >> 2
    mask = np.where(samples < 0, 0x7F, 0xFF)
    value = np.minimum(np.abs(samples), 8159) + (0x84 >> 2)
    seg = _segment(value, (0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF))
    code = np.where(seg >= 8, 0x7F, (seg << 4) | ((value >> (seg + 1)) & 0x0F))
    encode = ((code ^ mask) & 0xFF).astype(np.uint8)
    return decode, encode


@cache
def _alaw_tables() -> tuple[npt.NDArray[np.int16], npt.NDArray[np.uint8]]:
    codes = np.arange(256, dtype=np.int64) ^ 0x55
    seg = (codes & 0x70) >> 4
    base = (codes & 0x0F) << 4
    magnitude = np.where(
        seg == 0,
        base + 8,
        np.where(seg == 1, base + 0x108, (base + 0x108) << np.maximum(seg - 1, 0)),
    )
    decode = np.where(codes & 0x80, magnitude, -magnitude).astype(np.int16)

    samples = np.arange(-32768, 32768, dtype=np.int64) >> 3
    mask = np.where(samples >= 0, 0xD5, 0x55)
    value = np.where(samples >= 0, samples, -samples - 1)
    seg_a = _segment(value, (0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF))
    low = np.where(seg_a < 2, (value >> 1) & 0x0F, (value >> np.maximum(seg_a, 1)) & 0x0F)
    code = np.where(seg_a >= 8, 0x7F, (seg_a << 4) | low)
    encode = ((code ^ mask) & 0xFF).astype(np.uint8)
    return decode, encode


def _decode(data: bytes, table: npt.NDArray[np.int16]) -> bytes:
    return table[np.frombuffer(data, dtype=np.uint8)].astype(_PCM16).tobytes()


def _encode(pcm: bytes, table: npt.NDArray[np.uint8]) -> bytes:
    samples = np.frombuffer(pcm, dtype=_PCM16, count=len(pcm) // 2).astype(np.int64)
    return table[samples + 32768].tobytes()


def ulaw_decode(data: bytes) -> bytes:
    return _decode(data, _ulaw_tables()[0])


def ulaw_encode(pcm: bytes) -> bytes:
    return _encode(pcm, _ulaw_tables()[1])


def alaw_decode(data: bytes) -> bytes:
    return _decode(data, _alaw_tables()[0])


def alaw_encode(pcm: bytes) -> bytes:
    return _encode(pcm, _alaw_tables()[1])
