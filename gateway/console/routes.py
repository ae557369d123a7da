"""The operator's console: ``GET /console`` (the page, ``gateway/static/console``) and its API,
``/admin/v1/console/…``, on every node while the admin API is on (``GATEWAY_ADMIN``):

    GET  /admin/v1/console/sessions                  every node's live sessions, and the nodes
    GET  /admin/v1/console/stream                    the same as server-sent events, on change
    GET  /admin/v1/console/sessions/{id}/timeline    one session's timeline (404: unknown)
    GET  /admin/v1/console/nodes                     the nodes: heartbeat, sessions, version
    POST /admin/v1/console/nodes/{node}/drain        that node drains, as on SIGTERM (202)

Each request passes the admin API's gate (an admin credential as a bearer header, never a
cookie; a foreign origin refused) and is audited as the admin API's are. The stream sends the
directory when it changed, at most once a second (each node publishes once a second), and a
comment every 15 s; a node serves at most ``MAX_STREAMS`` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from gateway.admin.routes import AdminRoutes
from gateway.admin.service import KeyAdmin
from gateway.admission import json_error
from gateway.console.service import Console

__all__ = ["MAX_STREAMS", "ConsoleRoutes"]

MAX_STREAMS = 16
PING_EVERY_S = 15.0
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; connect-src 'self'; img-src 'self' data:; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-cache",
}

Publish = Callable[[str, dict[str, Any]], Awaitable[None]]


class ConsoleRoutes:
    def __init__(
        self,
        console: Console,
        gate: AdminRoutes,
        audit: KeyAdmin,
        *,
        page: Path,
        lease_s: float,
        drain_here: Callable[[], None],
        tell_node: Publish,
    ) -> None:
        """``drain_here``: this node drains (what SIGTERM does); ``tell_node``: a message on
        the bus to another node (which drains on ``{"type": "drain"}``)."""
        self._console = console
        self._gate = gate
        self._audit = audit
        self._page = page
        self._lease_s = lease_s
        self._drain_here = drain_here
        self._tell = tell_node
        self._streams = 0

    def add_to(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/console", self.page)
        r.add_get("/admin/v1/console/sessions", self.sessions)
        r.add_get("/admin/v1/console/stream", self.stream)
        r.add_get("/admin/v1/console/sessions/{session_id}/timeline", self.timeline)
        r.add_get("/admin/v1/console/nodes", self.nodes)
        r.add_post("/admin/v1/console/nodes/{node_id}/drain", self.drain)

    async def page(self, _: web.Request) -> web.FileResponse:
        return web.FileResponse(self._page, headers=PAGE_HEADERS)

    async def sessions(self, request: web.Request) -> web.Response:
        actor = await self._gate.gate(request, "console.sessions")
        if isinstance(actor, web.Response):
            return actor
        return web.json_response(await self._console.directory(self._lease_s))

    async def nodes(self, request: web.Request) -> web.Response:
        actor = await self._gate.gate(request, "console.nodes")
        if isinstance(actor, web.Response):
            return actor
        directory = await self._console.directory(self._lease_s)
        return web.json_response({"nodes": directory["nodes"]})

    async def timeline(self, request: web.Request) -> web.Response:
        actor = await self._gate.gate(request, "console.timeline")
        if isinstance(actor, web.Response):
            return actor
        session_id = request.match_info["session_id"]
        found = await self._console.timeline(session_id, self._lease_s)
        if found is None:
            return json_error(404, "not_found", f"no session {session_id!r} on any node")
        return web.json_response(found)

    async def drain(self, request: web.Request) -> web.Response:
        actor = await self._gate.gate(request, "node.drain")
        if isinstance(actor, web.Response):
            return actor
        node_id = request.match_info["node_id"]
        directory = await self._console.directory(self._lease_s)
        known = {n["node_id"]: n for n in directory["nodes"]}
        if node_id not in known or not known[node_id]["alive"]:
            return json_error(404, "not_found", f"no live node {node_id!r}")
        if node_id == self._console.node_id:
            self._drain_here()
        else:
            await self._tell(node_id, {"type": "drain", "by": actor})
        self._audit.acted(actor, "node.drain", node_id)
        return web.json_response({"node_id": node_id, "draining": True}, status=202)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        actor = await self._gate.gate(request, "console.stream")
        if isinstance(actor, web.Response):
            return actor
        if self._streams >= MAX_STREAMS:
            return json_error(429, "rate_limited", f"at most {MAX_STREAMS} console streams")
        self._streams += 1
        try:
            response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await response.prepare(request)
            await self._feed(response)
            return response
        finally:
            self._streams -= 1

    async def _feed(self, response: web.StreamResponse) -> None:
        last: bytes | None = None
        with contextlib.suppress(ConnectionResetError, ConnectionError):
            while True:
                current = orjson.dumps(await self._console.directory(self._lease_s))
                if current != last:
                    await response.write(b"event: sessions\ndata: " + current + b"\n\n")
                    last = current
                try:
                    await asyncio.wait_for(self._console.changed.wait(), PING_EVERY_S)
                except TimeoutError:
                    await response.write(b": ping\n\n")
