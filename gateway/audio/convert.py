"""One direction of a session's audio: the client's format to the upstream's, or back. Pure.

A format is an encoding and a rate: PCM16 at any rate the protocol allows, or G.711 µ-law at
8 kHz (a phone call). ``AudioConverter`` joins the steps a pair needs: µ-law decoded to PCM16,
resampled (``StreamResampler``), encoded again to µ-law. When both sides have the same format
(a 24 kHz client on OpenAI, a phone call on an upstream that takes µ-law itself) it passes the
bytes on untouched: no copy, no state, nothing decoded.
"""

from __future__ import annotations

from typing import Literal

from gateway.audio.g711 import ulaw_decode, ulaw_encode
from gateway.audio.resample import StreamResampler

__all__ = ["AudioConverter", "Encoding", "bytes_per_sample"]

Encoding = Literal["pcm16", "pcmu"]


def bytes_per_sample(encoding: str) -> int:
    return 1 if encoding == "pcmu" else 2


class AudioConverter:
    """Convert one continuous stream from ``(in_encoding, in_rate)`` to ``(out_encoding,
    out_rate)``; ``process`` / ``flush`` / ``reset`` as ``StreamResampler``'s."""

    __slots__ = ("_decode", "_encode", "_resampler", "in_encoding", "is_passthrough")

    def __init__(self, in_encoding: str, in_rate: int, out_encoding: str, out_rate: int) -> None:
        self.in_encoding = in_encoding
        self.is_passthrough = (in_encoding, in_rate) == (out_encoding, out_rate)
        self._decode = in_encoding == "pcmu"
        self._encode = out_encoding == "pcmu"
        self._resampler = StreamResampler(in_rate, out_rate)

    def process(self, audio: bytes) -> bytes:
        """The next chunk converted; possibly empty while the resampler fills."""
        if self.is_passthrough:
            return audio
        pcm = self._resampler.process(ulaw_decode(audio) if self._decode else audio)
        return ulaw_encode(pcm) if self._encode and pcm else pcm

    def flush(self) -> bytes:
        """End of a stream (a response): the resampler's tail, converted."""
        if self.is_passthrough:
            return b""
        tail = self._resampler.flush()
        return ulaw_encode(tail) if self._encode and tail else tail

    def reset(self) -> None:
        """Drop what is held (barge-in)."""
        self._resampler.reset()

    def as_pcm16(self, audio: bytes) -> bytes:
        """Input audio as PCM16 at the input rate (to judge it: is it speech?)."""
        return ulaw_decode(audio) if self._decode else audio

    def __repr__(self) -> str:
        return f"AudioConverter({self.in_encoding} → {self._resampler!r}, encode={self._encode})"
