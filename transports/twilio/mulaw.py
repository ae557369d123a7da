"""G.711 µ-law as Twilio Media Streams carries it: 8 kHz mono, one byte per sample.

This is the µ-law half of ``gateway.audio.g711`` under the names the Twilio bridge uses; that
module is the one implementation in the project (a leaf package meant for ``transports/`` too),
so both ends of a call and the audio tests agree on every code. The law, in short: sign and
magnitude, the magnitude clipped to 32635 and biased by 0x84, coded as a 3-bit segment (the
position of its leading one) and the 4 bits below it, sent with every bit inverted. Decoding
returns the middle of the coded interval, so a sample whose biased magnitude falls in segment
``s`` comes back within half a step, ``2 ** (s + 2)``, plus whatever the clip removed.
``audioop`` is not used (gone in Python 3.13).
"""

from __future__ import annotations

from gateway.audio.g711 import ulaw_decode, ulaw_encode

__all__ = ["SILENCE", "decode", "encode"]

SILENCE = 0xFF
"""The µ-law code of PCM 0 (positive zero), used to pad frames."""


def encode(pcm16: bytes) -> bytes:
    """PCM16 little-endian mono → µ-law, one byte per sample; an odd length is a ``ValueError``."""
    return ulaw_encode(pcm16)


def decode(ulaw: bytes) -> bytes:
    """µ-law → PCM16 little-endian mono, two bytes per code."""
    return ulaw_decode(ulaw)
