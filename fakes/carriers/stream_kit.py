"""What the carriers' simulators (``fakes.carriers``) share.

- The records of what a carrier sends and receives: ``Received`` (an event of a JSON text
  stream, parsed), ``RawReceived`` (a frame of a stream of text and binary frames, as it came),
  ``HeardAudio`` (what a caller heard, and when), ``CarrierRequest`` (a webhook the carrier
  makes, as the gateway's ``WebhookRequest`` takes it).
- Waiting on what a simulator records (``Changes``), sending at a steady pace (``Pace``), the
  socket's end with no close handshake (``cut``), a frame of either kind (``send_frame``), a
  client session lent or made (``client_session``), the parts of a Twilio-shaped message
  (``media_payload``, ``mark_name``), a URL with more in its query (``with_query``).
- ``RawStream``, the carrier's end of a stream read frame by frame (Vonage, Exotel): a client
  session of its own, no autoclose (it answers the gateway's close frame itself), one send at
  a time. Its JSON-text counterpart (Twilio, Telnyx, Plivo) is ``fakes.carriers.json_stream``.

What differs by carrier stays with the carrier: the messages' shapes, the events it takes, what
it does with an off-protocol frame.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

__all__ = [
    "CarrierRequest",
    "Changes",
    "HeardAudio",
    "Pace",
    "RawReceived",
    "RawStream",
    "Received",
    "b64decoded",
    "client_session",
    "cut",
    "mark_name",
    "media_payload",
    "send_frame",
    "with_query",
]


@dataclass(frozen=True, slots=True)
class Received:
    """One message the gateway sent, when it arrived (``time.monotonic()``)."""

    at: float
    event: str
    message: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class RawReceived:
    """One message the gateway sent, with the ``time.monotonic()`` it arrived at."""

    at: float
    data: str | bytes = field(repr=False)

    @property
    def message(self) -> dict[str, Any]:
        """A text message's JSON object (empty for a binary message or a text that is not an
        object)."""
        if isinstance(self.data, str):
            with contextlib.suppress(orjson.JSONDecodeError):
                parsed = orjson.loads(self.data)
                if isinstance(parsed, dict):
                    return parsed
        return {}

    def _string(self, key: str) -> str | None:
        """The message's ``key``, when it is a string."""
        value = self.message.get(key)
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class CarrierRequest:
    """A request a carrier makes to the gateway: the fields of the phone core's
    ``WebhookRequest`` but ``now``."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class HeardAudio:
    """Audio the caller heard (PCM16) and the ``time.monotonic()`` it finished playing at."""

    at: float
    pcm: bytes = field(repr=False)


class Changes:
    """Told (``notify``) whenever what a simulator records changes: a message in, audio played,
    the socket closed. ``until`` waits for a condition on it."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()

    async def until(self, ready: Callable[[], bool], within_s: float) -> None:
        """Until ``ready()``; ``TimeoutError`` after ``within_s``."""
        async with asyncio.timeout(within_s):
            while not ready():
                self._event.clear()
                await self._event.wait()


class Pace:
    """Slots ``period_s`` apart from when it is made, as a live call sends its frames."""

    def __init__(self, period_s: float) -> None:
        self._period_s = period_s
        self._start = time.monotonic()

    async def until(self, slot: int) -> None:
        """Sleep until slot ``slot`` (``slot`` periods after the start; at once when late)."""
        await asyncio.sleep(max(self._start + slot * self._period_s - time.monotonic(), 0))


def cut(ws: aiohttp.ClientWebSocketResponse) -> None:
    """The TCP connection ends now (FIN), with no WebSocket close: a network drop."""
    sock = ws.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


async def send_frame(ws: aiohttp.ClientWebSocketResponse, data: str | bytes) -> None:
    """A text frame for a string, a binary frame for bytes."""
    await (ws.send_bytes(data) if isinstance(data, bytes) else ws.send_str(data))


@contextlib.asynccontextmanager
async def client_session(
    session: aiohttp.ClientSession | None,
) -> AsyncIterator[aiohttp.ClientSession]:
    """``session``, or one made for the block (and closed after it)."""
    if session is not None:
        yield session
        return
    async with aiohttp.ClientSession() as own:
        yield own


def with_query(url: str, fields: Mapping[str, str]) -> str:
    """``url`` with ``fields`` added to its query string."""
    return f"{url}{'&' if '?' in url else '?'}{urlencode(fields)}"


def media_payload(message: Mapping[str, Any]) -> bytes | None:
    """The bytes of ``media.payload`` (base64); None when it is missing or not base64."""
    media = message.get("media")
    payload = media.get("payload") if isinstance(media, dict) else None
    return b64decoded(payload)


def b64decoded(value: object) -> bytes | None:
    """The bytes of a base64 string; None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def mark_name(message: Mapping[str, Any]) -> str | None:
    """``mark.name`` of a ``mark`` message (Twilio's shape, which Telnyx and Exotel share)."""
    mark = message.get("mark")
    name = mark.get("name") if isinstance(mark, dict) else None
    return name if isinstance(name, str) and name else None


class RawStream:
    """The carrier's end of a stream it reads frame by frame (``_on_text``, ``_on_binary``), on
    a client session of its own and with no autoclose: when the gateway closes, it answers the
    close frame itself. ``_news`` is told after each frame and when the socket closes."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, session: aiohttp.ClientSession) -> None:
        self._ws, self._session = ws, session
        self._ended = False  # hung up or vanished
        self._news = Changes()
        self._send_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []

    @staticmethod
    async def _connect(
        url: str,
    ) -> tuple[aiohttp.ClientWebSocketResponse, aiohttp.ClientSession]:
        session = aiohttp.ClientSession()
        try:
            ws = await session.ws_connect(url, autoclose=False, max_msg_size=0)
        except BaseException:
            await session.close()
            raise
        return ws, session

    @property
    def close_code(self) -> int | None:
        """The code of the gateway's close frame (None while the socket is open)."""
        return self._ws.close_code

    async def hang_up(self) -> None:
        raise NotImplementedError

    async def send_raw(self, message: str | bytes) -> None:
        async with self._send_lock:
            await send_frame(self._ws, message)

    async def close(self) -> None:
        """Hang up if not done yet, and release the client session."""
        if not self._ended and not self._ws.closed:
            await self.hang_up()
        await self._stop_tasks()
        await self._session.close()

    async def _close_socket(self) -> None:
        """The carrier ends the stream: its tasks stop, then the socket closes."""
        self._ended = True
        await self._stop_tasks()
        await self._ws.close()
        self._news.notify()

    async def _read(self) -> None:
        async for msg in self._ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                await self._on_text(msg.data)
            elif msg.type == aiohttp.WSMsgType.BINARY:
                await self._on_binary(msg.data)
            self._news.notify()
        if not self._ended:  # the gateway closed the stream: answer its close frame
            with contextlib.suppress(ConnectionError):
                await self._ws.close()
        self._news.notify()

    async def _on_text(self, text: str) -> None:
        raise NotImplementedError

    async def _on_binary(self, data: bytes) -> None:
        raise NotImplementedError

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
