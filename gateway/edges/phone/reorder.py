"""Caller audio put back in order, for carriers whose frames may arrive out of order. Pure.

Telnyx documents that media frames are not guaranteed to arrive in order and numbers them. The
model must hear the caller's words in the order they were said, but a phone call cannot wait
long for a frame that may never come: ``SequenceReorder`` releases every frame as soon as all
before it have arrived, holds a frame that came early, and gives up on a missing one once
``hold`` frames wait behind it (at 20 ms a frame, 3 frames is 60 ms of added delay at most, and
only while a frame is missing). A frame older than one already released (late, or a duplicate)
is dropped and counted: playing it now would put it in the wrong place.

Where the count starts is learnt from the first two frames (the lower of them: the very first
frame may be the one that came late), so the stream's first frame waits for its second; numbers
are the carrier's, contiguous for audio (Telnyx's ``media.chunk``).
"""

from __future__ import annotations

__all__ = ["SequenceReorder"]


class SequenceReorder:
    def __init__(self, hold: int = 3) -> None:
        if hold < 1:
            raise ValueError("hold must be at least 1")
        self._hold = hold
        self._next: int | None = None
        self._waiting: dict[int, bytes] = {}
        self.dropped = 0  # late or duplicate frames
        self.skipped = 0  # frames given up on

    def push(self, sequence: int, payload: bytes) -> list[bytes]:
        """Frame ``sequence`` arrived: the frames now due, in order (possibly none)."""
        expected = self._next
        if sequence in self._waiting or (expected is not None and sequence < expected):
            self.dropped += 1
            return []
        self._waiting[sequence] = payload
        if expected is None:
            if len(self._waiting) < 2:
                return []
            expected = min(self._waiting)
        released: list[bytes] = []
        while True:
            while expected in self._waiting:
                released.append(self._waiting.pop(expected))
                expected += 1
            if len(self._waiting) < self._hold:
                break
            # Too many wait behind a gap: the missing frames are lost, go on from the earliest.
            earliest = min(self._waiting)
            self.skipped += earliest - expected
            expected = earliest
        self._next = expected
        return released

    def flush(self) -> list[bytes]:
        """Everything still held, in order (the stream ended)."""
        held = [self._waiting[key] for key in sorted(self._waiting)]
        if self._next is None and self._waiting:
            self._next = min(self._waiting)
        if self._waiting:
            self._next = max(self._waiting) + 1
        self._waiting.clear()
        return held
