"""The session's reply audio as an outbound WebRTC track, paced at real time.

aiortc's sender calls ``recv()`` back to back, so the track paces itself: one 20 ms frame of
48 kHz mono PCM16 per 20 ms of the loop's clock, silence when nothing is queued (a track that
raises stops for good), timestamps continuous. ``clear`` drops what is queued (barge-in);
``played_ms`` counts the reply audio handed to the encoder since the last ``mark``, which is
what the peer has been sent (its own buffering comes on top).
"""

from __future__ import annotations

import asyncio
import fractions
from collections import deque

import av
from aiortc.mediastreams import MediaStreamTrack

__all__ = ["FRAME_SAMPLES", "RATE", "PcmOutTrack"]

RATE = 48000
FRAME_MS = 20
FRAME_SAMPLES = RATE * FRAME_MS // 1000
FRAME_BYTES = FRAME_SAMPLES * 2
_TIME_BASE = fractions.Fraction(1, RATE)


class PcmOutTrack(MediaStreamTrack):
    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._queue: deque[bytes] = deque()
        self._held = bytearray()
        self._pts = 0
        self._next_at: float | None = None
        self.sent_audio_ms = 0  # reply audio (not silence) handed to the encoder

    def push(self, pcm: bytes) -> None:
        """Queue reply audio (48 kHz mono PCM16), cut into 20 ms frames."""
        self._held += pcm
        whole = len(self._held) - len(self._held) % FRAME_BYTES
        for start in range(0, whole, FRAME_BYTES):
            self._queue.append(bytes(self._held[start : start + FRAME_BYTES]))
        del self._held[:whole]

    def flush(self) -> None:
        """The reply ended: its last partial frame goes, padded with silence."""
        if self._held:
            self._queue.append(bytes(self._held) + bytes(FRAME_BYTES - len(self._held)))
            self._held.clear()

    def clear(self) -> None:
        """Barge-in: nothing queued is sent."""
        self._queue.clear()
        self._held.clear()

    @property
    def queued_ms(self) -> int:
        return len(self._queue) * FRAME_MS

    async def recv(self) -> av.AudioFrame:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._next_at is None or self._next_at < now - 0.1:
            self._next_at = now  # first frame, or the loop fell behind: start afresh
        wait = self._next_at - now
        if wait > 0:
            await asyncio.sleep(wait)
        self._next_at += FRAME_MS / 1000
        if self._queue:
            pcm = self._queue.popleft()
            self.sent_audio_ms += FRAME_MS
        else:
            pcm = bytes(FRAME_BYTES)
        frame = av.AudioFrame(format="s16", layout="mono", samples=FRAME_SAMPLES)
        frame.planes[0].update(pcm)
        frame.sample_rate = RATE
        frame.pts = self._pts
        frame.time_base = _TIME_BASE
        self._pts += FRAME_SAMPLES
        return frame
