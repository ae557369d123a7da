"""One WebSocket of a soak client to a gateway node, read by a task of its own.

Text events are queued in arrival order for the session's logic (``next``); binary frames (the
assistant's speech) are only counted, and the first one after ``expect_audio`` is timed (the
voice latency). ``pause_reading`` makes it a client that stops reading; ``drop`` loses the
socket without a close frame, as a network does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from typing import Any

import aiohttp
import orjson

__all__ = ["Link", "LinkClosed"]


class LinkClosed(Exception):
    """The socket closed (the queue is empty)."""

    def __init__(self, code: int | None) -> None:
        super().__init__(f"socket closed ({code})")
        self.code = code


class Link:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse, node: str) -> None:
        self.ws = ws
        self.node = node
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self.audio_bytes = 0
        self.response_id: str | None = None  # the last response.started
        self.response_audio_bytes = 0  # of that response
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._reading = asyncio.Event()
        self._reading.set()
        self._audio_waiter: asyncio.Future[float] | None = None
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls, http: aiohttp.ClientSession, url: str, node: str, headers: dict[str, str]
    ) -> Link:
        ws = await http.ws_connect(url, headers=headers, max_msg_size=0, heartbeat=None)
        return cls(ws, node)

    async def _read(self) -> None:
        try:
            while True:
                if not self._reading.is_set():
                    await self._reading.wait()
                message = await self.ws.receive()
                if message.type is aiohttp.WSMsgType.TEXT:
                    event = orjson.loads(message.data)
                    if event.get("type") == "response.started":
                        self.response_id = event.get("response_id")
                        self.response_audio_bytes = 0
                    self._queue.put_nowait(event)
                elif message.type is aiohttp.WSMsgType.BINARY:
                    self.audio_bytes += len(message.data)
                    self.response_audio_bytes += len(message.data)
                    waiter = self._audio_waiter
                    if waiter is not None and not waiter.done():
                        waiter.set_result(time.monotonic())
                else:  # CLOSE, CLOSING, CLOSED, ERROR
                    return
        except (aiohttp.ClientError, ConnectionError, orjson.JSONDecodeError):
            return
        finally:
            self.close_code = self.ws.close_code
            self.closed.set()
            self._queue.put_nowait(None)
            if self._audio_waiter is not None and not self._audio_waiter.done():
                self._audio_waiter.cancel()

    async def next(self, within: float) -> dict[str, Any]:
        """The next text event; ``TimeoutError`` after ``within`` s, ``LinkClosed`` at the end."""
        event = await asyncio.wait_for(self._queue.get(), within)
        if event is None:
            self._queue.put_nowait(None)  # every later call sees the end too
            raise LinkClosed(self.close_code)
        return event

    def unread(self) -> list[dict[str, Any]]:
        """The events that came and were not read (a closed link's last words)."""
        events = []
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if event is None:
                self._queue.put_nowait(None)
                break
            events.append(event)
        return events

    def expect_audio(self) -> asyncio.Future[float]:
        """A future for the monotonic time of the next binary frame."""
        self._audio_waiter = asyncio.get_running_loop().create_future()
        return self._audio_waiter

    async def send(self, type_: str, **fields: Any) -> None:
        await self.ws.send_str(orjson.dumps({"type": type_, **fields}).decode())

    async def send_json(self, event: dict[str, Any]) -> None:
        await self.ws.send_str(orjson.dumps(event).decode())

    async def send_text(self, text: str) -> None:
        await self.ws.send_str(text)

    async def send_audio(self, frame: bytes) -> None:
        await self.ws.send_bytes(frame)

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), 5)
        self._reading.set()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader

    async def drop(self) -> None:
        """Lose the connection: the TCP goes down without a WebSocket close frame."""
        sock = self.ws.get_extra_info("socket")
        if sock is not None:
            # uvloop's socket wrapper cannot shut down: a duplicate of its descriptor can (a
            # shutdown acts on the connection, whichever descriptor asks).
            with (
                contextlib.suppress(OSError, ValueError),
                socket.socket(fileno=os.dup(sock.fileno())) as twin,
            ):
                twin.shutdown(socket.SHUT_RDWR)
        await self.close()
