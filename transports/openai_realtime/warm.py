"""A connection to OpenAI Realtime opened before the session it will serve is known (a warm
pool's): the socket is open and the server's ``session.created`` has come, so what is left for
the session is its ``session.update`` (one round trip instead of the TLS and WebSocket
handshakes and the server's set-up). ``expect`` waits for one server event by type."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import orjson
from openai import AsyncOpenAI, OpenAIError
from websockets.exceptions import InvalidStatus, InvalidURI, WebSocketException

from rfc6455.client import ConnectionClosed, HandshakeError, InvalidURL
from transports.base import TransportError
from transports.openai_realtime.upstream_socket import RealtimeSocket, open_socket

__all__ = ["WarmRealtime", "connect_error", "expect", "open_warm"]


@dataclass(eq=False)
class WarmRealtime:
    """``WarmUpstream`` for OpenAI Realtime: the open socket and the ``session.created`` it
    said, for the model in its URL."""

    conn: RealtimeSocket
    created: dict[str, Any]
    model: str
    _watch: asyncio.Task[int] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Noticed at once when the server closes it (a pool replaces it).
        self._watch = asyncio.get_running_loop().create_task(self.conn.wait_closed())

    @property
    def alive(self) -> bool:
        return self._watch is not None and not self._watch.done()

    async def wait_closed(self) -> None:
        assert self._watch is not None
        with contextlib.suppress(Exception):
            await asyncio.shield(self._watch)

    def taken(self) -> RealtimeSocket:
        """The socket, for the session that takes it (no longer watched here)."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        return self.conn

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                await self.conn.close()


async def open_warm(client: AsyncOpenAI, model: str) -> WarmRealtime:
    """A new server session, not configured yet. Raises what opening raises (the caller
    bounds it in time and translates it)."""
    conn = await open_socket(client, model)
    try:
        created = await expect(conn, "session.created")
    except BaseException:
        with contextlib.suppress(Exception):
            await conn.close()
        raise
    return WarmRealtime(conn, created, model)


async def expect(conn: RealtimeSocket, kind: str) -> dict[str, Any]:
    """The next server event of type ``kind`` (noise skipped); an ``error`` event raises."""
    while True:
        try:
            event = orjson.loads(await conn.recv())
        except orjson.JSONDecodeError:
            continue  # a proxy's error page or noise: the handshake goes on or times out
        if not isinstance(event, dict):
            continue
        if event.get("type") == kind:
            return event
        if event.get("type") == "error":
            error = event.get("error") or {}
            code = error.get("code") or error.get("type") or "error"
            raise TransportError(
                f"OpenAI Realtime refused the session ({code}): {error.get('message', '')}"
            )


def connect_error(exc: BaseException, waiting_for: str, timeout_s: float) -> TransportError | None:
    """The connect failure as a TransportError; None for what must propagate (cancel)."""
    if isinstance(exc, TimeoutError):
        return TransportError(
            f"OpenAI Realtime sent no {waiting_for} within {timeout_s:g} s",
            retryable=True,
        )
    status = exc.response.status_code if isinstance(exc, InvalidStatus) else None
    if isinstance(exc, HandshakeError) and exc.status is not None:
        status = exc.status
    if status is not None:
        return TransportError(
            f"OpenAI Realtime refused the connection: HTTP {status}",
            retryable=status >= 500 or status == 429,
        )
    if isinstance(exc, InvalidURI | InvalidURL):
        return TransportError(f"OpenAI Realtime URL is not a WebSocket URL: {exc}")
    if isinstance(exc, ConnectionClosed):
        return TransportError(f"OpenAI Realtime closed the connection: {exc}", retryable=True)
    if isinstance(exc, HandshakeError):
        return TransportError(f"OpenAI Realtime handshake failed: {exc}", retryable=True)
    if isinstance(exc, TransportError):
        return exc
    if isinstance(exc, OSError | WebSocketException):
        return TransportError(f"cannot reach OpenAI Realtime: {exc}", retryable=True)
    if isinstance(exc, OpenAIError):
        return TransportError(f"OpenAI Realtime: {exc}")
    if isinstance(exc, Exception):  # translated at the boundary: callers see one type
        return TransportError(f"OpenAI Realtime connection failed: {exc!r}")
    return None  # cancellation and the like propagate
