"""OpenAI's WebRTC interface, served by the gateway: the media ends here, so the gateway's tools,
policy, budgets, audit and traces stay in the path (docs/protocol.md 10.15a).

- ``POST /v1/realtime/client_secrets`` (``client_secrets``): an ephemeral key for a browser;
- ``POST /v1/realtime/calls[?model=…]`` with ``Authorization: Bearer ek_…`` (or a key or JWT,
  from a server): the body is the SDP offer (``application/sdp``), or OpenAI's "unified
  interface" (``multipart/form-data`` with an ``sdp`` part and a ``session`` part, a GA session
  config applied over the key's). The answer: ``201``, ``application/sdp``, the SDP answer,
  ``Location: /v1/realtime/calls/{call_id}`` (``rtc_…``). The peer's data channel speaks the
  GA Realtime protocol (``webrtc_call``);
- ``POST /v1/realtime/calls/{call_id}/hangup``: the caller's own call ends (404 for any other,
  or one of another node).

Each checks what every socket's upgrade does (origin 403, draining and the session limit 503)
and the credential (401; 429 ``budget_exhausted`` with the budget; 503 the store), then the
body and the config (400 naming the field, 415 another content type), all before a peer
connection is made: a refused call opens nothing. Errors are OpenAI's shape
(``http_errors``). Pages of another origin call these with ``fetch``: allowed origins get CORS
headers and their preflights answered (``gateway.security.cors``).

aiortc and PyAV are loaded at the first call (``gateway.edges.rtc.loading``), whichever
WebRTC edge takes it.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import structlog
from aiohttp import BodyPartReader, web

from gateway.admission import Admission, bearer_or_query_token
from gateway.config import Settings
from gateway.edges.realtime.call_setup import model_named, plan_call, session_patch
from gateway.edges.realtime.client_secrets import ClientSecrets
from gateway.edges.realtime.errors import CompatError, unknown_parameter
from gateway.edges.realtime.http_errors import compat_error, openai_error, reshaped
from gateway.edges.realtime.session_config import SessionPatch
from gateway.edges.rtc.loading import MediaLoader
from gateway.security.cors import cors_headers, preflight_headers
from gateway.security.ephemeral_keys import EphemeralGrant, looks_ephemeral
from gateway.session import SessionUser
from gateway.session.manager import SessionManager

__all__ = ["CALLS", "CLIENT_SECRETS", "RealtimeCallRoutes", "read_offer"]

_log = structlog.get_logger("realtime_calls")

CALLS = "/v1/realtime/calls"
CLIENT_SECRETS = "/v1/realtime/client_secrets"
MAX_SDP_BYTES = 64 * 1024
MAX_SESSION_BYTES = 64 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Unsupported(Exception):
    """A body that is neither ``application/sdp`` nor ``multipart/form-data``."""


async def read_offer(request: web.Request) -> tuple[str, Any]:
    """The offer's SDP and the ``session`` part (None without one); ``CompatError`` naming the
    part that is wrong, ``Unsupported`` for another content type."""
    if request.content_type == "application/sdp":
        sdp = await _limited(request.content.read, MAX_SDP_BYTES, "sdp")
        return _checked_sdp(sdp), None
    if request.content_type != "multipart/form-data":
        raise Unsupported(request.content_type)
    try:
        parts = await _parts(request)
    except ValueError as broken:  # aiohttp's reader: no boundary, a body cut short
        raise CompatError(
            "invalid_multipart", f"The multipart body does not parse: {broken}"
        ) from None
    sdp_text = parts.get("sdp")
    session: Any = None
    if "session" in parts:
        try:
            session = orjson.loads(parts["session"])
        except orjson.JSONDecodeError as error:
            raise CompatError(
                "invalid_json", f"The session part is not JSON: {error}", param="session"
            ) from None
    if sdp_text is None:
        raise CompatError(
            "missing_required_parameter", "Missing required parameter: 'sdp'.", param="sdp"
        )
    return _checked_sdp(sdp_text), session


async def _parts(request: web.Request) -> dict[str, bytes]:
    """The ``sdp`` and ``session`` parts (``CompatError`` for another, or one too large)."""
    parts: dict[str, bytes] = {}
    async for part in await request.multipart():
        if not isinstance(part, BodyPartReader) or part.name not in ("sdp", "session"):
            raise unknown_parameter(getattr(part, "name", None) or "part")
        limit = MAX_SDP_BYTES if part.name == "sdp" else MAX_SESSION_BYTES
        parts[part.name] = await _limited(part.read_chunk, limit, part.name)
    return parts


async def _limited(next_chunk: Callable[[int], Awaitable[bytes]], limit: int, param: str) -> bytes:
    """What ``next_chunk`` gives until it gives ``b""``: at most ``limit`` bytes."""
    data = bytearray()
    while chunk := await next_chunk(16 * 1024):
        data += chunk
        if len(data) > limit:
            raise CompatError(
                "invalid_value", f"'{param}' is over {limit // 1024} KiB.", param=param
            )
    return bytes(data)


def _checked_sdp(data: bytes) -> str:
    try:
        sdp = data.decode()
    except UnicodeDecodeError:
        raise CompatError(
            "invalid_value", "The SDP offer is not UTF-8 text.", param="sdp"
        ) from None
    if not sdp.startswith("v=0"):
        raise CompatError(
            "invalid_value",
            'The body is not an SDP offer (a session description starts with "v=0").',
            param="sdp",
        )
    return sdp


class RealtimeCallRoutes:
    def __init__(
        self,
        settings: Settings,
        admission: Admission,
        manager: SessionManager,
        media: MediaLoader,
    ) -> None:
        self._settings = settings
        self._admission = admission
        self._manager = manager
        self._secrets = ClientSecrets(settings, admission, manager)
        self.calls: dict[str, Any] = {}  # RealtimeCall by id, on this node
        self._media = media

    def add_to(self, app: web.Application) -> None:
        for path, handler in (
            (CLIENT_SECRETS, self._secrets.mint),
            (CALLS, self.create),
            (CALLS + "/{call_id}/hangup", self.hangup),
        ):
            app.router.add_post(path, self._with_cors(handler))
            app.router.add_route("OPTIONS", path, self.preflight)
        app.on_shutdown.append(self._close_all)

    # CORS ----------------------------------------------------------------------------------------

    def _with_cors(self, handler: Handler) -> Handler:
        async def answered(request: web.Request) -> web.StreamResponse:
            response = await handler(request)
            response.headers.update(self._cors(request))
            return response

        return answered

    def _cors(self, request: web.Request) -> dict[str, str]:
        return cors_headers(
            request.headers.get("Origin"),
            allowed=self._settings.allowed_origins,
            auth_enabled=self._settings.auth != "none",
        )

    async def preflight(self, request: web.Request) -> web.Response:
        headers = preflight_headers(
            request.headers.get("Origin"),
            request.headers.get("Access-Control-Request-Headers"),
            allowed=self._settings.allowed_origins,
            auth_enabled=self._settings.auth != "none",
        )
        if headers is None:
            return openai_error(403, "forbidden", "origin not allowed")
        return web.Response(status=204, headers=headers)

    # Calls ---------------------------------------------------------------------------------------

    async def _caller(
        self, request: web.Request
    ) -> tuple[SessionUser, EphemeralGrant | None] | web.Response:
        token = bearer_or_query_token(request)
        if looks_ephemeral(token):
            assert token is not None
            found = await self._admission.ephemeral_user(token)
            return reshaped(found) if isinstance(found, web.Response) else found
        user = await self._admission.user_from_token(token)
        return reshaped(user) if isinstance(user, web.Response) else (user, None)

    async def create(self, request: web.Request) -> web.Response:
        refused = self._admission.refuse_socket(request)  # origin, draining, session limit
        if refused is not None:
            return reshaped(refused)
        caller = await self._caller(request)
        if isinstance(caller, web.Response):
            return caller
        user, grant = caller
        try:
            sdp, part = await read_offer(request)
            patches: list[SessionPatch] = []
            named: list[tuple[str, str | None]] = []
            if grant is not None:
                patch, model = session_patch(grant.session)
                patches.append(patch)
                named.append(("the ephemeral key", model))
            if part is not None:
                patch, model = session_patch(part)
                patches.append(patch)
                named.append(("the session part", model))
            named.append(("?model=", request.query.get("model", "").strip() or None))
            setup = plan_call(self._manager, self._settings, user, model_named(named), patches)
        except Unsupported as other:
            return openai_error(
                415,
                "unsupported_content_type",
                f"Send the SDP offer as application/sdp, or multipart/form-data with an sdp "
                f"part (and a session part), not {other or 'a body without a type'}.",
            )
        except CompatError as error:
            return compat_error(error)
        call_id = "rtc_" + secrets.token_hex(12)
        calls = await self._media.load("gateway.edges.realtime.webrtc_call")
        call = calls.RealtimeCall(
            call_id,
            manager=self._manager,
            user=user,
            options=self._media.options,
            setup=setup,
            show_tools=request.query.get("gateway_tools") == "show",
            has_audio="\nm=audio " in sdp,
            on_closed=lambda ended: self.calls.pop(ended.call_id, None),
        )
        self.calls[call_id] = call
        try:
            answer: str = await call.accept(sdp)
        except (ValueError, AssertionError, LookupError, TypeError) as unusable:
            # What aiortc's parser raises for an SDP it cannot use (an assert, at times)
            await call.close()
            why = f": {unusable}" if str(unusable) else " (it does not parse)"
            return openai_error(
                400, "invalid_offer", f"The SDP offer is not usable{why}", param="sdp"
            )
        _log.info(
            "realtime_call_answered",
            call_id=call_id,
            user=user.user_id,
            key_id=user.key_id,
            model=setup.model,
            ephemeral=grant is not None,
        )
        return web.Response(
            status=201,
            text=answer,
            content_type="application/sdp",
            headers={"Location": f"{CALLS}/{call_id}", "Cache-Control": "no-store"},
        )

    async def hangup(self, request: web.Request) -> web.Response:
        refused = self._admission.refuse_origin(request)
        if refused is not None:
            return reshaped(refused)
        caller = await self._caller(request)
        if isinstance(caller, web.Response):
            return caller
        user, _ = caller
        call_id = request.match_info["call_id"]
        call = self.calls.get(call_id)
        if call is None or (call.user.user_id, call.user.key_id) != (user.user_id, user.key_id):
            return openai_error(
                404,
                "call_not_found",
                f"No call '{call_id}' of yours on this gateway.",
                param="call_id",
            )
        await call.close()
        return web.Response(status=200)

    async def _close_all(self, _: web.Application) -> None:
        for call in list(self.calls.values()):
            await call.close()
