"""``GET /v1/realtime?model=…``: the OpenAI-Realtime-compatible endpoint (GA protocol).

Auth is the gateway's own, with the same checks as ``/v1/session`` (origin, draining, session
limit, the JWT): the token comes as ``Authorization: Bearer …`` (what the OpenAI SDKs send as
their API key) or, from a browser, in the ``openai-insecure-api-key.<token>`` subprotocol; the
socket then speaks the ``realtime`` subprotocol. ``model`` picks the upstream
(``model_names``): ``gpt-…`` OpenAI Realtime, ``gemini-…`` Gemini Live, ``local`` the embedded
model; anything else the gateway's default provider. A name whose upstream this gateway does
not serve gets an ``error`` listing the names it serves, then close 1008. ``?gateway_tools=show``
shows the calls the gateway runs itself as conversation items (``translate``); by default the
client never sees them.

The socket reads GA events until the client closes it or the session ends; the close code says
why (``server_wire.close_code``). A client mistake is an ``error`` event, never a close.
"""

from __future__ import annotations

import asyncio

import orjson
import structlog
from aiohttp import web

from gateway.admission import Admission, json_error
from gateway.config import Settings
from gateway.edges.realtime.bridge import CompatBridge
from gateway.edges.realtime.client_tools import ToolCheck
from gateway.edges.realtime.model_names import alias_refusal, model_refusal, provider_for_model
from gateway.edges.realtime.server_wire import SessionIds, close_code
from gateway.edges.socket import ClientSocket, HandshakeRefused
from gateway.protocol import EndReason, SessionStart
from gateway.session import Session, SessionUser
from gateway.session.client_output import ClientOutput
from gateway.session.client_tools import declarations_problem
from gateway.session.manager import SessionManager
from gateway.session.ratelimit import TokenBucket

__all__ = ["CLOSE_MODEL_NOT_SERVED", "RealtimeCompatRoutes"]

_log = structlog.get_logger("realtime_compat")

SUBPROTOCOL = "realtime"
KEY_SUBPROTOCOL = "openai-insecure-api-key."
# A GA client may append up to a few seconds of audio in one event (base64 JSON).
MAX_CLIENT_EVENT = 2 * 1024 * 1024
CLOSE_MODEL_NOT_SERVED = 1008  # after the error that lists the names this gateway serves


def _token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    for offered in request.headers.get("Sec-WebSocket-Protocol", "").split(","):
        offered = offered.strip()
        if offered.startswith(KEY_SUBPROTOCOL):
            return offered[len(KEY_SUBPROTOCOL) :] or None
    return None


class RealtimeCompatRoutes:
    def __init__(self, settings: Settings, admission: Admission, manager: SessionManager) -> None:
        self.settings = settings
        self.admission = admission
        self.manager = manager

    async def realtime(self, request: web.Request) -> web.StreamResponse:
        refused = self.admission.refuse_socket(request)
        if refused is not None:
            return refused
        user = await self.admission.user_from_token(_token(request))
        if isinstance(user, web.StreamResponse):
            return user  # refused: 401, 429 (a budget has run out) or 503
        model = request.query.get("model", "").strip()
        if not model:
            return json_error(400, "bad_request", "name the model: /v1/realtime?model=…")
        offered = {p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")}
        # The socket's control frames spend from a budget, as on /v1/session.
        events = TokenBucket(self.settings.client_events_per_s, self.settings.client_events_burst)
        clock = self.manager.clock
        try:
            sock = await ClientSocket.accept(
                request,
                max_message=MAX_CLIENT_EVENT,
                keepalive_s=self.settings.client_keepalive_s,
                max_buffered=self.settings.outbound_control_bytes,
                control_budget=lambda: events.take(clock.monotonic()),
                protocol=SUBPROTOCOL if SUBPROTOCOL in offered else None,
            )
        except HandshakeRefused as bad:
            return json_error(bad.status, "bad_request", str(bad), bad.headers)
        catalog = self.manager.parts.catalog
        refusal = (
            model_refusal(model, self.settings)
            if catalog is None
            else alias_refusal(model, catalog, user.roles, user.models)
        )
        if refusal is not None:  # said at once, instead of a missing key at the first audio
            error = {"type": "error", "event_id": SessionIds()("event"), "error": refusal.payload()}
            await sock.send_text(orjson.dumps(error).decode())
            await sock.close(CLOSE_MODEL_NOT_SERVED)
            return sock.response
        await self._serve(
            sock, user, model, show_tools=request.query.get("gateway_tools") == "show"
        )
        return sock.response

    async def _serve(
        self, sock: ClientSocket, user: SessionUser, model: str, *, show_tools: bool
    ) -> None:
        manager = self.manager

        async def start_session(start: SessionStart, outbound: ClientOutput) -> Session:
            session = await manager.start(start, user, outbound)
            session.movable = False  # GA clients know no session.moving: it ends with the socket
            return session

        async def end_unused(session: Session) -> None:
            session.detach()  # its end is no news to the client: another session replaces it
            await session.end(EndReason.CLIENT, "replaced before its first use")
            await manager.forget(session)

        alias = self.manager.parts.catalog is not None  # the alias picks the upstream
        provider = None if alias else provider_for_model(model)
        bridge = CompatBridge(
            sock.send_text,
            model=model,
            provider=provider,
            start_session=start_session,
            end_unused=end_unused,
            max_audio_frames=self.settings.outbound_audio_frames,
            check_tools=self._tool_check(user, provider),
            show_tools=show_tools,
            write_now=(sock.writable_now, sock.write_text_now),
            alias=alias,
        )
        sock.direct_text = bridge.audio_in_now
        reason = "client"
        try:
            await bridge.open()
            reader = asyncio.create_task(self._read(sock, bridge))
            ended = asyncio.create_task(bridge.ended.wait())
            try:
                await asyncio.wait([reader, ended], return_when=asyncio.FIRST_COMPLETED)
            finally:
                reader.cancel()
                ended.cancel()
            reason = bridge.end_reason or reason
        except Exception:
            _log.exception("realtime_compat_failed")
            reason = "error"
        finally:
            await bridge.close()
            if bridge.session is not None:
                await manager.forget(bridge.session)
            if not sock.closed:
                await sock.close(close_code(reason))

    def _tool_check(self, user: SessionUser, provider: str | None) -> ToolCheck:
        """The rules of the session's ``client_tools`` (``session_setup`` checks them again at
        the start), at hand for each ``session.update`` before the session starts."""
        visible = [spec.tool_id for spec in self.manager.registry.visible_to(user.roles)]
        upstream = provider if provider is not None else self.settings.provider
        return lambda tools: declarations_problem(tools, visible, upstream)

    async def _read(self, sock: ClientSocket, bridge: CompatBridge) -> None:
        audio_in_now = bridge.audio_in_now
        while (message := await sock.receive()) is not None:
            # Appends held while the handler was busy (the session opening, say) take the hot
            # path too: the same audio, in the same order, without a decode and an await each.
            if type(message) is str and audio_in_now(message):
                continue
            await bridge.on_client_text(message)
