"""G.711 µ-law and A-law (ITU-T G.711), as telephony (Twilio Media Streams) carries them: 8 kHz
mono, one byte per sample.

Theory of operation. G.711 is a table lookup in both directions, so each direction is one
numpy indexing operation on a table built once at import:

* decode: a 256-entry int16 table, indexed by the code byte;
* encode: a 65536-entry uint8 table, indexed by the PCM16 sample read as an unsigned 16-bit
  integer (64 KiB per law).

The tables are computed with the classic 16-bit formulation of the standard's segment
arithmetic (the one in Sun's public-domain ``g711.c``):

* µ-law: sign and magnitude; the magnitude is clipped to 32635, biased by 0x84 (132), and
  coded as a 3-bit segment (position of the leading one) plus the 4 bits below it; the code is
  sent with every bit inverted. The decoder returns the middle of the coded interval, so the
  error is at most half a step: 4 << segment, i.e. about 1/32 of the magnitude.
* A-law: the top 13 bits of the sample, one's complement for negatives (so codes are symmetric
  around -0.5 LSB of 13 bits), coded as segment and 4 mantissa bits; even bits are inverted
  (XOR 0x55). Error at most 8 in segments 0 and 1, 4 << segment above.

Decoded values are in the PCM16 scale (µ-law peak ±32124, A-law peak ±32256). ``audioop``
(deprecated, gone in Python 3.13) is deliberately not used. Its A-law matches this module
exactly (all 65536 inputs, all 256 codes); its µ-law decoding matches too, but its encoder
rounds negative magnitudes up to the 14-bit grid, so the three negative inputs whose magnitude
is just below each of the 127 decision thresholds (381 of 65536) get the next code up, up to
3 LSB outside the half-step bound. Here µ-law is symmetric:
``encode(-x) == encode(x) ^ 0x80`` for every x > 0.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["ULAW_SILENCE", "alaw_decode", "alaw_encode", "ulaw_decode", "ulaw_encode"]

ULAW_SILENCE = 0xFF
"""The µ-law code of PCM 0 (positive zero), used to pad frames."""

_ULAW_BIAS = 0x84
_ULAW_CLIP = 32635
_ALAW_EVEN_BITS = 0x55

# PCM16 samples read as unsigned so they can index the 65536-entry encode tables directly.
_PCM16_AS_INDEX = np.dtype("<u2")
_PCM16 = np.dtype("<i2")


def _segment(magnitude: npt.NDArray[np.int32], first_bits: int) -> npt.NDArray[np.int32]:
    """Index of the leading one above the first ``first_bits`` bits, 0 if none (0..7)."""
    segment = np.zeros_like(magnitude)
    for seg in range(1, 8):
        segment[magnitude >= (1 << (first_bits + seg - 1))] = seg
    return segment


def _build_ulaw_encode() -> npt.NDArray[np.uint8]:
    pcm = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.int16).astype(np.int32)
    sign = np.where(pcm < 0, 0x80, 0x00).astype(np.int32)
    magnitude = np.minimum(np.abs(pcm), _ULAW_CLIP) + _ULAW_BIAS
    # magnitude is in [132, 32767]: the leading one sits at bit 7 (segment 0) to 14 (segment 7).
    segment = _segment(magnitude, 8)
    mantissa = (magnitude >> (segment + 3)) & 0x0F
    return (~(sign | (segment << 4) | mantissa) & 0xFF).astype(np.uint8)


def _build_ulaw_decode() -> npt.NDArray[np.int16]:
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    segment = (code >> 4) & 0x07
    mantissa = code & 0x0F
    magnitude = (((mantissa << 3) + _ULAW_BIAS) << segment) - _ULAW_BIAS
    return np.where(code & 0x80, -magnitude, magnitude).astype(_PCM16)


def _build_alaw_encode() -> npt.NDArray[np.uint8]:
    pcm = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.int16).astype(np.int32)
    top13 = pcm >> 3
    # G.711 A-law has no zero code: 0 and -1 (13-bit) are the two smallest levels, +/-8 here.
    positive = top13 >= 0
    magnitude = np.where(positive, top13, ~top13)  # 0..4095
    segment = _segment(magnitude, 5)
    shift = np.maximum(segment, 1)  # segments 0 and 1 share the finest step
    mantissa = (magnitude >> shift) & 0x0F
    sign = np.where(positive, 0x80, 0x00).astype(np.int32)
    code = sign | (segment << 4) | mantissa
    return (code ^ _ALAW_EVEN_BITS).astype(np.uint8)


def _build_alaw_decode() -> npt.NDArray[np.int16]:
    code = np.arange(256, dtype=np.int32) ^ _ALAW_EVEN_BITS
    segment = (code >> 4) & 0x07
    mantissa = code & 0x0F
    # Middle of the coded interval: segment 0 has no implicit leading one, the others do.
    magnitude = np.where(
        segment == 0,
        (mantissa << 4) + 8,
        ((mantissa << 4) + 0x108) << np.maximum(segment - 1, 0),
    )
    return np.where(code & 0x80, magnitude, -magnitude).astype(_PCM16)


_ULAW_ENCODE = _build_ulaw_encode()
_ULAW_DECODE = _build_ulaw_decode()
_ALAW_ENCODE = _build_alaw_encode()
_ALAW_DECODE = _build_alaw_decode()


def ulaw_encode(pcm16: bytes) -> bytes:
    """PCM16 little-endian mono → G.711 µ-law, one byte per sample."""
    return _encode(pcm16, _ULAW_ENCODE)


def ulaw_decode(ulaw: bytes) -> bytes:
    """G.711 µ-law → PCM16 little-endian mono, two bytes per code."""
    return _ULAW_DECODE[np.frombuffer(ulaw, dtype=np.uint8)].tobytes()


def alaw_encode(pcm16: bytes) -> bytes:
    """PCM16 little-endian mono → G.711 A-law, one byte per sample."""
    return _encode(pcm16, _ALAW_ENCODE)


def alaw_decode(alaw: bytes) -> bytes:
    """G.711 A-law → PCM16 little-endian mono, two bytes per code."""
    return _ALAW_DECODE[np.frombuffer(alaw, dtype=np.uint8)].tobytes()


def _encode(pcm16: bytes, table: npt.NDArray[np.uint8]) -> bytes:
    if len(pcm16) % 2:
        raise ValueError(f"PCM16 input has an odd length ({len(pcm16)} bytes)")
    return table[np.frombuffer(pcm16, dtype=_PCM16_AS_INDEX)].tobytes()
