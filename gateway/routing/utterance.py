"""The user's audio a failover may have to give again: ``Utterance`` keeps what the user said
since the last completed reply (at most ``BUFFER_S``), in the format the session sends, and
gives it converted to another provider's format. Pure (the conversion is ``gateway.audio``).

A mark is taken when the user's turn ends; a completed reply answered everything before its
mark, which is dropped then. A turn that ended but got no reply, and whatever the user says
after it, stay until they are answered."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from gateway.audio.convert import AudioConverter, bytes_per_sample, encoded
from transports.base import AudioEncoding

__all__ = ["BUFFER_S", "Format", "Utterance", "converted", "silence"]

BUFFER_S = 30.0

Format = tuple[AudioEncoding, int]  # encoding and sample rate


def converted(chunks: Sequence[bytes], source: Format, target: Format) -> list[bytes]:
    """``chunks`` in another format, one for one (the last carries the converter's tail)."""
    convert = AudioConverter(*source, *target)
    out = [convert.process(chunk) for chunk in chunks]
    if out:
        out[-1] += convert.flush()
    return out


def silence(seconds: float, fmt: Format) -> bytes:
    encoding, rate = fmt
    # PCM zeros in the format: a G.711 law codes them as its own byte (µ-law 0xFF, A-law 0xD5).
    return encoded(bytes(2 * int(seconds * rate)), encoding)


class Utterance:
    def __init__(self, fmt: Format, keep_s: float = BUFFER_S) -> None:
        self._chunks: deque[bytes] = deque()
        self._bytes = 0
        self._mark = 0  # chunks before it were said before the turn now being answered
        self._keep_s = keep_s
        self.format = fmt
        self._limit = _bytes_for(keep_s, fmt)

    def __len__(self) -> int:
        return len(self._chunks)

    @property
    def size(self) -> int:
        """Bytes kept."""
        return self._bytes

    def keep(self, pcm: bytes) -> None:
        """One chunk the session sent (the hot path: an append and a sum)."""
        self._chunks.append(pcm)
        self._bytes += len(pcm)
        while self._bytes > self._limit and len(self._chunks) > 1:
            self._bytes -= len(self._chunks.popleft())
            self._mark = max(0, self._mark - 1)

    def turn_ended(self) -> None:
        self._mark = len(self._chunks)

    def answered(self) -> None:
        """A reply completed: what was said before its turn ended is answered."""
        for _ in range(self._mark):
            self._bytes -= len(self._chunks.popleft())
        self._mark = 0

    def clear(self) -> None:
        self._chunks.clear()
        self._bytes = self._mark = 0

    def reformat(self, fmt: Format) -> None:
        """The session sends in ``fmt`` from now: what is kept is converted to it."""
        if fmt != self.format:
            self._chunks = deque(converted(self._chunks, self.format, fmt))
            self._bytes = sum(map(len, self._chunks))
        self.format = fmt
        self._limit = _bytes_for(self._keep_s, fmt)

    def as_format(self, fmt: Format) -> list[bytes]:
        """What is kept, converted to ``fmt`` (for a replay)."""
        return converted(self._chunks, self.format, fmt)


def _bytes_for(seconds: float, fmt: Format) -> int:
    encoding, rate = fmt
    return int(seconds * rate * bytes_per_sample(encoding))
