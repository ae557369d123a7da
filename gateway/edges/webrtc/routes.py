"""``/v1/webrtc``: a browser's peer connection made into a session of the native protocol.

- ``GET /v1/webrtc/config`` (the same credential): the ICE servers the browser's
  ``RTCPeerConnection`` should use, TURN credentials minted for this user when
  ``GATEWAY_WEBRTC_TURN_SECRET`` is set;
- ``POST /v1/webrtc/offer``: ``{"sdp", "type": "offer"}`` with the client's credential (as for
  ``/v1/session``: its origin, the session limit, its budgets: a key out of budget gets 429)
  → ``{"sdp", "type": "answer", "call_id"}``. The data channel the browser opened carries the
  native protocol (``call``), ``session.start`` first;
- ``PATCH /v1/webrtc/calls/{call_id}``: ``{"candidates": [{"candidate", "sdpMid"?,
  "sdpMLineIndex"?}], "done"?}``, the browser's candidates when its offer came without any
  (trickle ICE), from the same user.

aiortc and PyAV are loaded at the first offer (``rtc.loading``).
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import structlog
from aiohttp import web

from gateway.admission import Admission, bearer_or_query_token, json_error
from gateway.config import Settings
from gateway.edges.rtc.ice import browser_ice_servers
from gateway.edges.rtc.loading import MediaLoader
from gateway.session import SessionUser
from gateway.session.manager import SessionManager

__all__ = ["WebRtcRoutes", "read_candidates", "read_offer"]

_log = structlog.get_logger("webrtc")
MAX_OFFER_BYTES = 64 * 1024


def read_offer(body: bytes) -> str:
    """The SDP of ``{"sdp": …, "type": "offer"}``; ValueError says what is wrong."""
    if len(body) > MAX_OFFER_BYTES:
        raise ValueError(f"the offer is over {MAX_OFFER_BYTES // 1024} KiB")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ValueError('the body must be JSON: {"sdp": …, "type": "offer"}') from None
    if not isinstance(value, dict) or not isinstance(value.get("sdp"), str):
        raise ValueError('the body must be {"sdp": …, "type": "offer"}')
    if value.get("type", "offer") != "offer":
        raise ValueError('"type" must be "offer"')
    sdp: str = value["sdp"]
    if not sdp.startswith("v=0"):
        raise ValueError('"sdp" is not a session description (it starts with "v=0")')
    return sdp


def read_candidates(body: bytes) -> tuple[list[tuple[str, str | None, int | None]], bool]:
    """``{"candidates": [{"candidate", "sdpMid"?, "sdpMLineIndex"?}], "done"?}`` → the lines
    and whether the browser has no more; ValueError names the field."""
    if len(body) > MAX_OFFER_BYTES:
        raise ValueError(f"the body is over {MAX_OFFER_BYTES // 1024} KiB")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ValueError('the body must be JSON: {"candidates": [...], "done": …}') from None
    if not isinstance(value, dict) or not isinstance(value.get("candidates", []), list):
        raise ValueError('"candidates" must be a list')
    done = value.get("done", False)
    if not isinstance(done, bool):
        raise ValueError('"done" must be true or false')
    lines = []
    for index, entry in enumerate(value.get("candidates", [])):
        where = f"candidates[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("candidate"), str):
            raise ValueError(f'{where}: needs "candidate", the a=candidate line')
        mid, line_index = entry.get("sdpMid"), entry.get("sdpMLineIndex")
        if mid is not None and not isinstance(mid, str):
            raise ValueError(f"{where}.sdpMid: must be a string")
        if line_index is not None and (type(line_index) is not int or line_index < 0):
            raise ValueError(f"{where}.sdpMLineIndex: must be a whole number")
        if mid is None and line_index is None:
            raise ValueError(f"{where}: needs sdpMid or sdpMLineIndex")
        if entry["candidate"]:  # an empty one is the browser's end of candidates
            lines.append((entry["candidate"], mid, line_index))
        else:
            done = True
    return lines, done


class WebRtcRoutes:
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
        self._calls: dict[str, Any] = {}
        self._media = media

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/v1/webrtc/config", self.config)
        app.router.add_post("/v1/webrtc/offer", self.offer)
        app.router.add_patch("/v1/webrtc/calls/{call_id}", self.candidates)
        app.on_shutdown.append(self._close_all)

    def call_for(self, session_id: str) -> Any:
        """The ``NativeCall`` carrying that session now, or None."""
        for call in self._calls.values():
            session = call.session
            if (
                session is not None
                and session.session_id == session_id
                and session.outbound is call.outbound
            ):
                return call
        return None

    async def _caller(self, request: web.Request) -> SessionUser | web.Response:
        """Who asks (budgets not checked: this opens nothing), or the refusal: the origin, a
        draining node, the credential."""
        refused = self._admission.refuse_socket(request)
        if refused is not None:
            return refused
        return await self._admission.identify(bearer_or_query_token(request))

    async def config(self, request: web.Request) -> web.Response:
        user = await self._caller(request)
        if isinstance(user, web.Response):
            return user
        settings = self._settings
        secret = settings.webrtc_turn_secret
        servers = browser_ice_servers(
            settings.webrtc_ice_servers,
            turn_secret=None if secret is None else secret.get_secret_value(),
            user=user.user_id,
            now=time.time(),
            ttl_s=settings.webrtc_turn_ttl_s,
        )
        return web.json_response({"ice_servers": servers}, headers={"Cache-Control": "no-store"})

    async def offer(self, request: web.Request) -> web.Response:
        refused = self._admission.refuse_socket(request)
        if refused is not None:
            return refused
        user = await self._admission.user(request)
        if isinstance(user, web.Response):
            return user
        try:
            sdp = read_offer(await request.read())
        except ValueError as exc:
            return json_error(400, "invalid_request", str(exc))
        return await self.answer(sdp, user)

    async def answer(self, sdp: str, user: SessionUser) -> web.Response:
        calls = await self._media.load("gateway.edges.webrtc.call")
        call = calls.NativeCall(self._manager, user, self._media.options, self._calls)
        try:
            answer = await call.accept(sdp)
        except ValueError as exc:  # aiortc refuses an SDP it cannot use
            await call.close()
            return json_error(400, "invalid_request", f"the offer is not usable: {exc}")
        return web.json_response({"sdp": answer, "type": "answer", "call_id": call.call_id})

    async def candidates(self, request: web.Request) -> web.Response:
        user = await self._caller(request)
        if isinstance(user, web.Response):
            return user
        call = self._calls.get(request.match_info["call_id"])
        if call is None or call.user_id != user.user_id:
            return json_error(404, "not_found", "no such call of yours (it may have ended)")
        try:
            lines, done = read_candidates(await request.read())
            await call.link.add_candidates(lines, done=done)
        except ValueError as exc:
            return json_error(400, "invalid_request", str(exc))
        return web.Response(status=204)

    async def _close_all(self, _: web.Application) -> None:
        for call in list(self._calls.values()):
            await call.close()
