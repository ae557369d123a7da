"""HTTP and WebSocket endpoints (aiohttp.web): auth, origin check, limits, the session socket.

The socket handler is a thin shell: decode frames with the pure protocol codec, hand events to
the ``Session``, write through its ``Outbound``. Every bad input becomes an ``error`` event; a
client can never take the server down.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from gateway.admission import Admission, json_error
from gateway.client_socket import ClientSocket, HandshakeRefused
from gateway.config import Settings
from gateway.handlers_in_flight import HandlersInFlight
from gateway.http_tools.shared_client import close_shared_http_client
from gateway.node import NodeRuntime
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
from gateway.providers import close_shared_upstream_clients
from gateway.realtime_compat.routes import RealtimeCompatRoutes
from gateway.registry import Registry
from gateway.session import Outbound, Session, SessionUser
from gateway.session.manager import SessionManager
from gateway.session.ratelimit import TokenBucket
from gateway.session.refusals import StartRefused
from gateway.twilio_routes import TwilioRoutes

__all__ = ["GatewayServer"]

_log = structlog.get_logger("server")

# Bytes the WebSocket transport accepts beyond the protocol's frame limits (see above).
TRANSPORT_HEADROOM = 64 * 1024
# How often a worker adds its frame counts to the counters all workers share.
FRAMES_FLUSH_S = 1.0
# On shutdown, after every session has ended: how long the request handlers have to return (a
# phone call's last words play out, a socket's close handshake), then how long the cancelled
# ones have (``gateway.handlers_in_flight``).
HANDLERS_GRACE_S = 5.0
HANDLERS_CANCEL_WAIT_S = 2.0
# The browser demo client, served at / and /static/.
STATIC_DIR = Path(__file__).resolve().parent / "static"
# Scripts, styles and sockets of this origin only ('self' covers ws:/wss: to it in CSP 3).
INDEX_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; connect-src 'self'; img-src 'self' data:; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-cache",
}


def as_text(event: ServerEvent) -> tuple[str, int]:
    """The native edge's ``prepare``: each event encoded once, as it is queued (its JSON's size
    counts against the client's control budget)."""
    payload = encode(event)
    return payload.decode(), len(payload)


@dataclass(slots=True)
class GatewayServer:
    settings: Settings
    registry: Registry
    metrics: Metrics
    manager: SessionManager
    admission: Admission
    node: NodeRuntime | None = None
    handlers: HandlersInFlight = field(default_factory=HandlersInFlight)

    @property
    def draining(self) -> bool:
        return self.admission.draining

    def app(self) -> web.Application:
        app = web.Application(
            client_max_size=self.settings.max_text_frame,
            middlewares=[self.handlers.middleware, self.admission.middleware],
        )
        app.router.add_get("/v1/session", self.session_socket)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        if self.settings.metrics_port is None:  # else /metrics has a listen address of its own
            app.router.add_get("/metrics", self.metrics_page)
        app.router.add_get("/", self.index)
        app.router.add_static("/static/", STATIC_DIR, append_version=False)
        compat = RealtimeCompatRoutes(self.settings, self.admission, self.manager)
        app.router.add_get("/v1/realtime", compat.realtime)
        twilio = TwilioRoutes(self.settings, self.admission, self.manager)
        app.router.add_post("/twilio/voice", twilio.voice)
        app.router.add_get("/twilio/media", twilio.media)
        app.on_startup.append(self._start_node)
        app.on_shutdown.append(self._finish_handlers)
        app.on_cleanup.append(self._end_sessions)
        return app

    def metrics_app(self) -> web.Application:
        """``/metrics`` alone, for ``GATEWAY_METRICS_HOST``/``GATEWAY_METRICS_PORT``."""
        app = web.Application()
        app.router.add_get("/metrics", self.metrics_page)
        return app

    def runner(self, app: web.Application | None = None) -> web.AppRunner:
        """The aiohttp runner with the gateway's connection settings: a connection must send a
        whole request header within ``GATEWAY_HTTP_HEADER_TIMEOUT_S`` (aiohttp's keep-alive
        timer also runs from the moment a connection opens, and closes a connection whose
        handler still waits for a request)."""
        return web.AppRunner(
            app if app is not None else self.app(),
            handle_signals=False,
            access_log=None,
            shutdown_timeout=2.0,
            keepalive_timeout=self.settings.http_header_timeout_s,
        )

    async def _start_node(self, app: web.Application) -> None:
        """Join the cluster before serving: a node whose store does not answer does not start
        (``StoreUnavailable``). Workers share their frame counts once a second."""
        if self.node is not None:
            await self.node.start()
        if self.metrics.multiprocess:
            app["frames_flush"] = asyncio.create_task(self._flush_frames())

    async def _flush_frames(self) -> None:
        while True:
            await asyncio.sleep(FRAMES_FLUSH_S)
            self.metrics.flush_frames()

    async def _finish_handlers(self, _: web.Application) -> None:
        """Before aiohttp's own shutdown (which would race a handler returning as its wait
        times out): every session left ends, so its handler closes its socket and returns;
        handlers still running after ``HANDLERS_GRACE_S`` are cancelled."""
        self.admission.draining = True  # no socket is taken meanwhile
        await self.manager.end_all()
        finished = await self.handlers.finish(HANDLERS_GRACE_S, HANDLERS_CANCEL_WAIT_S)
        if finished.cancelled:
            _log.warning(
                "handlers_cancelled_at_shutdown", cancelled=finished.cancelled, left=finished.left
            )

    async def _end_sessions(self, app: web.Application) -> None:
        flush = app.get("frames_flush")
        if flush is not None:
            flush.cancel()
            self.metrics.flush_frames()
        await self.manager.end_all()
        if self.node is not None:
            await self.node.stop()
        await self.manager.store.close()
        await close_shared_http_client()  # after the sessions: no tool call is left running
        await close_shared_upstream_clients()  # and no model turn

    # -- plain endpoints -----------------------------------------------------------------------

    async def healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, _: web.Request) -> web.Response:
        if self.draining:
            return web.json_response({"status": "draining"}, status=503)
        if self.node is not None and not self.node.available:
            # Live sessions go on, but nothing new can start or resume: route elsewhere.
            return web.json_response({"status": "degraded", "store": "unavailable"}, status=503)
        return web.json_response({"status": "ready", "registry": self.registry.version})

    async def metrics_page(self, request: web.Request) -> web.Response:
        required = self.settings.metrics_token
        if required is not None:
            header = request.headers.get("Authorization", "")
            given = header[7:].strip() if header.lower().startswith("bearer ") else ""
            if not hmac.compare_digest(given.encode(), required.get_secret_value().encode()):
                return json_error(
                    401,
                    "unauthorized",
                    "send the metrics token as a bearer token",
                    {"WWW-Authenticate": "Bearer"},
                )
        body = self.metrics.render()
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def index(self, _: web.Request) -> web.FileResponse:
        """The browser demo client (``gateway/static``): plain ES modules, no build step."""
        return web.FileResponse(STATIC_DIR / "index.html", headers=INDEX_HEADERS)

    # -- the session socket ----------------------------------------------------------------------

    async def session_socket(self, request: web.Request) -> web.StreamResponse:
        refused = self.admission.refuse_socket(request)
        if refused is not None:
            return refused
        user = self.admission.user(request)
        if isinstance(user, str):
            return json_error(401, "unauthorized", user)
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

    async def drain(self) -> None:
        """SIGTERM: refuse new sessions, then end the open ones (``SessionManager.drain``)."""
        self.admission.draining = True
        await self.manager.drain()
