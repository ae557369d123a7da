"""The gateway's aiohttp application: its routes, the plain endpoints, start-up and shutdown.

The client edges (``gateway.edges``) serve the sockets: ``/v1/session`` (``NativeRoutes``),
``/v1/realtime`` (``RealtimeCompatRoutes``) and OpenAI's WebRTC interface beside it
(``RealtimeCallRoutes``: ``/v1/realtime/client_secrets``, ``/v1/realtime/calls``), and the
phone lines (``gateway.phone_lines``: every carrier's answer webhook and ``/phone/media``).
Each is built here with what it needs; this module keeps the health, readiness and metrics
endpoints, the browser demo's static files, and the order of shutdown.
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from aiohttp import web

from gateway.admin.routes import AdminRoutes
from gateway.admission import Admission, bearer_or_query_token, json_error
from gateway.config import Settings
from gateway.console.routes import ConsoleRoutes
from gateway.console.service import Console
from gateway.edges.native.routes import NativeRoutes
from gateway.edges.realtime.routes import RealtimeCompatRoutes
from gateway.edges.realtime.webrtc_calls import RealtimeCallRoutes
from gateway.edges.rtc.loading import MediaLoader
from gateway.edges.webrtc.routes import WebRtcRoutes
from gateway.governance import Governance
from gateway.governance.revocations import RevocationWatch
from gateway.handlers_in_flight import HandlersInFlight
from gateway.http_tools.shared_client import close_shared_http_client
from gateway.node import NodeRuntime
from gateway.observability import Metrics
from gateway.phone_lines import add_phone_routes
from gateway.providers import PROVIDERS, close_shared_upstream_clients
from gateway.registry import Registry
from gateway.routing.listing import models_listing
from gateway.session.manager import SessionManager

__all__ = ["GatewayServer"]

_log = structlog.get_logger("server")

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
CONSOLE_TASK = web.AppKey("console", asyncio.Task[None])  # its publications, once a second
INDEX_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; connect-src 'self'; img-src 'self' data:; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-cache",
}


@dataclass(slots=True)
class GatewayServer:
    settings: Settings
    registry: Registry
    metrics: Metrics
    manager: SessionManager
    admission: Admission
    node: NodeRuntime | None = None
    handlers: HandlersInFlight = field(default_factory=HandlersInFlight)
    # Keys and budget counters (closed at shutdown), the admin API (None: off), and the watch
    # that ends revoked keys' sessions.
    governance: Governance | None = None
    admin: AdminRoutes | None = None
    revocations: RevocationWatch | None = None
    # The native WebRTC edge, once app() has built it (its calls, for the operator and tests).
    webrtc: WebRtcRoutes | None = None
    # The operator's console (with the admin API), and a drain asked of this node by it (from
    # any node): ``gateway serve`` drains then as on SIGTERM.
    console: Console | None = None
    drain_asked: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def draining(self) -> bool:
        return self.admission.draining

    def app(self) -> web.Application:
        app = web.Application(
            client_max_size=self.settings.max_text_frame,
            middlewares=[self.handlers.middleware, self.admission.middleware],
        )
        native = NativeRoutes(self.settings, self.admission, self.manager, self.metrics)
        app.router.add_get("/v1/session", native.session_socket)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        if self.settings.metrics_port is None:  # else /metrics has a listen address of its own
            app.router.add_get("/metrics", self.metrics_page)
        app.router.add_get("/", self.index)
        app.router.add_static("/static/", STATIC_DIR, append_version=False)
        compat = RealtimeCompatRoutes(self.settings, self.admission, self.manager)
        app.router.add_get("/v1/realtime", compat.realtime)
        media = MediaLoader(self.settings, self.metrics.webrtc_peers.inc)  # both WebRTC edges'
        RealtimeCallRoutes(self.settings, self.admission, self.manager, media).add_to(app)
        self.webrtc = WebRtcRoutes(self.settings, self.admission, self.manager, media)
        self.webrtc.add_to(app)
        add_phone_routes(
            app,
            self.settings,
            self.admission,
            self.manager,
            book=self.governance,
            tool_ids=self.registry.tool_ids(),
        )
        if self.admin is not None:
            self.admin.add_to(app)
            if self.console is not None:
                self._console_routes().add_to(app)
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
        if self.revocations is not None:
            self.revocations.start()
        if self.manager.pool is not None:
            self.manager.pool.start()
        if self.metrics.multiprocess:
            app["frames_flush"] = asyncio.create_task(self._flush_frames())
        if self.console is not None:
            self.console.watch(self.manager.sessions, lambda: self.admission.draining)
            app[CONSOLE_TASK] = asyncio.create_task(self.console.run(self.manager.clock.monotonic))

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
        if CONSOLE_TASK in app:
            app[CONSOLE_TASK].cancel()
        await self.manager.end_all()
        if self.manager.pool is not None:
            await self.manager.pool.close()
        if self.revocations is not None:
            await self.revocations.stop()
        if self.node is not None:
            await self.node.stop()
        if self.governance is not None:
            await self.governance.close()  # SQLite; on Redis, the store's connection
        await self.manager.store.close()
        await close_shared_http_client()  # after the sessions: no tool call is left running
        await close_shared_upstream_clients()  # and no model turn

    def _console_routes(self) -> ConsoleRoutes:
        assert self.console is not None
        assert self.admin is not None
        store = self.manager.store
        return ConsoleRoutes(
            self.console,
            self.admin,
            self.admin.audit,
            page=STATIC_DIR / "console" / "index.html",
            lease_s=self.settings.lease_ttl_s,
            drain_here=self.drain_asked.set,
            tell_node=store.publish,
        )

    # -- plain endpoints -----------------------------------------------------------------------

    async def models(self, request: web.Request) -> web.Response:
        """The models this caller may ask for (``/v1/session``'s ``model``, ``/v1/realtime``'s
        ``?model=``), in OpenAI's list shape; credentials as for a session."""
        user = await self.admission.identify(bearer_or_query_token(request))
        if isinstance(user, web.Response):
            return user
        configured = {
            record.name: record.default_models(self.settings)
            for record in PROVIDERS
            if record.missing(self.settings) is None
        }
        listing = models_listing(
            self.manager.parts.catalog,
            roles=user.roles,
            key_models=user.models,
            configured=configured,
        )
        return web.json_response(listing)

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

    async def drain(self) -> None:
        """SIGTERM: refuse new sessions, then end the open ones (``SessionManager.drain``)."""
        self.admission.draining = True
        await self.manager.drain()
