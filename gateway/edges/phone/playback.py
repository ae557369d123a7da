"""Outbound audio of a phone call: 20 ms frames, markers, the played position, barge-in.

Theory of operation. ``PlaybackTracker`` is a pure state machine for the gateway → carrier
direction. The bridge feeds it the line's audio per response (``add``, then ``end``), asks it
what to send (``next_items``), tells it of the carrier's marker echoes (``echoed``) and of
barge-in (``clear``). No I/O and no clock: pacing is the caller's business.

- Framing. The audio of one response is cut into exact ``frame_bytes`` frames (160 bytes = 20 ms
  of µ-law at 8 samples per ms; 640 of PCM16 at 16 kHz). A response's last partial frame is held
  until ``end``, which pads it with the line's silence; no byte is lost and no padding appears
  anywhere else. Audio of a
  different response id ends the current response first, as ``end`` would: responses play one
  after another and never share a frame.
- Marks. After every ``mark_every_frames`` frames of a response, and after its last frame, a
  ``MarkOut`` follows in the stream. Its name is ``f"{response_id}:{end_ms}:{n}"``: ``end_ms`` is
  the response's audio sent before the mark, in whole ms (padding excluded, so the last mark of
  a response may fall between two frame boundaries), ``n`` a counter that makes it unique.
- Played position. The carrier echoes a mark once it has played everything sent before it
  (a carrier without echoes has the bridge echo them on its clock); marks echo in order, so an
  echo confirms every earlier mark too. ``echoed`` returns the response and its played ms; a
  name it does not know (after ``clear``, or never sent) gives None.
- Barge-in. ``clear`` drops every frame not yet sent and forgets outstanding marks (the carrier
  empties its buffer and may echo them at once: those echoes are stale). Further audio of the
  interrupted response is ignored until audio of another response arrives.

Illegal inputs raise ``ValueError``: audio for a response that already ended, or a negative
``max_frames``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Frame", "MarkOut", "PlaybackTracker", "parse_mark_name"]

ULAW_BYTES_PER_MS = 8  # the default line: µ-law at 8 kHz, one byte a sample
ULAW_SILENCE = b"\xff"


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of audio to send in the carrier's media message."""

    response_id: str
    audio: bytes = field(repr=False)
    type: Literal["frame"] = "frame"


@dataclass(frozen=True, slots=True)
class MarkOut:
    """A marker to send (a Twilio ``mark``, a Plivo ``checkpoint``, …)."""

    name: str
    type: Literal["mark"] = "mark"


def parse_mark_name(name: str) -> tuple[str, int, int] | None:
    """``(response_id, end_ms, n)`` of a mark name made here, None if it is not one."""
    parts = name.rsplit(":", 2)
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts[1:]):
        return None
    return parts[0], int(parts[1]), int(parts[2])


@dataclass(slots=True)
class _Open:
    """The response whose audio is being framed."""

    response_id: str
    held: bytearray = field(default_factory=bytearray)
    audio_bytes: int = 0  # audio cut into frames so far, padding excluded
    frames_since_mark: int = 0


@dataclass(frozen=True, slots=True)
class _QueuedMark:
    out: MarkOut
    response_id: str
    end_ms: int


@dataclass(frozen=True, slots=True)
class _SentMark:
    response_id: str
    end_ms: int
    frames_before: int  # frames sent, over the whole call, before this mark


class PlaybackTracker:
    def __init__(
        self,
        frame_bytes: int = 160,
        mark_every_frames: int = 5,
        *,
        bytes_per_ms: int = ULAW_BYTES_PER_MS,
        silence: bytes = ULAW_SILENCE,
    ) -> None:
        if frame_bytes <= 0 or mark_every_frames <= 0 or bytes_per_ms <= 0:
            raise ValueError("frame_bytes, mark_every_frames and bytes_per_ms must be positive")
        if frame_bytes % len(silence):
            raise ValueError("a frame holds whole samples")
        self._frame_bytes = frame_bytes
        self._bytes_per_ms = bytes_per_ms
        self._silence = silence
        self._mark_every = mark_every_frames
        self._queue: deque[Frame | _QueuedMark] = deque()
        self._pending_frames = 0
        self._open: _Open | None = None
        self._ended: set[str] = set()
        self._ignored: str | None = None
        self._marks_made = 0
        self._outstanding: OrderedDict[str, _SentMark] = OrderedDict()
        self._frames_sent = 0
        self._frames_confirmed = 0
        self._last_sent: str | None = None

    @property
    def pending_frames(self) -> int:
        """Frames queued and not yet returned by ``next_items``."""
        return self._pending_frames

    @property
    def unconfirmed_ms(self) -> int:
        """Audio sent to the carrier (padding included) that no mark echo has confirmed yet."""
        sent = self._frames_sent - self._frames_confirmed
        return sent * self._frame_bytes // self._bytes_per_ms

    def add(self, response_id: str, audio: bytes) -> None:
        """Queue audio of ``response_id``; only whole frames until ``end``."""
        if response_id == self._ignored:
            return
        self._ignored = None
        if response_id in self._ended:
            raise ValueError(f"response {response_id!r} already ended")
        current = self._open
        if current is None or current.response_id != response_id:
            if current is not None:
                self._finish(current)
            current = self._open = _Open(response_id)
        held = current.held
        held += audio
        size = self._frame_bytes
        whole = len(held) - len(held) % size
        for start in range(0, whole, size):
            self._queue_frame(current, bytes(held[start : start + size]), size)
        del held[:whole]

    def end(self, response_id: str) -> None:
        """``response_id`` has no more audio: pad and queue its last frame, then a mark."""
        current = self._open
        if current is not None and current.response_id == response_id:
            self._finish(current)
            self._open = None
        elif response_id != self._ignored:
            self._ended.add(response_id)

    def next_items(self, max_frames: int) -> list[Frame | MarkOut]:
        """Up to ``max_frames`` frames in order, with the marks due among and right after them."""
        if max_frames < 0:
            raise ValueError("max_frames must not be negative")
        items: list[Frame | MarkOut] = []
        queue = self._queue
        sent = 0
        while queue:
            item = queue[0]
            if isinstance(item, Frame):
                if sent == max_frames:
                    break
                sent += 1
                self._frames_sent += 1
                self._last_sent = item.response_id
                items.append(item)
            else:
                self._outstanding[item.out.name] = _SentMark(
                    item.response_id, item.end_ms, self._frames_sent
                )
                items.append(item.out)
            queue.popleft()
        self._pending_frames -= sent
        return items

    def echoed(self, name: str) -> tuple[str, int] | None:
        """The carrier played up to mark ``name``: ``(response_id, played_ms)``, None if stale."""
        if name not in self._outstanding:
            return None
        while True:
            popped, mark = self._outstanding.popitem(last=False)
            if popped == name:
                self._frames_confirmed = mark.frames_before
                return mark.response_id, mark.end_ms

    def clear(self) -> str | None:
        """Barge-in: drop unsent audio, forget marks; the interrupted response's id, if any.

        The interrupted response is the latest one with audio not yet played: still open, or
        with frames queued, or with frames sent and not confirmed. Its later audio is ignored.
        """
        interrupted = self._latest_unplayed()
        self._queue.clear()
        self._pending_frames = 0
        self._outstanding.clear()
        self._frames_confirmed = self._frames_sent
        if self._open is not None:
            self._ended.add(self._open.response_id)
            self._open = None
        if interrupted is not None:
            self._ignored = interrupted
        return interrupted

    def _latest_unplayed(self) -> str | None:
        if self._open is not None:
            return self._open.response_id
        for item in reversed(self._queue):
            if isinstance(item, Frame):
                return item.response_id
        if self._frames_sent > self._frames_confirmed:
            return self._last_sent
        return None

    def _queue_frame(self, response: _Open, audio: bytes, audio_bytes: int) -> None:
        self._queue.append(Frame(response.response_id, audio))
        self._pending_frames += 1
        response.audio_bytes += audio_bytes
        response.frames_since_mark += 1
        if response.frames_since_mark == self._mark_every:
            self._queue_mark(response)

    def _queue_mark(self, response: _Open) -> None:
        end_ms = response.audio_bytes // self._bytes_per_ms
        name = f"{response.response_id}:{end_ms}:{self._marks_made}"
        self._marks_made += 1
        self._queue.append(_QueuedMark(MarkOut(name), response.response_id, end_ms))
        response.frames_since_mark = 0

    def _finish(self, response: _Open) -> None:
        held = response.held
        if held:
            missing = self._frame_bytes - len(held)
            padding = (self._silence * missing)[:missing]
            self._queue_frame(response, bytes(held) + padding, len(held))
            held.clear()
        if response.frames_since_mark:
            self._queue_mark(response)
        self._ended.add(response.response_id)
