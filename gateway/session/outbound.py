"""The writer to one client: control events never wait behind audio, audio is dropped first.

A slow client must never block the upstream reader, so producers only enqueue (no await); one
writer task drains control first, then audio. When the audio queue is full the oldest frame is
dropped and counted; control events are never dropped. A client so slow that its control
events pile past ``max_control_bytes`` is not reading at all: the queue is cut off and
``on_overflow`` is called (the server closes that socket; the session can still be resumed).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

__all__ = ["Outbound"]


class Outbound:
    def __init__(
        self,
        send_text: Callable[[str], Awaitable[None]],
        send_bytes: Callable[[bytes], Awaitable[None]],
        *,
        max_audio_frames: int,
        max_control_bytes: int = 8 * 1024 * 1024,
        on_audio_dropped: Callable[[], None] = lambda: None,
        on_overflow: Callable[[], None] = lambda: None,
    ) -> None:
        self._send_text = send_text
        self._send_bytes = send_bytes
        self._control: deque[tuple[str, int]] = deque()
        self._audio: deque[bytes] = deque()
        self._max_audio = max_audio_frames
        self._on_dropped = on_audio_dropped
        self._max_control_bytes = max_control_bytes
        self._control_bytes = 0
        self._on_overflow = on_overflow
        self.overflowed = False
        self._wake = asyncio.Event()
        self._closed = False
        self.dropped_audio = 0
        self.sent_events = 0
        self.sent_audio = 0

    def event(self, payload: bytes) -> None:
        if self._closed:
            return
        self._control_bytes += len(payload)
        if self._control_bytes > self._max_control_bytes:
            self.overflowed = True
            self._closed = True
            self._control.clear()
            self._audio.clear()
            self._wake.set()
            self._on_overflow()
            return
        self._control.append((payload.decode(), len(payload)))
        self._wake.set()

    def audio(self, pcm: bytes) -> None:
        if self._closed:
            return
        if len(self._audio) >= self._max_audio:
            self._audio.popleft()
            self.dropped_audio += 1
            self._on_dropped()
        self._audio.append(pcm)
        self._wake.set()

    def discard_audio(self) -> None:
        """Barge-in: queued speech of the interrupted response must not reach the client."""
        self._audio.clear()

    def close(self) -> None:
        """Stop accepting; ``run`` returns once what was queued is written."""
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        while True:
            if self._control:
                text, size = self._control.popleft()
                self._control_bytes -= size
                await self._send_text(text)
                self.sent_events += 1
            elif self._audio:
                await self._send_bytes(self._audio.popleft())
                self.sent_audio += 1
            elif self._closed:
                return
            else:
                self._wake.clear()
                await self._wake.wait()
