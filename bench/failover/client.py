"""The bench's client of the gateway (``/v1/session``): every message stamped as it arrives,
and a microphone that streams 20 ms frames in real time.

Times are this process's ``time.perf_counter()``, the clock the in-process fakes stamp their
frames with too (``bench.failover.stage``). A reader task stamps each message as aiohttp hands
it over and keeps it in arrival order (``Arrival``); ``wait_for`` looks through what arrived
(from an index on) and waits, bounded, for more.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.failover.audio import FRAME_MS, frame_bytes, silence, tone

__all__ = ["Arrival", "Microphone", "SessionClient", "SessionClosed"]


class SessionClosed(Exception):
    """The gateway closed the socket before what was waited for arrived."""


@dataclass(frozen=True, slots=True)
class Arrival:
    at: float  # perf_counter
    event: dict[str, Any] | None  # a text message; None for a binary frame (audio)
    audio_bytes: int = 0

    @property
    def type(self) -> str:
        return "audio" if self.event is None else str(self.event.get("type"))


@dataclass
class SessionClient:
    ws: aiohttp.ClientWebSocketResponse
    arrivals: list[Arrival] = field(default_factory=list)
    closed: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _reader: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            while True:
                message = await self.ws.receive()
                now = time.perf_counter()
                if message.type == aiohttp.WSMsgType.BINARY:
                    self.arrivals.append(Arrival(now, None, len(message.data)))
                elif message.type == aiohttp.WSMsgType.TEXT:
                    self.arrivals.append(Arrival(now, json.loads(message.data)))
                else:
                    return
                self._changed.set()
        finally:
            self.closed = True
            self._changed.set()

    async def send(self, type_: str, **fields: Any) -> float:
        """Sends an event; returns when it was handed to the socket."""
        text = json.dumps({"type": type_, **fields})
        at = time.perf_counter()
        await self.ws.send_str(text)
        return at

    async def send_audio(self, pcm: bytes) -> None:
        await self.ws.send_bytes(pcm)

    async def wait_for(
        self, match: Callable[[Arrival], bool], timeout_s: float, start: int = 0
    ) -> tuple[int, Arrival]:
        """The first arrival from index ``start`` on that ``match`` accepts, and its index;
        ``TimeoutError`` after ``timeout_s``, ``SessionClosed`` if the socket closes first."""
        deadline = time.perf_counter() + timeout_s
        at = start
        while True:
            while at < len(self.arrivals):
                if match(self.arrivals[at]):
                    return at, self.arrivals[at]
                at += 1
            if self.closed:
                raise SessionClosed(self._describe_end())
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    async def wait_type(self, type_: str, timeout_s: float, start: int = 0, **fields: Any) -> int:
        """The index of the first event of ``type_`` (with those fields) from ``start`` on."""

        def match(arrival: Arrival) -> bool:
            event = arrival.event
            return (
                event is not None
                and event.get("type") == type_
                and all(event.get(k) == v for k, v in fields.items())
            )

        index, _ = await self.wait_for(match, timeout_s, start)
        return index

    def events(self, type_: str, start: int = 0) -> list[tuple[int, dict[str, Any]]]:
        return [
            (i, a.event)
            for i, a in enumerate(self.arrivals[start:], start)
            if a.event is not None and a.event.get("type") == type_
        ]

    def _describe_end(self) -> str:
        ended = [a.event for a in self.arrivals if a.type in ("session.ended", "error")]
        return f"the gateway closed the session: {ended[-2:]}"

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if not self.ws.closed:
                await self.ws.send_str('{"type":"session.end"}')
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), 2.0)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader


class Microphone:
    """Streams the user's audio in real time, 20 ms per frame, on an absolute schedule (no
    drift): silence, then each utterance asked for (``say``), then silence again, as an open
    microphone does, until ``stop``."""

    def __init__(self, client: SessionClient, rate: int) -> None:
        self._client = client
        self._rate = rate
        self._frame = frame_bytes(rate)
        self._queue: list[bytes] = []
        self._task: asyncio.Task[None] | None = None
        self.frames_sent = 0
        # When the last frame of each utterance was handed to the socket, and its tone's length.
        self.utterances: list[tuple[float, int]] = []
        self._pending: list[tuple[int, int]] = []  # (frame index of the last tone frame, ms)
        self._ended = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def say(self, tone_ms: int) -> None:
        """An utterance of ``tone_ms`` (a whole number of frames) after the frames queued."""
        pcm = tone(tone_ms, self._rate)
        frames = [pcm[i : i + self._frame] for i in range(0, len(pcm), self._frame)]
        self._queue.extend(frames)
        self._pending.append((self.frames_sent + len(self._queue) - 1, tone_ms))

    def queued_frames(self) -> int:
        return len(self._queue)

    async def _run(self) -> None:
        quiet = silence(FRAME_MS, self._rate)
        step = FRAME_MS / 1000
        begin = time.perf_counter()
        while True:
            pcm = self._queue.pop(0) if self._queue else quiet
            await self._client.send_audio(pcm)
            sent_at = time.perf_counter()
            while self._pending and self._pending[0][0] <= self.frames_sent:
                _, ms = self._pending.pop(0)
                self.utterances.append((sent_at, ms))
            self.frames_sent += 1
            delay = begin + self.frames_sent * step - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
