"""One direction of a session's audio: the client's format to the upstream's, or back. Pure.

A format is an encoding and a rate: PCM16 at any rate the protocol allows, or G.711 at 8 kHz
(a phone call), µ-law (``"pcmu"``) or A-law (``"pcma"``). ``AudioConverter`` joins the steps a
pair needs: G.711 decoded to PCM16, resampled (``StreamResampler``), encoded again to the
other side's law (µ-law and A-law convert into each other through PCM16). When both sides have
the same format (a 24 kHz client on OpenAI, a phone call on an upstream that takes its law
itself) it passes the bytes on untouched: no copy, no state, nothing decoded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from gateway.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from gateway.audio.resample import StreamResampler

__all__ = ["AudioConverter", "Encoding", "bytes_per_sample", "encoded"]

Encoding = Literal["pcm16", "pcmu", "pcma"]

_Codec = Callable[[bytes], bytes]
# Each G.711 law's (decode, encode), both to and from PCM16; PCM16 itself needs neither.
_G711: dict[str, tuple[_Codec, _Codec]] = {
    "pcmu": (ulaw_decode, ulaw_encode),
    "pcma": (alaw_decode, alaw_encode),
}


def bytes_per_sample(encoding: str) -> int:
    return 1 if encoding in _G711 else 2


def encoded(pcm: bytes, encoding: str) -> bytes:
    """PCM16 ``pcm`` in ``encoding``, at the same rate (untouched when that is PCM16)."""
    law = _G711.get(encoding)
    return pcm if law is None else law[1](pcm)


class AudioConverter:
    """Convert one continuous stream from ``(in_encoding, in_rate)`` to ``(out_encoding,
    out_rate)``; ``process`` / ``flush`` / ``reset`` as ``StreamResampler``'s."""

    __slots__ = (
        "_decode",
        "_encode",
        "_resampler",
        "in_encoding",
        "is_passthrough",
        "out_encoding",
    )

    def __init__(self, in_encoding: str, in_rate: int, out_encoding: str, out_rate: int) -> None:
        self.in_encoding = in_encoding
        self.out_encoding = out_encoding
        self.is_passthrough = (in_encoding, in_rate) == (out_encoding, out_rate)
        in_law, out_law = _G711.get(in_encoding), _G711.get(out_encoding)
        self._decode = None if in_law is None else in_law[0]
        self._encode = None if out_law is None else out_law[1]
        self._resampler = StreamResampler(in_rate, out_rate)

    def process(self, audio: bytes) -> bytes:
        """The next chunk converted; possibly empty while the resampler fills."""
        if self.is_passthrough:
            return audio
        pcm = self._resampler.process(self.as_pcm16(audio))
        return self._encode(pcm) if self._encode is not None and pcm else pcm

    def flush(self) -> bytes:
        """End of a stream (a response): the resampler's tail, converted."""
        if self.is_passthrough:
            return b""
        tail = self._resampler.flush()
        return self._encode(tail) if self._encode is not None and tail else tail

    def reset(self) -> None:
        """Drop what is held (barge-in)."""
        self._resampler.reset()

    def as_pcm16(self, audio: bytes) -> bytes:
        """Input audio as PCM16 at the input rate (to judge it: is it speech?)."""
        return audio if self._decode is None else self._decode(audio)

    def __repr__(self) -> str:
        return f"AudioConverter({self.in_encoding} → {self._resampler!r} → {self.out_encoding})"
