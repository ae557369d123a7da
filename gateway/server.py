"""HTTP and WebSocket endpoints (aiohttp.web): auth, origin check, limits, the session socket.

The socket handler is a thin shell: decode frames with the pure protocol codec, hand events to
the ``Session``, write through its ``Outbound``. Every bad input becomes an ``error`` event; a
client can never take the server down.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
import structlog
from aiohttp import WSMsgType, web

from gateway.clock import Clock
from gateway.config import Settings
from gateway.observability import Metrics
from gateway.protocol import (
    AudioFormat,
    EndReason,
    ErrorCode,
    ErrorEvent,
    Mode,
    Ping,
    Pong,
    ProtocolError,
    Provider,
    SessionEnd,
    SessionEnded,
    SessionLimits,
    SessionStart,
    SessionStarted,
    ToolInfo,
    decode_binary,
    decode_text,
    encode,
)
from gateway.registry import Registry
from gateway.session import Outbound, Session, SessionUser
from gateway.toolrun import AuditSink, ResultCache, ToolRunner
from transports.base import ToolDeclaration, Transport, TransportError, UpstreamConfig

__all__ = ["GatewayServer", "TransportFactory"]

_log = structlog.get_logger("server")

TransportFactory = Callable[[str, Settings], Transport]


def _json_error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


@dataclass(slots=True)
class _Detached:
    session: Session
    token_hash: str
    expiry: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class GatewayServer:
    settings: Settings
    registry: Registry
    transports: TransportFactory
    metrics: Metrics
    audit: AuditSink
    clock: Clock
    cache: ResultCache
    draining: bool = False
    sessions: dict[str, Session] = field(default_factory=dict)
    _tokens: dict[str, str] = field(default_factory=dict)
    _detached: dict[str, _Detached] = field(default_factory=dict)
    _recent: dict[str, deque[float]] = field(default_factory=dict)
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.settings.max_text_frame)
        app.router.add_get("/v1/session", self.session_socket)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics_page)
        app.router.add_get("/", self.index)
        return app

    # -- plain endpoints -----------------------------------------------------------------------

    async def healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, _: web.Request) -> web.Response:
        if self.draining:
            return web.json_response({"status": "draining"}, status=503)
        return web.json_response({"status": "ready", "registry": self.registry.version})

    async def metrics_page(self, _: web.Request) -> web.Response:
        body = self.metrics.render()
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def index(self, _: web.Request) -> web.Response:
        return web.Response(
            text="Realtime gateway: connect a WebSocket to /v1/session (see docs/protocol.md).",
            content_type="text/plain",
        )

    # -- admission -----------------------------------------------------------------------------

    def _authenticate(self, request: web.Request) -> SessionUser | str:
        """The user, or why the upgrade is refused (sent as a 401 JSON body)."""
        if self.settings.auth == "none":
            return SessionUser(user_id="local", roles=("admin", "caregiver"))
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        token = token or request.query.get("token")
        if not token:
            return "missing bearer token"
        assert self.settings.auth_secret is not None
        try:
            claims = jwt.decode(
                token,
                self.settings.auth_secret.get_secret_value(),
                algorithms=["HS256"],
                options={"require": ["sub", "exp"]},
            )
        except jwt.ExpiredSignatureError:
            return "token expired"
        except jwt.PyJWTError:
            return "invalid token"
        roles = claims.get("roles") or []
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            roles = []
        tenant = claims.get("tenant")
        return SessionUser(
            user_id=str(claims["sub"]),
            roles=tuple(roles),
            tenant=tenant if isinstance(tenant, str) else None,
            token=token,
        )

    def _admit(self, request: web.Request) -> web.Response | None:
        origin = request.headers.get("Origin")
        allowed = self.settings.allowed_origins
        if origin and allowed and origin.rstrip("/") not in allowed:
            return _json_error(403, "forbidden", "origin not allowed")
        if self.draining:
            return _json_error(503, "unavailable", "the gateway is draining")
        peer = request.remote or "?"
        window = self._recent.setdefault(peer, deque())
        now = time.monotonic()
        while window and now - window[0] > 60:
            window.popleft()
        if len(window) >= self.settings.connections_per_minute:
            return _json_error(429, "rate_limited", "too many connections; slow down")
        if len(self.sessions) >= self.settings.max_sessions:
            return _json_error(503, "rate_limited", "the gateway is at its session limit")
        window.append(now)
        return None

    # -- the session socket ----------------------------------------------------------------------

    async def session_socket(self, request: web.Request) -> web.StreamResponse:
        refused = self._admit(request)
        if refused is not None:
            return refused
        user = self._authenticate(request)
        if isinstance(user, str):
            return _json_error(401, "unauthorized", user)
        limit = max(self.settings.max_text_frame, self.settings.max_binary_frame)
        ws = web.WebSocketResponse(max_msg_size=limit + 1, compress=False, heartbeat=30)
        await ws.prepare(request)
        outbound = Outbound(
            ws.send_str,
            ws.send_bytes,
            max_audio_frames=self.settings.outbound_audio_frames,
            on_audio_dropped=self.metrics.audio_dropped.inc,
        )
        writer = asyncio.create_task(outbound.run())
        session: Session | None = None
        try:
            session = await self._await_start(ws, outbound, user)
            if session is not None:
                await self._serve(ws, session)
        finally:
            if session is not None and not session.ended.is_set():
                self._park(session)
            outbound.close()
            try:
                await asyncio.wait_for(writer, timeout=5)
            except (TimeoutError, ConnectionError):
                writer.cancel()
            if not ws.closed:
                await ws.close(code=1000)
        return ws

    def _send(self, outbound: Outbound, event: Any) -> None:
        outbound.event(encode(event))

    async def _await_start(
        self, ws: web.WebSocketResponse, outbound: Outbound, user: SessionUser
    ) -> Session | None:
        deadline = time.monotonic() + self.settings.session_start_timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                msg = await asyncio.wait_for(ws.receive(), timeout=max(remaining, 0.001))
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
                outbound.close()
                await asyncio.sleep(0)
                await ws.close(code=1008)
                return None
            if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return None
            try:
                event = self._decode(msg)
            except ProtocolError as exc:
                self._send(outbound, ErrorEvent.from_error(exc))
                continue
            if isinstance(event, SessionStart):
                return await self._start(event, outbound, user)
            if isinstance(event, Ping):
                self._send(outbound, Pong(id=event.id))
            elif isinstance(event, SessionEnd):
                self._send(outbound, SessionEnded(reason=EndReason.CLIENT))
                return None
            else:
                self._send(
                    outbound,
                    ErrorEvent(
                        code=ErrorCode.NOT_STARTED,
                        message="send session.start first",
                        event_id=getattr(event, "event_id", None),
                    ),
                )

    def _decode(self, msg: Any) -> Any:
        if msg.type == WSMsgType.TEXT:
            return decode_text(msg.data, max_bytes=self.settings.max_text_frame)
        if msg.type == WSMsgType.BINARY:
            return decode_binary(msg.data, max_bytes=self.settings.max_binary_frame)
        raise ProtocolError(ErrorCode.INVALID_EVENT, "unsupported frame type")

    async def _start(
        self, start: SessionStart, outbound: Outbound, user: SessionUser
    ) -> Session | None:
        if start.resume is not None:
            return self._resume(start, outbound, user)
        provider = start.provider.value if start.provider else self.settings.provider
        visible = self.registry.visible_to(user.roles, start.tools)
        try:
            transport = self.transports(provider, self.settings)
            config = UpstreamConfig(
                mode="voice" if start.mode.value == "voice" else "text",
                instructions=self._instructions(start, visible),
                tools=[
                    ToolDeclaration(s.tool_id, s.description, s.provider_schemas) for s in visible
                ],
                client_input_rate=start.audio.input_rate,
                client_output_rate=start.audio.output_rate,
                model=start.model,
                voice=start.voice,
                locale=start.locale,
            )
            await asyncio.wait_for(transport.connect(config), timeout=15)
        except (TransportError, TimeoutError, OSError) as exc:
            message = str(exc) or "the upstream did not answer"
            self._send(
                outbound,
                ErrorEvent(
                    code=ErrorCode.UPSTREAM_UNAVAILABLE,
                    message=f"cannot open the {provider} upstream: {message}",
                    retryable=True,
                    fatal=True,
                    event_id=start.event_id,
                ),
            )
            self._send(outbound, SessionEnded(reason=EndReason.UPSTREAM_FAILED, detail=message))
            return None
        session_id = f"sess_{secrets.token_hex(12)}"
        token = secrets.token_urlsafe(24)
        runner = ToolRunner(
            self.registry,
            data_dir=self.settings.data_dir,
            audit=self.audit,
            clock=self.clock,
            cache=self.cache,
            budgets={"voice": self.settings.budget("voice"), "text": self.settings.budget("text")},
            observer=self.metrics,
        )
        session = Session(
            session_id=session_id,
            user=user,
            start=start,
            registry=self.registry,
            transport=transport,
            runner=runner,
            budgets={"voice": self.settings.budget("voice"), "text": self.settings.budget("text")},
            clock=self.clock,
            metrics=self.metrics,
            confirmation_ttl_s=self.settings.confirmation_ttl_s,
        )
        session.upstream_ready()
        session.attach(outbound)
        self.sessions[session_id] = session
        self._tokens[session_id] = _hash(token)
        self.metrics.active_sessions.inc()
        session.emit(self._started(session, token, resumed=False, provider=provider))
        return session

    def _started(
        self, session: Session, token: str, *, resumed: bool, provider: str
    ) -> SessionStarted:
        visible = self.registry.visible_to(session.user.roles, session.enabled)
        return SessionStarted(
            session_id=session.session_id,
            resume_token=token,
            mode=Mode(session.mode),
            provider=Provider(provider),
            model=provider,
            registry_version=self.registry.version,
            tools=tuple(
                ToolInfo(
                    name=s.tool_id,
                    summary=s.summary,
                    category=s.category,
                    requires_confirmation=s.needs_confirmation,
                )
                for s in visible
            ),
            audio=AudioFormat(input_rate=session.input_rate, output_rate=session.output_rate),
            resumed=resumed,
            limits=SessionLimits(
                max_duration_s=self.settings.max_duration_s,
                idle_timeout_s=self.settings.idle_timeout_s,
            ),
        )

    def _instructions(self, start: SessionStart, visible: list[Any]) -> str:
        base = start.instructions or self.settings.default_instructions
        tools = "\n".join(f"- {s.tool_id}: {s.description}" for s in visible)
        return f"{base}\n\nTools you may call:\n{tools}" if tools else base

    def _resume(self, start: SessionStart, outbound: Outbound, user: SessionUser) -> Session | None:
        assert start.resume is not None
        parked = self._detached.get(start.resume.session_id)
        valid = parked is not None and hmac.compare_digest(
            parked.token_hash, _hash(start.resume.resume_token)
        )
        if parked is None or not valid or parked.session.user.user_id != user.user_id:
            self._send(
                outbound,
                ErrorEvent(
                    code=ErrorCode.RESUME_FAILED,
                    message="no resumable session with that id and token",
                    event_id=start.event_id,
                ),
            )
            return None
        del self._detached[start.resume.session_id]
        if parked.expiry is not None:
            parked.expiry.cancel()
        session = parked.session
        token = secrets.token_urlsafe(24)
        self._tokens[session.session_id] = _hash(token)
        session.attach(outbound)
        session.emit(self._started(session, token, resumed=True, provider=self.settings.provider))
        return session

    def _park(self, session: Session) -> None:
        """The socket dropped: keep the session for the resume window, then end it."""
        session.detach()
        parked = _Detached(session, self._tokens.get(session.session_id, ""))
        self._detached[session.session_id] = parked
        loop = asyncio.get_running_loop()

        def expire() -> None:
            if self._detached.pop(session.session_id, None) is not None:
                task = asyncio.ensure_future(
                    self._finish(session, EndReason.CLIENT, "resume window passed")
                )
                self._background.add(task)
                task.add_done_callback(self._background.discard)

        parked.expiry = loop.call_later(self.settings.resume_window_s, expire)

    async def _finish(self, session: Session, reason: EndReason, detail: str | None) -> None:
        await session.end(reason, detail)
        self._forget(session)

    def _forget(self, session: Session) -> None:
        if self.sessions.pop(session.session_id, None) is not None:
            self.metrics.active_sessions.dec()
        self._tokens.pop(session.session_id, None)

    async def _serve(self, ws: web.WebSocketResponse, session: Session) -> None:
        upstream = asyncio.create_task(session.run_upstream())
        timers = asyncio.create_task(self._timers(session))
        reader = asyncio.create_task(self._read(ws, session))
        ended = asyncio.create_task(session.ended.wait())
        try:
            await asyncio.wait([reader, ended], return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            timers.cancel()
            if session.ended.is_set():
                reader.cancel()
                upstream.cancel()
                self._forget(session)
            elif not reader.done():
                reader.cancel()
            # A dropped client leaves the upstream reader running for a resume.

    async def _read(self, ws: web.WebSocketResponse, session: Session) -> None:
        async for msg in ws:
            if msg.type == WSMsgType.ERROR:
                return
            binary = msg.type == WSMsgType.BINARY
            (self.metrics.binary_in if binary else self.metrics.text_in).inc()
            try:
                event = self._decode(msg)
                await session.on_client_event(event)
            except ProtocolError as exc:
                session.emit(ErrorEvent.from_error(exc))
            except Exception:
                _log.exception("client_event_failed", session_id=session.session_id)
                session.error(ErrorCode.INTERNAL, "internal error handling that event")
            if session.ended.is_set():
                return

    async def _timers(self, session: Session) -> None:
        while not session.ended.is_set():
            await asyncio.sleep(0.25)
            await session.tools.expire_due()
            if session.idle_for() > self.settings.idle_timeout_s:
                await session.end(EndReason.IDLE_TIMEOUT)
            elif session.age() > self.settings.max_duration_s:
                await session.end(EndReason.MAX_DURATION)

    async def drain(self) -> None:
        """SIGTERM: refuse new sessions, end every session with reason shutdown."""
        self.draining = True
        await asyncio.sleep(min(self.settings.drain_grace_s, 10))
        for session in list(self.sessions.values()):
            await session.end(EndReason.SHUTDOWN, "the gateway is shutting down")


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
