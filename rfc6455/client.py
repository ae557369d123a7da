"""A client WebSocket on an ``asyncio.Protocol``: the gateway's hop to a provider.

``connect(url, headers)`` opens TCP (TLS for ``wss``), performs the opening handshake (RFC 6455,
4.1: status 101, ``Upgrade``, ``Connection`` and ``Sec-WebSocket-Accept`` checked; no extension
or subprotocol accepted, since none is offered) and returns an open ``ClientConnection``.

Reading. Messages first wait in a queue that ``recv()`` reads (a provider's own handshake, such as
OpenAI's ``session.created``). ``push(on_message)`` hands reading over to a callback: the queued
messages at once, in order, then each message as ``data_received`` parses it, with no task switch
in between (``rfc6455.frames`` says why that matters). Pings are answered, pongs
noted.

Writing. ``send_now`` writes one text frame synchronously unless the socket already holds
``HIGH_WATER`` unsent bytes (then it returns False and the caller waits with ``send``/``drain``);
``send`` writes one text or binary frame and then waits until the transport has drained. A frame
is always written whole before any ``await``, so frames leave in the order they were given.

Keepalive: a ping after ``keepalive_s`` without anything received; nothing for another
``keepalive_s`` and the connection is dropped (a half-open TCP connection would otherwise hang a
session forever). ``close`` sends a close frame and waits (bounded) for the server's. Nothing
follows our close frame (no pong, no keepalive ping), and nothing that follows the server's in
the same read is handled or answered.
``wait_closed`` returns the close code the server sent: 1005 if its frame had none, 1006 if the
connection ended without one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import http.client
import io
import os
import ssl
import urllib.parse
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Final, cast

import structlog

from rfc6455.frames import (
    CLOSE_ABNORMAL,
    CLOSE_INTERNAL_ERROR,
    CLOSE_NORMAL,
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    FrameReader,
    MaskKeys,
    ProtocolViolation,
    WebSocketError,
    close_code,
    close_payload,
    encode_frame,
)

__all__ = [
    "HIGH_WATER",
    "ClientConnection",
    "ConnectionClosed",
    "HandshakeError",
    "InvalidURL",
    "accept_key",
    "connect",
    "default_ssl_context",
]

_log = structlog.get_logger("websocket.client")

GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
HIGH_WATER: Final = 64 * 1024  # unsent bytes above which send_now refuses
MAX_RESPONSE_HEAD: Final = 64 * 1024
CLOSE_TIMEOUT_S: Final = 2.0

OnMessage = Callable[[str | bytes], None]


class HandshakeError(WebSocketError):
    """The server did not accept the WebSocket; ``status`` is its HTTP status when it sent one
    (retryable without one, or for 429 and 5xx)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        retryable = status is None or status == 429 or status >= 500
        super().__init__(message, retryable=retryable)
        self.status = status


class InvalidURL(WebSocketError, ValueError):
    """Not a ``ws://`` or ``wss://`` URL."""


class ConnectionClosed(WebSocketError):
    """The connection is closed; ``code`` is the server's close code (1006: none came)."""

    code: int

    def __init__(self, code: int) -> None:
        super().__init__(f"connection closed with code {code}", retryable=True, code=code)


@functools.lru_cache(maxsize=1)
def default_ssl_context() -> ssl.SSLContext:
    """One verifying context for every ``wss`` connection (loading CAs costs milliseconds)."""
    return ssl.create_default_context()


async def connect(
    url: str,
    headers: Mapping[str, str],
    *,
    max_message: int,
    keepalive_s: float = 20.0,
    ssl_context: ssl.SSLContext | None = None,
) -> ClientConnection:
    """An open connection to ``url`` (``ws://`` or ``wss://``). Raises ``HandshakeError``,
    ``OSError`` or ``ssl.SSLError``; time-bound it with ``asyncio.timeout``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise InvalidURL(f"not a WebSocket URL: {url}")
    secure = parts.scheme == "wss"
    port = parts.port or (443 if secure else 80)
    default_port = port == (443 if secure else 80)
    host_header = parts.hostname if default_port else f"{parts.hostname}:{port}"
    if ":" in parts.hostname:  # IPv6 literal
        host_header = f"[{parts.hostname}]" + ("" if default_port else f":{port}")
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    key = base64.b64encode(os.urandom(16)).decode("ascii")
    lines = [
        f"GET {resource} HTTP/1.1",
        f"Host: {host_header}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
    ]
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0") or ":" in name:
            raise HandshakeError(f"invalid header {name!r}")
        lines.append(f"{name}: {value}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    loop = asyncio.get_running_loop()
    connection = ClientConnection(max_message=max_message, keepalive_s=keepalive_s)
    context = (ssl_context or default_ssl_context()) if secure else None
    transport, _ = await loop.create_connection(
        lambda: connection,
        parts.hostname,
        port,
        ssl=context,
        server_hostname=parts.hostname if secure else None,
    )
    try:
        transport.write(request)
        await connection.handshake(accept_key(key))
    except BaseException:
        transport.abort()
        raise
    return connection


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` a server must answer ``key`` with (RFC 6455, 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


class ClientConnection(asyncio.Protocol):
    """See the module docstring. Created by ``connect``; one per upstream session socket."""

    def __init__(self, *, max_message: int, keepalive_s: float) -> None:
        self._reader = FrameReader(masked=False, max_message=max_message)
        self._keys = MaskKeys()
        self._keepalive_s = keepalive_s
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._head = bytearray()
        self._handshake: asyncio.Future[None] = self._loop.create_future()
        self._expected_accept = ""
        self._open = False
        self._close_sent = False
        self._close_code: int | None = None  # what the server's close frame said
        self._closed: asyncio.Future[int] = self._loop.create_future()
        self._on_message: OnMessage | None = None
        self._queue: deque[str | bytes] = deque()
        self._queue_waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._received = 0  # frames received; the keepalive compares it between ticks
        self._seen_at_tick = -1
        self._ping_out = False
        self._keepalive: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self._open:
            self._handshake_data(data)
            return
        try:
            messages = self._reader.feed(data)
        except ProtocolViolation as violation:
            for message in violation.before:
                if not self._open:  # a close came first: nothing after it counts
                    return
                self._message(*message)
            _log.warning("upstream_protocol_violation", reason=violation.reason)
            self._fail(violation.code)
            return
        self._received += 1
        on_message = self._on_message
        for opcode, payload in messages:
            if opcode <= OP_BINARY and on_message is not None:  # the hot path, one call less
                try:
                    on_message(payload)
                except Exception:  # the owner's bug must not kill the loop's protocol callback
                    _log.exception("upstream_message_handler_failed")
                    self._fail(CLOSE_INTERNAL_ERROR)
                    return
            else:
                self._message(opcode, payload)
                if not self._open:  # nothing is handled, or answered, after a close
                    return

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self._open = False
        if self._keepalive is not None:
            self._keepalive.cancel()
        code = CLOSE_ABNORMAL if self._close_code is None else self._close_code
        if not self._handshake.done():
            self._handshake.set_exception(HandshakeError("connection closed during the handshake"))
        if not self._closed.done():
            self._closed.set_result(code)
        self._paused = False
        self._wake_drain()
        self._wake_queue()

    # -- handshake -----------------------------------------------------------------------------

    async def handshake(self, expected_accept: str) -> None:
        self._expected_accept = expected_accept
        await self._handshake

    def _handshake_data(self, data: bytes) -> None:
        if self._handshake.done():
            return
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            if len(self._head) > MAX_RESPONSE_HEAD:
                self._handshake.set_exception(HandshakeError("response head too large"))
            return
        head, rest = bytes(self._head[:end]), bytes(self._head[end + 4 :])
        self._head.clear()
        problem = self._check_response(head)
        if problem is not None:
            self._handshake.set_exception(problem)
            return
        self._open = True
        self._handshake.set_result(None)
        self._schedule_keepalive()
        if rest:
            self.data_received(rest)

    def _check_response(self, head: bytes) -> HandshakeError | None:
        status_line, _, header_block = head.partition(b"\r\n")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            return HandshakeError(f"not an HTTP response: {status_line[:80]!r}")
        status = int(parts[1])
        if status != 101:
            return HandshakeError(f"the server answered HTTP {status}", status)
        headers = http.client.parse_headers(io.BytesIO(header_block + b"\r\n\r\n"))
        if (headers.get("Upgrade") or "").lower() != "websocket":
            return HandshakeError("the response does not upgrade to websocket", status)
        tokens = {t.strip().lower() for t in (headers.get("Connection") or "").split(",")}
        if "upgrade" not in tokens:
            return HandshakeError("the response's Connection header lacks upgrade", status)
        if headers.get("Sec-WebSocket-Accept") != self._expected_accept:
            return HandshakeError("wrong Sec-WebSocket-Accept", status)
        if headers.get("Sec-WebSocket-Extensions") or headers.get("Sec-WebSocket-Protocol"):
            return HandshakeError("the server chose an extension or subprotocol never offered")
        return None

    # -- reading -------------------------------------------------------------------------------

    def push(self, on_message: OnMessage) -> None:
        """From now on every message goes to ``on_message``; queued ones first, at once."""
        self._on_message = on_message
        while self._queue and self._on_message is on_message:
            self._deliver(self._queue.popleft())

    async def recv(self) -> str | bytes:
        """The next message (before ``push``); raises ``ConnectionClosed`` once closed."""
        while not self._queue:
            if self._closed.done():
                raise ConnectionClosed(self._closed.result())
            self._queue_waiter = self._loop.create_future()
            try:
                await self._queue_waiter
            finally:
                self._queue_waiter = None
        return self._queue.popleft()

    async def wait_closed(self) -> int:
        return await asyncio.shield(self._closed)

    def _message(self, opcode: int, payload: str | bytes) -> None:
        if opcode in (OP_TEXT, OP_BINARY):
            if self._on_message is not None:
                self._deliver(payload)
            else:
                self._queue.append(payload)
                self._wake_queue()
        elif opcode == OP_PING:
            assert isinstance(payload, bytes)
            self._write_frame(OP_PONG, payload)
        elif opcode == OP_PONG:
            self._ping_out = False
        elif opcode == OP_CLOSE:
            assert isinstance(payload, bytes)
            self._close_code = close_code(payload)[0]
            self._send_close(payload[:2])  # echo it, then the server ends the TCP connection
            self._open = False
            if self._transport is not None:
                self._transport.close()

    def _deliver(self, payload: str | bytes) -> None:
        assert self._on_message is not None
        try:
            self._on_message(payload)
        except Exception:  # the owner's bug must not kill the event loop's protocol callback
            _log.exception("upstream_message_handler_failed")
            self._fail(CLOSE_INTERNAL_ERROR)

    def _wake_queue(self) -> None:
        waiter = self._queue_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- writing -------------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        transport = self._transport
        return (
            self._open
            and not self._close_sent
            and transport is not None
            and transport.get_write_buffer_size() <= HIGH_WATER
        )

    def send_now(self, text: str) -> bool:
        """Write one text frame now; False (nothing written) while the socket is full."""
        if not self.writable:
            return False
        assert self._transport is not None
        self._transport.write(encode_frame(OP_TEXT, text.encode("utf-8"), self._keys.next()))
        return True

    def send_many_now(self, texts: Sequence[str]) -> bool:
        """Write text frames now, in one write; False (nothing written) while the socket is
        full."""
        if not self.writable:
            return False
        assert self._transport is not None
        keys = self._keys
        if len(texts) == 1:  # the common case (an audio append): no join
            frame = encode_frame(OP_TEXT, texts[0].encode("utf-8"), keys.next())
        else:
            frame = b"".join(encode_frame(OP_TEXT, t.encode("utf-8"), keys.next()) for t in texts)
        self._transport.write(frame)
        return True

    async def send(self, message: str | bytes) -> None:
        """Write one frame (text for ``str``, binary for ``bytes``), then wait until the
        transport has drained."""
        if not self._open or self._close_sent or self._transport is None:
            raise ConnectionClosed(self._closed.result() if self._closed.done() else CLOSE_ABNORMAL)
        if isinstance(message, str):
            frame = encode_frame(OP_TEXT, message.encode("utf-8"), self._keys.next())
        else:
            frame = encode_frame(OP_BINARY, message, self._keys.next())
        self._transport.write(frame)
        await self.drain()

    async def drain(self) -> None:
        while self._paused and not self._closed.done():
            self._drain_waiter = self._loop.create_future()
            try:
                await self._drain_waiter
            finally:
                self._drain_waiter = None
        if self._closed.done():
            raise ConnectionClosed(self._closed.result())

    def _wake_drain(self) -> None:
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _write_frame(self, opcode: int, payload: bytes) -> None:
        """A control frame; nothing (no pong, no keepalive ping) follows our close frame."""
        transport = self._transport
        if transport is not None and not self._close_sent and not transport.is_closing():
            transport.write(encode_frame(opcode, payload, self._keys.next()))

    # -- keepalive and closing -----------------------------------------------------------------

    def _schedule_keepalive(self) -> None:
        if self._keepalive_s > 0:
            self._keepalive = self._loop.call_later(self._keepalive_s, self._keepalive_tick)

    def _keepalive_tick(self) -> None:
        if not self._open:
            return
        if self._received != self._seen_at_tick:
            self._seen_at_tick = self._received
            self._ping_out = False
        elif self._ping_out:
            _log.warning("upstream_keepalive_timeout", after_s=2 * self._keepalive_s)
            self._fail(CLOSE_INTERNAL_ERROR)
            return
        else:
            self._write_frame(OP_PING, b"")
            self._ping_out = True
        self._schedule_keepalive()

    def _send_close(self, payload: bytes) -> None:
        if not self._close_sent:  # one close frame per connection
            self._write_frame(OP_CLOSE, payload)
            self._close_sent = True

    def _fail(self, code: int) -> None:
        """End the connection after a fault: a close frame if possible, then the TCP end.
        The close is reported as abnormal (1006): no close frame came from the server."""
        self._send_close(close_payload(code))
        self._open = False
        if self._transport is not None:
            self._transport.abort()

    async def close(self, code: int = CLOSE_NORMAL, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Close frame, then the server's close and TCP end; aborted after ``timeout_s``."""
        transport = self._transport
        if transport is None:
            return
        self._send_close(close_payload(code))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(self._closed)
        if not self._closed.done():
            transport.abort()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await asyncio.shield(self._closed)
