"""The carrier's end of a media stream of JSON text frames answered in kind (Twilio, Telnyx,
Plivo), for ``fakes.carriers``: ``JsonStream``, and ``MarkedPlayout``, its play queue.

Each of these carriers buffers the G.711 the gateway sends (8 kHz, a byte a sample) and plays
it in order, at real time (20 ms at a time, or the stream's frame) or, for a test, all at once;
a marker (Twilio's and Telnyx's ``mark``, Plivo's ``checkpoint``) is sent back once the media
queued before it has played, at once when nothing is queued; a clear drops the media not played
yet. What becomes of the markers pending at a clear is where they differ: Twilio "sends back
``mark`` messages matching any remaining ``mark`` messages" and "Queued marks are sent back by
Telnyx" (``marks_on_clear="echo"``), while Plivo emits ``playedStream`` "only if the preceding
events were played successfully" (``"drop"``).

A carrier gives ``JsonStream`` its name, the shape of its messages, the events it takes and how
it hangs up; the socket's life (reading, recording, waiting, hanging up, dropping, winding down)
is the same for all three. Off-protocol frames land in ``protocol_errors`` (``_refuse``: Telnyx
also answers them with an ``error`` frame).

Sources: https://www.twilio.com/docs/voice/media-streams/websocket-messages,
https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket,
https://plivo.com/docs/voice/xml/the-stream-element/checkpoint-event
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

import aiohttp

from fakes.carriers.stream_kit import Changes, Received, cut, mark_name, send_frame
from gateway.audio.resample import StreamResampler

__all__ = ["BYTES_PER_MS", "JsonStream", "MarkedPlayout"]

_T = TypeVar("_T")

BYTES_PER_MS = 8  # G.711 at 8 kHz
_LATE_S = 0.1  # after a stall of the event loop, catch up at most this much instead of rushing


@dataclass(frozen=True, slots=True)
class _Mark:
    name: str


class MarkedPlayout:
    """The play queue of one stream: media in order, markers where they were sent.

    ``echo(name, cleared)`` sends a marker back (``cleared``: a clear did it); ``realtime=False``
    plays what arrives at once (``settle`` after each message), else ``run`` plays ``frame_ms``
    at a time until ``stop``."""

    def __init__(
        self,
        echo: Callable[[str, bool], Awaitable[None]],
        *,
        realtime: bool,
        frame_ms: int = 20,
        marks_on_clear: Literal["echo", "drop"] = "echo",
    ) -> None:
        self.realtime = realtime
        self.marks_on_clear = marks_on_clear
        self.heard = bytearray()  # played so far
        self.cleared = bytearray()  # dropped by clear, never played
        self.dropped: list[str] = []  # markers pending at a clear, never echoed ("drop")
        self._echo = echo
        self._frame_bytes = frame_ms * BYTES_PER_MS
        self._queue: deque[bytes | _Mark] = deque()
        self._wake = asyncio.Event()
        self._stopped = False

    def media(self, audio: bytes) -> None:
        self._queue.append(audio)
        self._wake.set()

    def mark(self, name: str) -> None:
        self._queue.append(_Mark(name))
        self._wake.set()

    async def clear(self) -> None:
        """Drop the media not played yet; the markers pending are echoed, or dropped."""
        pending = [item.name for item in self._queue if isinstance(item, _Mark)]
        for item in self._queue:
            if isinstance(item, bytes):
                self.cleared += item
        self._queue.clear()
        if self.marks_on_clear == "drop":
            self.dropped.extend(pending)
            return
        for name in pending:
            await self._echo(name, True)

    def queued_ms(self) -> float:
        """Media received and not yet played."""
        return sum(len(item) for item in self._queue if isinstance(item, bytes)) / BYTES_PER_MS

    async def settle(self) -> None:
        """Not real time: play everything queued now."""
        while not self.realtime and self._queue:
            item = self._queue.popleft()
            if isinstance(item, _Mark):
                await self._echo(item.name, False)
            else:
                self.heard += item

    async def run(self) -> None:
        """Real time: a frame at a time; a marker is echoed once the media before it has played."""
        next_at: float | None = None
        while not self._stopped:
            if not self._queue:
                next_at = None  # idle: the next media plays at once
                self._wake.clear()
                await self._wake.wait()
                continue
            head = self._queue.popleft()
            if isinstance(head, _Mark):
                await self._echo(head.name, False)
                continue
            piece, rest = head[: self._frame_bytes], head[self._frame_bytes :]
            if rest:
                self._queue.appendleft(rest)
            self.heard += piece
            now = time.monotonic()
            next_at = max(next_at or now, now - _LATE_S) + len(piece) / BYTES_PER_MS / 1000
            await asyncio.sleep(max(next_at - now, 0))

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()


class JsonStream:
    """The carrier's end of a media stream of JSON text frames, on a real WebSocket.

    A carrier gives its name (``carrier``), the shape of its messages (``_send``), the events
    it takes (``_on_message``; ``_take_media_mark_clear`` is Twilio's set, which Telnyx shares)
    and its ``hang_up``; it starts the reader and the playout with ``_serve``."""

    carrier: ClassVar[str] = "the carrier"  # in what protocol_errors says

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, playout: MarkedPlayout) -> None:
        self.ws = ws
        self.received: list[Received] = []
        self.sent: list[dict[str, Any]] = []  # what the carrier sent, in the order they left
        self.protocol_errors: list[str] = []
        self.closed = asyncio.Event()
        self._playout = playout
        self._changes = Changes()
        self._resamplers: dict[int, StreamResampler] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # -- what the caller does ---------------------------------------------------------------------

    async def hang_up(self, *, stop_message: bool = True) -> None:
        raise NotImplementedError

    async def drop(self) -> None:
        """Fault: the connection dies with no message and no close handshake."""
        self._ended_by("carrier")
        cut(self.ws)
        await self._wind_down()

    async def send_raw(self, data: str | bytes) -> None:
        """Anything at all on the stream (a malformed frame, an event the carrier may add)."""
        await send_frame(self.ws, data)

    def _narrowband(self, pcm: bytes, rate: int) -> bytes:
        """What ``speak`` was given (PCM16 at 8 or 16 kHz), at 8 kHz: one filter a rate."""
        if rate not in (8000, 16000):
            raise ValueError("speak takes PCM16 at 8000 or 16000 Hz")
        if rate != 8000:
            pcm = self._resamplers.setdefault(rate, StreamResampler(rate, 8000)).process(pcm)
        return pcm

    async def _hang_up(self, stop: Mapping[str, Any] | None) -> None:
        """The stream ends: ``stop`` with these fields (None: no ``stop``), then the socket
        closes."""
        if self.ws.closed:
            return
        self._ended_by("carrier")
        if stop is not None:
            await self._send("stop", **stop)
        await self.ws.close()
        await self._wind_down()

    # -- what the caller heard, what the gateway sent ----------------------------------------------

    def heard(self) -> bytes:
        """What was played to the caller so far, as the gateway sent it (µ-law, or Telnyx's
        ``play_codec``); what a clear dropped never plays."""
        return bytes(self._playout.heard)

    def received_events(self, event: str | None = None) -> list[Received]:
        return [r for r in self.received if event is None or r.event == event]

    async def wait_for(
        self,
        event: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
        *,
        count: int = 1,
    ) -> Received:
        """The ``count``-th message of kind ``event`` the gateway sent (counting those already in);
        ``ConnectionError`` if the stream closes first, ``TimeoutError`` after ``timeout``."""

        def nth() -> Received | None:
            matches = self.received_events(event)
            return matches[count - 1] if len(matches) >= count else None

        return await self._found(nth, timeout, f"{event} #{count}")

    async def wait_closed(
        self,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> int | None:
        """Until the stream is closed (by the gateway or by us); its close code."""
        await asyncio.wait_for(self.closed.wait(), timeout)
        return self.ws.close_code

    async def _until(self, ready: Callable[[], bool], within_s: float) -> None:
        """Until ``ready()`` or the stream closes; ``TimeoutError`` after ``within_s``."""
        await self._changes.until(lambda: ready() or self.closed.is_set(), within_s)

    async def _found(self, find: Callable[[], _T | None], within_s: float, what: str) -> _T:
        """What ``find()`` finds, once it does: ``ConnectionError`` if the stream closes before
        ``what``, ``TimeoutError`` after ``within_s``."""
        await self._until(lambda: find() is not None, within_s)
        if (found := find()) is None:
            raise ConnectionError(f"the stream closed before {what}")
        return found

    # -- the carrier's side of the socket ---------------------------------------------------------

    def _serve(self) -> None:
        """Read the socket and, at real time, play what it brings."""
        self._tasks.append(asyncio.create_task(self._read()))
        if self._playout.realtime:
            self._tasks.append(asyncio.create_task(self._playout.run()))

    async def _send(self, event: str, **fields: Any) -> None:
        raise NotImplementedError  # the carrier's message shape, then _emit

    async def _emit(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.send_str(json.dumps(message))

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await self._on_text(msg.data)
                elif msg.type == aiohttp.WSMsgType.BINARY:
                    await self._refuse(f"a binary frame ({self.carrier}'s stream is JSON text)")
        finally:
            self._ended_by("gateway")
            await self._wind_down()

    async def _on_text(self, text: str) -> None:
        try:
            message = json.loads(text)
            event = self._event_name(message["event"])
        except (ValueError, TypeError, KeyError):
            await self._refuse("a frame that is not a JSON object with an event")
            return
        self.received.append(Received(time.monotonic(), event, message))
        await self._on_message(event, message)
        await self._playout.settle()
        self._changes.notify()

    @staticmethod
    def _event_name(value: object) -> str:
        """A message's ``event`` as the carrier reads it (``TypeError``: not one)."""
        return str(value)

    async def _on_message(self, event: str, message: dict[str, Any]) -> None:
        raise NotImplementedError  # the events the carrier takes

    async def _take_media_mark_clear(self, event: str, message: dict[str, Any]) -> None:
        """Twilio's events, which Telnyx takes too: ``media`` (``_on_media``), ``mark`` (played
        in turn), ``clear``."""
        if event == "media":
            await self._on_media(message)
        elif event == "mark" and (name := mark_name(message)) is not None:
            self._playout.mark(name)
        elif event == "mark":
            await self._refuse("a mark without mark.name")
        elif event == "clear":
            await self._playout.clear()
        else:
            await self._refuse(f"an event {self.carrier} does not take: {event}")

    async def _on_media(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _refuse(self, problem: str) -> None:
        """An off-protocol frame: noted (a carrier that answers it with an error frame adds
        that)."""
        self.protocol_errors.append(problem)

    def _ended_by(self, who: Literal["carrier", "gateway"]) -> None:
        """Who ends the stream, told as it ends (again by the reader once it has)."""

    async def _wind_down(self) -> None:
        self.closed.set()
        self._playout.stop()
        self._changes.notify()

    async def _finish(self) -> None:
        """Hang up if the stream is still on (2 s at most), stop the playout and the reader."""
        if not self.ws.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.hang_up(), 2.0)
        await self._wind_down()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
