"""The session's reply audio as an outbound WebRTC track, paced at real time.

aiortc's sender calls ``recv()`` back to back, so the track paces itself: one 20 ms frame of
48 kHz mono PCM16 per 20 ms of the loop's clock, silence when nothing is queued (a track that
raises stops for good), timestamps continuous. A reply's first frame goes as it arrives, not
at the next tick, and the pace starts from it. ``clear`` drops what is queued (barge-in).

Each frame remembers the response it belongs to (``begin`` names the response whose audio
follows), and ``on_played`` hears, every ``REPORT_EVERY`` frames of a response and at its last
queued frame, how many milliseconds of it have gone to the encoder: what the peer has been
sent, which is what the edge reports as played (the peer's jitter buffer, tens of
milliseconds, comes on top).
"""

from __future__ import annotations

import asyncio
import fractions
from collections import deque
from collections.abc import Callable

import av
from aiortc.mediastreams import MediaStreamTrack

__all__ = ["FRAME_SAMPLES", "RATE", "PcmOutTrack"]

RATE = 48000
FRAME_MS = 20
FRAME_SAMPLES = RATE * FRAME_MS // 1000
FRAME_BYTES = FRAME_SAMPLES * 2
REPORT_EVERY = 3  # frames: 60 ms
_TIME_BASE = fractions.Fraction(1, RATE)
_SILENCE = bytes(FRAME_BYTES)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class PcmOutTrack(MediaStreamTrack):
    kind = "audio"

    def __init__(self, on_played: Callable[[str, int], None] | None = None) -> None:
        super().__init__()
        self._queue: deque[tuple[str | None, bytes]] = deque()
        self._held = bytearray()
        self._response: str | None = None  # whose audio push() queues
        self._pts = 0
        self._next_at: float | None = None
        self.on_played = on_played
        self._waiter: asyncio.Future[None] | None = None  # recv() waiting to send silence
        self._sent: dict[str, int] = {}  # frames sent, per response (the last few)
        self.sent_audio_ms = 0  # reply audio (not silence) handed to the encoder

    def begin(self, response_id: str | None) -> None:
        """The audio pushed from now on is this response's (None: nobody's)."""
        self.flush()
        self._response = response_id

    def push(self, pcm: bytes) -> None:
        """Queue reply audio (48 kHz mono PCM16), cut into 20 ms frames."""
        self._held += pcm
        whole = len(self._held) - len(self._held) % FRAME_BYTES
        for start in range(0, whole, FRAME_BYTES):
            self._queue.append((self._response, bytes(self._held[start : start + FRAME_BYTES])))
        del self._held[:whole]
        if whole:
            _wake(self._waiter)

    def flush(self) -> None:
        """The reply ended: its last partial frame goes, padded with silence."""
        if self._held:
            padded = bytes(self._held) + bytes(FRAME_BYTES - len(self._held))
            self._queue.append((self._response, padded))
            self._held.clear()

    def clear(self) -> None:
        """Barge-in: nothing queued is sent."""
        self._queue.clear()
        self._held.clear()

    @property
    def queued_ms(self) -> int:
        return len(self._queue) * FRAME_MS

    def _next_pcm(self) -> bytes:
        if not self._queue:
            return _SILENCE
        response, pcm = self._queue.popleft()
        self.sent_audio_ms += FRAME_MS
        if response is not None:
            frames = self._sent.get(response, 0) + 1
            self._sent[response] = frames
            if len(self._sent) > 4:  # only the responses that may still be truncated
                del self._sent[next(iter(self._sent))]
            last = not self._queue or self._queue[0][0] != response
            if self.on_played is not None and (last or frames % REPORT_EVERY == 0):
                self.on_played(response, frames * FRAME_MS)
        return pcm

    async def recv(self) -> av.AudioFrame:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._next_at is None or self._next_at < now - 0.1:
            self._next_at = now  # first frame, or the loop fell behind: start afresh
        wait = self._next_at - now
        if wait > 0 and self._queue:
            await asyncio.sleep(wait)  # a reply playing: its pace
        elif wait > 0:
            # Silence is due: a reply's first audio arriving meanwhile goes at once, not at the
            # next tick (10 ms sooner on average), and the pace starts again from it.
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(wait, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
            if self._queue:
                self._next_at = loop.time()
        self._next_at += FRAME_MS / 1000
        frame = av.AudioFrame(format="s16", layout="mono", samples=FRAME_SAMPLES)
        frame.planes[0].update(self._next_pcm())
        frame.sample_rate = RATE
        frame.pts = self._pts
        frame.time_base = _TIME_BASE
        self._pts += FRAME_SAMPLES
        return frame
