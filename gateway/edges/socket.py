"""A client's WebSocket (``/v1/session``, ``/v1/realtime``): aiohttp's HTTP, our own framing.

Shared by the native and the realtime edge (an edge never imports another one, so it lives
beside them, not in either).

aiohttp serves the request (routing, admission and auth run before the upgrade) and writes the
``101 Switching Protocols`` response. From then on the connection's bytes reach
``ClientSocket.feed_data`` through aiohttp's payload-parser hook (``RequestHandler.set_parser``,
the one aiohttp's own ``WebSocketResponse`` uses) and are framed by
``rfc6455.frames``, which explains why the gateway frames its own sockets.

Reading. Messages wait in an inbox that the connection's handler reads with ``receive``, in
order. The hot path: while ``direct_binary`` is set (a started voice session), the handler is
idle and nothing waits in the inbox, a binary frame is handed to it as soon as it is parsed, with
no task switch; it returns False to send the frame down the inbox after all. An inbox over
``INBOX_LIMIT`` stops reading from the socket until the handler catches up.

Writing. ``write_binary_now`` writes an audio frame synchronously when the socket holds nothing
unsent; ``send_text``/``send_bytes`` write through the response (aiohttp waits for the transport
to drain). Pings are answered; after ``keepalive_s`` without a frame the client is pinged, and a
client silent for another ``keepalive_s`` is dropped (a vanished phone must not hold a session).

Closing: ``close`` sends a close frame and waits (bounded) for the client's; a client's close is
answered at once and ends reading; a client that breaks RFC 6455 gets the matching close code
(1002, 1007, 1009). aiohttp closes the TCP connection when the handler returns ``response``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any, Final

import structlog
from aiohttp import web

from gateway.errors import ClientError
from rfc6455.client import accept_key
from rfc6455.frames import (
    CLOSE_NORMAL,
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    FrameReader,
    ProtocolViolation,
    close_code,
    close_payload,
    encode_frame,
)

__all__ = ["INBOX_LIMIT", "ClientSocket", "HandshakeRefused"]

# Named as before the move to gateway/edges, so its log lines are unchanged.
_log = structlog.get_logger("gateway.client_socket")

INBOX_LIMIT: Final = 4 * 1024 * 1024  # bytes waiting for the handler before reading pauses
# Unsent bytes a client may leave behind (pongs included) before it counts as not reading.
DEFAULT_MAX_BUFFERED: Final = 8 * 1024 * 1024
# Control frames over the event budget, in a row, before the connection is closed (1008).
CONTROL_STRIKES: Final = 20
CLOSE_POLICY: Final = 1008
CLOSE_TIMEOUT_S: Final = 2.0
_INBOX_ITEM_OVERHEAD: Final = 64  # so that a flood of empty frames is bounded too


class HandshakeRefused(ClientError):
    """Not a WebSocket upgrade the gateway accepts; ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


def _handshake_key(request: web.Request) -> str:
    """The client's ``Sec-WebSocket-Key`` once the upgrade request checks out (RFC 6455
    4.2.1); raises ``HandshakeRefused``."""
    headers = request.headers
    if headers.get("Upgrade", "").lower() != "websocket":
        raise HandshakeRefused(400, "expected a WebSocket upgrade (Upgrade: websocket)")
    connection = {token.strip().lower() for token in headers.get("Connection", "").split(",")}
    if "upgrade" not in connection:
        raise HandshakeRefused(400, "expected Connection: Upgrade")
    if headers.get("Sec-WebSocket-Version") != "13":
        raise HandshakeRefused(
            426, "unsupported WebSocket version", {"Sec-WebSocket-Version": "13"}
        )
    key = headers.get("Sec-WebSocket-Key", "")
    try:
        valid = len(base64.b64decode(key, validate=True)) == 16
    except (binascii.Error, ValueError):
        valid = False
    if not valid:
        raise HandshakeRefused(400, "invalid Sec-WebSocket-Key")
    return key


class ClientSocket:
    """See the module docstring; ``accept`` makes one."""

    def __init__(
        self,
        request: web.Request,
        response: web.StreamResponse,
        *,
        max_message: int,
        keepalive_s: float,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        control_budget: Callable[[], bool] | None = None,
    ) -> None:
        self.response = response
        self._protocol = request.protocol
        transport = request.transport
        assert transport is not None
        self._transport: asyncio.Transport = transport
        self._loop = asyncio.get_running_loop()
        self._reader = FrameReader(masked=True, max_message=max_message)
        self.direct_binary: Callable[[bytes], bool] | None = None
        # The same for text messages (a protocol that carries audio in JSON): True, handled.
        self.direct_text: Callable[[str], bool] | None = None
        self._inbox: deque[str | bytes] = deque()
        self._inbox_bytes = 0
        self._reading_paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._handler_idle = False
        self._reading_done = False  # a close frame came, the connection ended, or it failed
        self._done = asyncio.Event()
        self._close_sent = False
        self.close_code: int | None = None  # what the client's close frame said
        self._keepalive_s = keepalive_s
        self._received = 0
        self._seen_at_tick = -1
        self._ping_out = False
        self._keepalive: asyncio.TimerHandle | None = None
        # Control frames: they take from the client's event budget (False: over it) and their
        # answers may not grow the unsent bytes past max_buffered.
        self._max_buffered = max_buffered
        self._control_budget = control_budget
        self._refused_in_a_row = 0
        self.refused_control_frames = 0
        if keepalive_s > 0:
            self._keepalive = self._loop.call_later(keepalive_s, self._keepalive_tick)

    @classmethod
    async def accept(
        cls,
        request: web.Request,
        *,
        max_message: int,
        keepalive_s: float = 30.0,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        control_budget: Callable[[], bool] | None = None,
        protocol: str | None = None,
    ) -> ClientSocket:
        """Answer the upgrade and take the connection over; raises ``HandshakeRefused``.
        ``protocol``: the subprotocol chosen (one the client offered), for the answer."""
        key = _handshake_key(request)
        headers = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Accept": accept_key(key),
        }
        if protocol is not None:
            headers["Sec-WebSocket-Protocol"] = protocol
        response = web.StreamResponse(status=101, headers=headers)
        response.force_close()
        await response.prepare(request)
        socket = cls(
            request,
            response,
            max_message=max_message,
            keepalive_s=keepalive_s,
            max_buffered=max_buffered,
            control_budget=control_budget,
        )
        # aiohttp hands every later byte of the connection to the parser it is given.
        request.protocol.set_parser(socket)  # type: ignore[arg-type]
        request.protocol.keep_alive(False)
        return socket

    # -- aiohttp's payload-parser hook -----------------------------------------------------------

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if self._reading_done:
            return False, b""
        try:
            messages = self._reader.feed(data)
        except ProtocolViolation as violation:
            for message in violation.before:
                if self._reading_done:
                    break
                self._message(*message)
            if not self._reading_done:
                _log.info("client_protocol_violation", code=violation.code, reason=violation.reason)
                self._fail(violation.code, violation.reason)
            return False, b""
        self._received += 1
        for opcode, payload in messages:
            if self._reading_done:  # nothing is handled, or answered, after a close
                break
            self._message(opcode, payload)
        return False, b""

    def feed_eof(self) -> None:
        self._end_reading()

    # -- reading ---------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._reading_done or self._close_sent or self._transport.is_closing()

    async def receive(self) -> str | bytes | None:
        """The next message, in order; None once the client has closed or gone."""
        inbox = self._inbox
        while not inbox:
            if self._reading_done:
                return None
            self._waiter = self._loop.create_future()
            self._handler_idle = True
            try:
                await self._waiter
            finally:
                self._waiter = None
                self._handler_idle = False
        message = inbox.popleft()
        self._inbox_bytes -= len(message) + _INBOX_ITEM_OVERHEAD
        if self._reading_paused and self._inbox_bytes <= INBOX_LIMIT // 2:
            self._reading_paused = False
            self._protocol.resume_reading()
        return message

    def _message(self, opcode: int, payload: Any) -> None:
        if opcode == OP_BINARY:
            direct = self.direct_binary
            if direct is not None and self._handler_idle and not self._inbox and direct(payload):
                return
            self._queue(payload)
        elif opcode == OP_TEXT:
            direct_text = self.direct_text
            if (
                direct_text is not None
                and self._handler_idle
                and not self._inbox
                and direct_text(payload)
            ):
                return
            self._queue(payload)
        elif opcode == OP_PING:
            if self._control_frame_allowed():
                self._write_bounded(encode_frame(OP_PONG, payload))
        elif opcode == OP_PONG:
            self._ping_out = False
            self._control_frame_allowed()
        elif opcode == OP_CLOSE:
            self.close_code = close_code(payload)[0]
            self._send_close(payload[:2])  # answer with the same code
            self._end_reading()

    def _control_frame_allowed(self) -> bool:
        """A ping or pong spends from the client's event budget. One over it goes unanswered;
        more than ``CONTROL_STRIKES`` in a row close the connection (1008)."""
        budget = self._control_budget
        if budget is None or budget():
            self._refused_in_a_row = 0
            return True
        self._refused_in_a_row += 1
        self.refused_control_frames += 1
        if self._refused_in_a_row > CONTROL_STRIKES:
            _log.info("client_control_flood", refused=self.refused_control_frames)
            self._fail(CLOSE_POLICY, "too many control frames")
        return False

    def _write_bounded(self, frame: bytes) -> None:
        """An answer (pong) the client must read: a client that lets unsent bytes pile past
        ``max_buffered`` is not reading, and is dropped as the outbound queue drops it."""
        if self._transport.get_write_buffer_size() + len(frame) > self._max_buffered:
            _log.info(
                "client_not_reading_control", buffered=self._transport.get_write_buffer_size()
            )
            self.abort()
            return
        self._write(frame)

    def _queue(self, message: str | bytes) -> None:
        self._inbox.append(message)
        self._inbox_bytes += len(message) + _INBOX_ITEM_OVERHEAD
        if self._inbox_bytes > INBOX_LIMIT and not self._reading_paused:
            self._reading_paused = True
            self._protocol.pause_reading()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _end_reading(self) -> None:
        self._reading_done = True
        self.direct_binary = None
        self.direct_text = None
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        self._done.set()
        self._wake()

    # -- writing ---------------------------------------------------------------------------------

    def write_binary_now(self, data: bytes, encoded: str | None = None) -> bool:
        """Write one binary frame now; False (nothing written) unless the socket is empty.
        ``encoded`` is not used (``Outbound``'s audio writer signature: a binary frame carries
        the bytes themselves)."""
        transport = self._transport  # inline, not writable_now(): one call less per frame
        if self._close_sent or transport.is_closing() or transport.get_write_buffer_size():
            return False
        transport.write(encode_frame(OP_BINARY, data))
        return True

    def writable_now(self) -> bool:
        """Open, and nothing unsent: a frame written now goes out at once."""
        transport = self._transport
        return not (self._close_sent or transport.is_closing() or transport.get_write_buffer_size())

    def write_text_now(self, utf8: bytes) -> None:
        """Write one text frame (UTF-8 already) now, after ``writable_now`` said so."""
        self._write(encode_frame(OP_TEXT, utf8))

    async def send_text(self, text: str) -> None:
        await self._send(encode_frame(OP_TEXT, text.encode("utf-8")))

    async def send_bytes(self, data: bytes) -> None:
        await self._send(encode_frame(OP_BINARY, data))

    async def _send(self, frame: bytes) -> None:
        if self._close_sent or self._transport.is_closing():
            raise ConnectionResetError("the client socket is closed")
        await self.response.write(frame)  # aiohttp waits for the transport to drain

    def _write(self, frame: bytes) -> None:
        if not self._close_sent and not self._transport.is_closing():
            self._transport.write(frame)

    # -- keepalive and closing -------------------------------------------------------------------

    def _keepalive_tick(self) -> None:
        self._keepalive = None
        if self._reading_done:
            return
        if self._received != self._seen_at_tick:
            self._seen_at_tick = self._received
            self._ping_out = False
        elif self._ping_out:
            _log.info("client_keepalive_timeout", after_s=2 * self._keepalive_s)
            self.abort()
            return
        else:
            self._write(encode_frame(OP_PING, b""))
            self._ping_out = True
        self._keepalive = self._loop.call_later(self._keepalive_s, self._keepalive_tick)

    def _send_close(self, payload: bytes) -> None:
        if not self._close_sent:  # one close frame per connection
            self._write(encode_frame(OP_CLOSE, payload))
            self._close_sent = True

    def _fail(self, code: int, reason: str) -> None:
        self._send_close(close_payload(code, reason))
        self._end_reading()

    async def close(
        self, code: int = CLOSE_NORMAL, reason: str = "", timeout_s: float = CLOSE_TIMEOUT_S
    ) -> None:
        """A close frame, then the client's (bounded wait); the TCP end follows when the
        handler returns."""
        self.direct_binary = None
        self.direct_text = None
        self._send_close(close_payload(code, reason))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._done.wait()
        self._end_reading()

    def abort(self) -> None:
        """Drop the connection at once (a client that is not reading at all)."""
        self._transport.abort()
        self._end_reading()
