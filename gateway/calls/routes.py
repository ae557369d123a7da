"""``POST /v1/calls`` and ``GET /v1/calls/{id}``: the HTTP API of calls the gateway places.

A call is placed with the credentials of a session (a gateway key or a JWT, Bearer) whose roles
include one of ``GATEWAY_CALLS_ROLES`` (default ``calls``) or ``admin``; its budgets are read as
for a session (a key out of budget gets 429 ``budget_exhausted`` and nothing is dialled), and the
call's session runs as it, so the call's minutes, tokens and spend count against its budgets. The
answer is ``201`` with the call's record (``GET`` shows it again, to whoever placed it or an
admin: others get 404, as for a call that does not exist).

Errors are JSON ``{"error": {"code", "message"}}``: 400 ``invalid_request`` naming the field,
401, 403 ``forbidden`` (no right to place calls, or a tool the key may not use), 429, 502
``carrier_refused`` (the carrier refused the call or could not be reached: the record says
``failed`` with the reason), 503 when no carrier can place calls.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from gateway.admission import Admission, bearer_or_query_token, json_error
from gateway.calls.center import CallCenter, CallRefused
from gateway.calls.records import CallInputError, parse_call_request
from gateway.config import Settings
from gateway.session.user import SessionUser

__all__ = ["CallRoutes"]

MAX_BODY = 64 * 1024


class CallRoutes:
    def __init__(
        self, settings: Settings, admission: Admission, center: CallCenter, tool_ids: frozenset[str]
    ) -> None:
        self._settings = settings
        self._admission = admission
        self._center = center
        self._tool_ids = tool_ids

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/v1/calls", self.place)
        app.router.add_get("/v1/calls/{call_id}", self.show)

    def _may_place(self, user: SessionUser) -> bool:
        allowed = {*self._settings.calls_roles, "admin"}
        return bool(allowed & set(user.roles))

    async def place(self, request: web.Request) -> web.Response:
        user = await self._admission.user(request)
        if isinstance(user, web.Response):
            return user
        if not self._may_place(user):
            roles = ", ".join(self._settings.calls_roles)
            return json_error(403, "forbidden", f"placing calls needs the role {roles} (or admin)")
        if not self._center.carriers:
            return json_error(503, "unavailable", "no carrier can place calls: set its credentials")
        if (request.content_length or 0) > MAX_BODY:
            return json_error(413, "invalid_request", "the body is too large")
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return json_error(400, "invalid_request", "the body is not JSON")
        try:
            call = parse_call_request(body, default_from=self._settings.calls_from)
        except CallInputError as exc:
            return json_error(400, "invalid_request", str(exc))
        unknown = sorted(set(call.tools or ()) - self._tool_ids)
        if unknown:
            return json_error(400, "invalid_request", f"tools: no tool named {unknown[0]}")
        base = self._settings.public_url or f"{request.scheme}://{request.host}"
        try:
            record = await self._center.place(user, call, base)
        except CallRefused as refused:
            return json_error(refused.status, refused.code, str(refused))
        return web.json_response(record.as_json(), status=201)

    async def show(self, request: web.Request) -> web.Response:
        user = await self._admission.identify(bearer_or_query_token(request))
        if isinstance(user, web.Response):
            return user
        record = await self._center.get(request.match_info["call_id"])
        if record is None or (record.owner != user.user_id and "admin" not in user.roles):
            return json_error(404, "not_found", "no such call")
        return web.json_response(record.as_json())
