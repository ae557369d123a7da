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

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from fakes.carriers.json_stream import BYTES_PER_MS, MarkedPlayout

__all__ = ["OutOfOrder", "Playout", "StreamOptions"]

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


class Playout(MarkedPlayout):
    """The play queue of one stream (``fakes.carriers.playout``: 20 ms at a time, queued marks
    sent back on ``clear``). ``echo(name)`` sends a mark back; ``realtime=False`` plays what
    arrives at once (``settle`` after each frame). ``heard`` is in the stream's play codec."""

    def __init__(self, echo: Callable[[str], Awaitable[None]], *, realtime: bool) -> None:
        super().__init__(self._echoing, realtime=realtime)
        self.echoed: list[str] = []  # mark names echoed, in order
        self.echoed_at: dict[str, float] = {}  # mark name: when first echoed (monotonic)
        self._echo_out = echo

    @property
    def cleared_ms(self) -> float:
        """Media dropped by clear."""
        return len(self.cleared) / BYTES_PER_MS

    async def _echoing(self, name: str, cleared: bool) -> None:
        self.echoed.append(name)
        self.echoed_at.setdefault(name, time.monotonic())
        await self._echo_out(name)
