"""``GET /v1/session``: the session socket of the gateway's own protocol (``gateway.protocol``).

The handler is a thin shell: decode frames with the pure protocol codec, hand events to the
``Session``, write through its ``Outbound``. Every bad input becomes an ``error`` event; a
client can never take the server down. Auth and admission are the server's (``Admission``),
checked before the upgrade.

A started voice session's binary frames take the socket's hot path (``_direct_audio``): handed
to the session as the socket parses them, with no task switch and no decode.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web

from gateway.admission import Admission, json_error
from gateway.config import Settings
from gateway.edges.socket import ClientSocket, HandshakeRefused
from gateway.observability import Metrics
from gateway.protocol import (
    EndReason,
    ErrorCode,
    ErrorEvent,
    Ping,
    Pong,
    ProtocolError,
    ServerEvent,
    SessionEnd,
    SessionEnded,
    SessionStart,
    decode_binary,
    decode_text,
    encode,
)
from gateway.session import Outbound, Session, SessionUser
from gateway.session.manager import SessionManager
from gateway.session.ratelimit import TokenBucket
from gateway.session.refusals import StartRefused

__all__ = ["TRANSPORT_HEADROOM", "NativeRoutes", "as_text"]

# Named as before the move out of gateway/server.py, so its log lines are unchanged.
_log = structlog.get_logger("server")

# Bytes the WebSocket transport accepts beyond the protocol's frame limits (see below).
TRANSPORT_HEADROOM = 64 * 1024


def as_text(event: ServerEvent) -> tuple[str, int]:
    """The native edge's ``prepare``: each event encoded once, as it is queued (its JSON's size
    counts against the client's control budget)."""
    payload = encode(event)
    return payload.decode(), len(payload)


class NativeRoutes:
    """``session_socket`` is the handler the server registers for ``/v1/session``."""

    __slots__ = ("admission", "manager", "metrics", "settings")

    def __init__(
        self, settings: Settings, admission: Admission, manager: SessionManager, metrics: Metrics
    ) -> None:
        self.settings = settings
        self.admission = admission
        self.manager = manager
        self.metrics = metrics

    async def session_socket(self, request: web.Request) -> web.StreamResponse:
        refused = self.admission.refuse_socket(request)
        if refused is not None:
            return refused
        user = await self.admission.user(request)
        if isinstance(user, web.StreamResponse):
            return user  # refused: 401, 429 (a budget has run out) or 503
        limit = max(self.settings.max_text_frame, self.settings.max_binary_frame)
        # The connection's event budget: JSON events before and after session.start, and
        # WebSocket control frames (pings), all spend from it.
        events = TokenBucket(self.settings.client_events_per_s, self.settings.client_events_burst)
        clock = self.manager.clock
        try:
            # Headroom over our own limits, so an oversized frame gets a payload_too_large
            # error; a frame that reaches it is refused by the socket (close 1009).
            sock = await ClientSocket.accept(
                request,
                max_message=limit + TRANSPORT_HEADROOM - 1,
                keepalive_s=self.settings.client_keepalive_s,
                max_buffered=self.settings.outbound_control_bytes,
                control_budget=lambda: events.take(clock.monotonic()),
            )
        except HandshakeRefused as bad:
            return json_error(bad.status, "bad_request", str(bad), bad.headers)

        def cut_off() -> None:
            # Not reading at all: drop the connection (the session stays resumable).
            self.metrics.slow_clients.inc()
            _log.warning("client_not_reading", peer=request.remote)
            sock.abort()

        outbound = Outbound(
            sock.send_text,
            sock.send_bytes,
            prepare=as_text,
            max_audio_frames=self.settings.outbound_audio_frames,
            max_control_bytes=self.settings.outbound_control_bytes,
            on_audio_dropped=self.metrics.audio_dropped.inc,
            on_overflow=cut_off,
            write_audio_now=sock.write_binary_now,
        )
        writer = asyncio.create_task(outbound.run())
        session: Session | None = None
        close_code = 1000
        try:
            started = await self._await_start(sock, outbound, user, events)
            if isinstance(started, Session):
                session = started
                session.share_event_budget(events)
                await self._serve(sock, session, outbound)
            else:
                close_code = started
        finally:
            sock.direct_binary = None
            # Park unless the session ended or another socket has taken it over.
            if session is not None and not session.ended.is_set() and session.outbound is outbound:
                self.manager.park(session)
            outbound.close()
            try:
                await asyncio.wait_for(writer, timeout=5)
            except (TimeoutError, ConnectionError):
                writer.cancel()
            if session is not None and session.end_reason is EndReason.ERROR:
                close_code = 1011
            elif session is not None and session.ownership.handed_off:
                close_code = 1012  # service restart: resume on another node
            await sock.close(close_code)
        return sock.response

    def _send(self, outbound: Outbound[str], event: ServerEvent) -> None:
        outbound.event(event)

    async def _await_start(
        self, sock: ClientSocket, outbound: Outbound[str], user: SessionUser, events: TokenBucket
    ) -> Session | int:
        """The started session, or the close code for a connection that ends before one."""
        deadline = time.monotonic() + self.settings.session_start_timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                message = await asyncio.wait_for(sock.receive(), timeout=max(remaining, 0.001))
            except TimeoutError:
                self._send(
                    outbound,
                    ErrorEvent(
                        code=ErrorCode.SESSION_START_TIMEOUT,
                        message="send session.start within "
                        f"{self.settings.session_start_timeout_s:g} s",
                        fatal=True,
                    ),
                )
                return 1008
            if message is None:
                return 1000
            if not events.take(self.manager.clock.monotonic()):
                self._send(
                    outbound,
                    ErrorEvent(
                        code=ErrorCode.RATE_LIMITED,
                        message="too many events: at most "
                        f"{events.rate_per_s:g} per second; this one was dropped",
                        retryable=True,
                    ),
                )
                continue
            try:
                event = self._decode(message)
            except ProtocolError as exc:
                self._send(outbound, ErrorEvent.from_error(exc))
                continue
            if isinstance(event, SessionStart):
                try:
                    if event.resume is not None:
                        return await self.manager.resume(event, user, outbound)
                    return await self.manager.start(event, user, outbound)
                except StartRefused as refused:
                    self._send(outbound, refused.event)
                    if refused.ended is not None:
                        self._send(outbound, refused.ended)
                    if refused.fatal:
                        return 1000
                    continue  # the client may send another session.start
                except Exception:
                    _log.exception("session_start_failed")
                    self._send(
                        outbound,
                        ErrorEvent(
                            code=ErrorCode.INTERNAL,
                            message="internal error while starting the session",
                            fatal=True,
                            event_id=event.event_id,
                        ),
                    )
                    self._send(outbound, SessionEnded(reason=EndReason.ERROR))
                    return 1011
            if isinstance(event, Ping):
                self._send(outbound, Pong(id=event.id))
            elif isinstance(event, SessionEnd):
                self._send(outbound, SessionEnded(reason=EndReason.CLIENT))
                return 1000
            else:
                self._send(
                    outbound,
                    ErrorEvent(
                        code=ErrorCode.NOT_STARTED,
                        message="send session.start first",
                        event_id=getattr(event, "event_id", None),
                    ),
                )

    def _decode(self, message: str | bytes) -> Any:
        if isinstance(message, str):
            return decode_text(message, max_bytes=self.settings.max_text_frame)
        return decode_binary(message, max_bytes=self.settings.max_binary_frame)

    async def _serve(self, sock: ClientSocket, session: Session, outbound: Outbound[str]) -> None:
        reader = asyncio.create_task(self._read(sock, session))
        ended = asyncio.create_task(session.ended.wait())
        released = asyncio.create_task(outbound.released.wait())
        try:
            await asyncio.wait([reader, ended, released], return_when=asyncio.FIRST_COMPLETED)
        finally:
            sock.direct_binary = None
            for task in (reader, ended, released):
                task.cancel()
        if session.ended.is_set():
            await self.manager.forget(session)

    async def _read(self, sock: ClientSocket, session: Session) -> None:
        sock.direct_binary = self._direct_audio(session)
        frames = self.metrics.frames
        while (message := await sock.receive()) is not None:
            if isinstance(message, str):
                frames.text_in += 1
            else:
                frames.binary_in += 1
            event: Any = None
            try:
                event = self._decode(message)
                await session.on_client_event(event)
            except ProtocolError as exc:
                session.emit(ErrorEvent.from_error(exc))
            except Exception:
                _log.exception("client_event_failed", session_id=session.session_id)
                session.error(
                    ErrorCode.INTERNAL,
                    "internal error handling that event",
                    getattr(event, "event_id", None),
                )
            if session.ended.is_set():
                return

    def _direct_audio(self, session: Session) -> Callable[[bytes], bool]:
        """The socket's hot path for this session's binary frames (``Session.audio_now``);
        a frame it declines takes the event path, which says what is wrong with it."""
        frames = self.metrics.frames
        max_bytes = self.settings.max_binary_frame
        ended = session.ended
        audio_now = session.client.audio_now  # bound once: this runs for every frame

        def take(pcm: bytes) -> bool:
            if len(pcm) > max_bytes or ended.is_set():
                return False
            try:
                if not audio_now(pcm):
                    return False
            except Exception:  # handled (perhaps in part): never run it a second time
                _log.exception("client_audio_failed", session_id=session.session_id)
                session.error(ErrorCode.INTERNAL, "internal error handling that audio")
            frames.binary_in += 1
            return True

        return take
