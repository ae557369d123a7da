"""Telnyx's media timing, both ways, for ``fakes.carriers.telnyx``.

- What Telnyx sends: "Media frame order is not guaranteed" (``media.chunk`` and
  ``sequence_number`` give the order): ``OutOfOrder`` permutes frames as a fault.
- What it receives on a bidirectional stream (RTP mode): it plays the media in order at real
  time and echoes each ``mark`` once the media queued before it has played, or at once when
  nothing is queued; ``clear`` stops the playback, drops the queued media and sends the queued
  marks back. ``Playout`` is that queue.

Source: https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket
("Ordering", "Mark Callback Frame", "Clear Frame").
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["OutOfOrder", "Playout", "StreamOptions"]

_BYTES_PER_MS = 8  # G.711 at 8 kHz
_STEP = 20 * _BYTES_PER_MS  # played 20 ms at a time
_LATE_S = 0.1  # after a stall, catch up at most this much instead of rushing
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class OutOfOrder:
    """Fault: media frames leave in windows of ``window``, each reversed (``seed`` None; with a
    window of 2, neighbours swapped) or shuffled by ``random.Random(seed)``."""

    window: int = 2
    seed: int | None = None

    def permute(self, items: list[_T]) -> list[_T]:
        shuffler = None if self.seed is None else random.Random(self.seed)
        out: list[_T] = []
        for start in range(0, len(items), max(self.window, 1)):
            window = items[start : start + self.window]
            if shuffler is None:
                window.reverse()
            else:
                shuffler.shuffle(window)
            out.extend(window)
        return out


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """How a simulated stream behaves: ``realtime`` playout (False: played at once),
    ``out_of_order`` media frames (a fault), ``error_frames`` in answer to off-protocol frames."""

    realtime: bool = True
    out_of_order: OutOfOrder | None = None
    error_frames: bool = True


@dataclass(frozen=True, slots=True)
class _Mark:
    name: str


class Playout:
    """The play queue of one stream. ``echo(name)`` sends a mark back; ``realtime=False`` plays
    what arrives at once (``settle`` after each frame)."""

    def __init__(self, echo: Callable[[str], Awaitable[None]], *, realtime: bool) -> None:
        self.realtime = realtime
        self.heard = bytearray()  # what the caller heard, in the stream's play codec
        self.echoed: list[str] = []  # mark names echoed, in order
        self.echoed_at: dict[str, float] = {}  # mark name: when first echoed (monotonic)
        self.cleared_ms = 0.0  # media dropped by clear
        self._echo_out = echo
        self._queue: deque[bytes | _Mark] = deque()
        self._queued = asyncio.Event()
        self._stopped = False

    def media(self, audio: bytes) -> None:
        self._queue.append(audio)
        self._queued.set()

    def mark(self, name: str) -> None:
        self._queue.append(_Mark(name))
        self._queued.set()

    async def clear(self) -> None:
        pending = [item.name for item in self._queue if isinstance(item, _Mark)]
        self.cleared_ms += self.queued_ms()
        self._queue.clear()
        for name in pending:  # "Queued marks are sent back by Telnyx."
            await self._echo(name)

    def queued_ms(self) -> float:
        queued = sum(len(item) for item in self._queue if isinstance(item, bytes))
        return queued / _BYTES_PER_MS

    async def settle(self) -> None:
        """Not real time: play everything queued now."""
        if self.realtime:
            return
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, _Mark):
                await self._echo(item.name)
            else:
                self.heard += item

    async def run(self) -> None:
        """Real time: 20 ms at a time, until ``stop``."""
        next_at: float | None = None
        while not self._stopped:
            if not self._queue:
                next_at = None  # idle: the next media plays at once
                self._queued.clear()
                await self._queued.wait()
                continue
            head = self._queue[0]
            if isinstance(head, _Mark):
                self._queue.popleft()
                await self._echo(head.name)
                continue
            piece, rest = head[:_STEP], head[_STEP:]
            if rest:
                self._queue[0] = rest
            else:
                self._queue.popleft()
            self.heard += piece
            now = time.monotonic()
            next_at = max(next_at or now, now - _LATE_S) + len(piece) / _BYTES_PER_MS / 1000
            await asyncio.sleep(max(next_at - now, 0))

    def stop(self) -> None:
        self._stopped = True
        self._queued.set()

    async def _echo(self, name: str) -> None:
        self.echoed.append(name)
        self.echoed_at.setdefault(name, time.monotonic())
        await self._echo_out(name)
