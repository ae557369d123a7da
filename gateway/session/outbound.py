"""The writer to one client: control events never wait behind audio, audio is dropped first.

A slow client must never block the upstream reader, so producers only enqueue (no await); one
writer task drains control first, then audio. When the audio queue is full the oldest frame is
dropped and counted; control events are never dropped.

Two events must not overtake audio, because the protocol orders them after it: a response's
``response.done`` follows its audio, and ``session.ended`` is the last thing sent. They are
queued with ``after_audio=True`` and travel in the audio lane, in order, but are never dropped.

A client so slow that its events pile past ``max_control_bytes`` is not reading at all: the
queues are cut off and ``on_overflow`` is called (the server drops that connection; the session
can still be resumed).

The hot path: with ``write_audio_now`` (a synchronous write that may refuse, e.g. while the
socket has unsent data), an audio frame is written at once when nothing is queued and the
writer is idle, which spares a task switch per frame; anything else takes the queues. It is
given the frame's standard base64 too when the upstream sent that (``AudioDelta.encoded``), for
a client that takes base64 (``/v1/realtime``): no encoding again.

The session hands over typed events (``ServerEvent``), never JSON: each client edge says what
it queues (``prepare``). The native edge encodes each event once, as it is queued (its size is
what counts against ``max_control_bytes``); a bridge queues the event itself (``as_is``, a fixed
size each) and translates it into its own protocol as it is written. Nothing parses the
session's output back.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from gateway.protocol import ServerEvent

__all__ = ["TYPED_EVENT_SIZE", "Outbound", "as_is"]

T = TypeVar("T")

# What one queued typed event counts against ``max_control_bytes`` (a bridge's events are not
# encoded here; a typical one is a few hundred bytes once translated).
TYPED_EVENT_SIZE = 512


def as_is(event: ServerEvent) -> tuple[ServerEvent, int]:
    """A bridge's ``prepare``: the event itself is queued, at ``TYPED_EVENT_SIZE``."""
    return event, TYPED_EVENT_SIZE


class _Ordered(Generic[T]):
    """An event queued behind the audio that precedes it."""

    __slots__ = ("payload", "size")

    def __init__(self, payload: T, size: int) -> None:
        self.payload = payload
        self.size = size


class Outbound(Generic[T]):
    def __init__(
        self,
        send_event: Callable[[T], Awaitable[None]],
        send_bytes: Callable[[bytes], Awaitable[None]],
        *,
        prepare: Callable[[ServerEvent], tuple[T, int]],
        max_audio_frames: int,
        max_control_bytes: int = 8 * 1024 * 1024,
        on_audio_dropped: Callable[[], None] = lambda: None,
        on_overflow: Callable[[], None] = lambda: None,
        ordered: bool = False,
        write_audio_now: Callable[[bytes, str | None], bool] | None = None,
        edge: str = "websocket",
    ) -> None:
        """``edge``: the client edge it writes to, as the operator's console names it."""
        self.edge = edge
        self._send_event = send_event
        self._send_bytes = send_bytes
        self._prepare = prepare
        self._control: deque[tuple[T, int]] = deque()
        self._lane: deque[bytes | _Ordered[T]] = deque()  # audio frames and ordered events
        self._audio_frames = 0
        self._max_audio = max_audio_frames
        self._on_dropped = on_audio_dropped
        self._max_control_bytes = max_control_bytes
        self._control_bytes = 0
        self._on_overflow = on_overflow
        # Every event keeps its place behind queued audio (a bridge that attributes audio to
        # the response last started needs the exact order; latency is not its concern).
        self._ordered = ordered
        self.overflowed = False
        self._write_now = write_audio_now
        self._writer_idle = False  # the writer waits for work: it holds no frame of its own
        self._wake = asyncio.Event()
        self._closed = False
        # Set once closed: the socket's handler stops reading (e.g. another socket took over).
        self.released = asyncio.Event()
        self.dropped_audio = 0
        self.sent_events = 0
        self.sent_audio = 0

    def event(self, event: ServerEvent, *, after_audio: bool = False) -> None:
        if self._closed:
            return
        payload, size = self._prepare(event)
        self._control_bytes += size
        if self._control_bytes > self._max_control_bytes:
            self._overflow()
            return
        if (after_audio or self._ordered) and self._lane:
            self._lane.append(_Ordered(payload, size))
        else:
            self._control.append((payload, size))
        self._wake.set()

    def audio(self, pcm: bytes, encoded: str | None = None) -> None:
        if self._closed:
            return
        if (
            self._writer_idle
            and self._write_now is not None
            and not self._lane
            and not self._control
            and self._write_now(pcm, encoded)
        ):
            self.sent_audio += 1
            return
        if self._audio_frames >= self._max_audio:
            self._drop_oldest_frame()
        self._lane.append(pcm)
        self._audio_frames += 1
        self._wake.set()

    def discard_audio(self) -> None:
        """Barge-in: queued speech of the interrupted response must not reach the client."""
        kept = [item for item in self._lane if isinstance(item, _Ordered)]
        self._lane = deque(kept)
        self._audio_frames = 0

    def close(self) -> None:
        """Stop accepting; ``run`` returns once what was queued is written."""
        self._closed = True
        self.released.set()
        self._wake.set()

    async def run(self) -> None:
        while True:
            if self._control:
                payload, size = self._control.popleft()
                self._control_bytes -= size
                await self._send_event(payload)
                self.sent_events += 1
            elif self._lane:
                item = self._lane.popleft()
                if isinstance(item, _Ordered):
                    self._control_bytes -= item.size
                    await self._send_event(item.payload)
                    self.sent_events += 1
                else:
                    self._audio_frames -= 1
                    await self._send_bytes(item)
                    self.sent_audio += 1
            elif self._closed:
                return
            else:
                self._wake.clear()
                self._writer_idle = True
                try:
                    await self._wake.wait()
                finally:
                    self._writer_idle = False

    def _drop_oldest_frame(self) -> None:
        for index, item in enumerate(self._lane):
            if not isinstance(item, _Ordered):
                del self._lane[index]
                self._audio_frames -= 1
                self.dropped_audio += 1
                self._on_dropped()
                return

    def _overflow(self) -> None:
        self.overflowed = True
        self._closed = True
        self.released.set()
        self._control.clear()
        self._lane.clear()
        self._audio_frames = 0
        self._wake.set()
        self._on_overflow()
