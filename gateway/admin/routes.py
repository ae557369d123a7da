"""The admin HTTP API, ``/admin/v1/…`` (off unless ``GATEWAY_ADMIN=true``; docs/keys.md):

    POST   /admin/v1/keys                 create a key; the answer holds its secret, once (201)
    GET    /admin/v1/keys[?owner=&team=]  list keys
    GET    /admin/v1/keys/{id}            one key, with its counters against its budgets
    PATCH  /admin/v1/keys/{id}            change roles, models, tools, team, expiry, budgets
    POST   /admin/v1/keys/{id}/revoke     revoke (also DELETE /admin/v1/keys/{id})
    GET    /admin/v1/teams                list teams;  PUT|GET /admin/v1/teams/{id}
    PUT|GET /admin/v1/users/{id}          a user's budgets
    GET    /admin/v1/usage?group_by=key|user|team|model&from=&to=[&format=csv]

Every request needs an admin credential: a gateway key or a JWT with the ``admin`` role, as a
bearer header (never a cookie: a page elsewhere cannot make a browser send it). A request with
an ``Origin`` header must come from an allowed origin, and a body must be JSON
(``Content-Type: application/json``). Errors are
``{"error": {"code", "message"}}``; a refused request changes nothing and is audited.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import orjson
from aiohttp import web

from gateway.admin.service import KeyAdmin, NotFound
from gateway.admin.usage import UsageQuery, usage_csv, usage_rows
from gateway.admission import Admission, json_error
from gateway.budgets import Metric, Scope, Window, counter_key, window_ids
from gateway.clock import Clock
from gateway.config import Settings
from gateway.keys.records import ApiKey, KeyInputError
from gateway.security import origin_allowed
from gateway.session import SessionUser
from gateway.store import StoreUnavailable

__all__ = ["ADMIN_ROLE", "AdminRoutes"]

ADMIN_ROLE = "admin"
Handler = Callable[[web.Request, str], Awaitable[web.Response]]


class AdminRoutes:
    def __init__(
        self, settings: Settings, admission: Admission, admin: KeyAdmin, clock: Clock
    ) -> None:
        self._settings = settings
        self._admission = admission
        self._admin = admin
        self.audit = admin  # where other admin surfaces (the console) audit their actions
        self._clock = clock

    def add_to(self, app: web.Application) -> None:
        r = app.router
        r.add_post("/admin/v1/keys", self._guard("key.create", self.create_key))
        r.add_get("/admin/v1/keys", self._guard("key.list", self.list_keys))
        r.add_get("/admin/v1/keys/{key_id}", self._guard("key.show", self.show_key))
        r.add_patch("/admin/v1/keys/{key_id}", self._guard("key.update", self.update_key))
        r.add_post("/admin/v1/keys/{key_id}/revoke", self._guard("key.revoke", self.revoke))
        r.add_delete("/admin/v1/keys/{key_id}", self._guard("key.revoke", self.revoke))
        r.add_get("/admin/v1/teams", self._guard("team.list", self.list_teams))
        r.add_put("/admin/v1/teams/{team_id}", self._guard("team.put", self.put_team))
        r.add_get("/admin/v1/teams/{team_id}", self._guard("team.show", self.show_team))
        r.add_put("/admin/v1/users/{user_id}", self._guard("user.put", self.put_user))
        r.add_get("/admin/v1/users/{user_id}", self._guard("user.show", self.show_user))
        r.add_get("/admin/v1/usage", self._guard("usage", self.usage))

    # -- the gate every request passes -----------------------------------------------------------

    def _guard(
        self, action: str, handler: Handler
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def guarded(request: web.Request) -> web.Response:
            actor = await self.gate(request, action)
            if isinstance(actor, web.Response):
                return actor
            if request.body_exists and request.content_type != "application/json":
                self._admin.refused(actor, action, "body not JSON")
                return json_error(415, "invalid_request", "send the body as application/json")
            try:
                return await handler(request, actor)
            except NotFound as missing:
                self._admin.refused(actor, action, str(missing))
                return json_error(404, "not_found", str(missing))
            except KeyInputError as bad:
                self._admin.refused(actor, action, str(bad))
                return json_error(400, "invalid_request", str(bad))
            except StoreUnavailable:
                return json_error(503, "store_unavailable", "the store cannot be reached; retry")

        return guarded

    async def gate(self, request: web.Request, action: str) -> str | web.Response:
        """Who may do ``action`` (``key:k_…`` or ``user:…``), or the audited refusal: 403 for a
        foreign origin, 401 without a credential, 403 without the admin role."""
        origin = request.headers.get("Origin")
        if origin is not None and not self._origin_allowed(origin, request):
            self._admin.refused("-", action, "origin not allowed")
            return json_error(403, "forbidden", "origin not allowed")
        actor = await self._actor(request)
        if isinstance(actor, web.Response):
            self._admin.refused("-", action, "no admin credential")
        return actor

    def _origin_allowed(self, origin: str, request: web.Request) -> bool:
        """A listed origin (``GATEWAY_ALLOWED_ORIGINS``); with no list, the gateway's own pages
        only (the console): never another site's."""
        allowed = self._settings.allowed_origins
        if allowed:
            return origin_allowed(origin, allowed=allowed, auth_enabled=True)
        return urlsplit(origin).netloc == request.host

    async def _actor(self, request: web.Request) -> str | web.Response:
        """Who asks (``key:k_…`` or ``user:…``), or the refusal: 401, 403 without ``admin``."""
        header = request.headers.get("Authorization", "")
        if not header.lower().startswith("bearer ") or not header[7:].strip():
            return json_error(401, "unauthorized", "send an admin credential as a bearer token")
        user = await self._admission.identify(header[7:].strip())
        if isinstance(user, web.Response):
            return user
        if ADMIN_ROLE not in user.roles:
            return json_error(403, "forbidden", "this credential lacks the admin role")
        return _actor_name(user)

    # -- keys ------------------------------------------------------------------------------------

    async def create_key(self, request: web.Request, actor: str) -> web.Response:
        key, secret = await self._admin.create_key(actor, await _body(request))
        body = {"key": key.as_json(self._now()), "secret": secret}
        return web.json_response(body, status=201)

    async def list_keys(self, request: web.Request, actor: str) -> web.Response:
        keys = await self._admin.keys(
            owner=request.query.get("owner"), team=request.query.get("team")
        )
        return web.json_response({"keys": [key.as_json(self._now()) for key in keys]})

    async def show_key(self, request: web.Request, actor: str) -> web.Response:
        key = await self._admin.key(request.match_info["key_id"])
        return web.json_response({"key": key.as_json(self._now()), "usage": await self._usage(key)})

    async def update_key(self, request: web.Request, actor: str) -> web.Response:
        key = await self._admin.update_key(
            actor, request.match_info["key_id"], await _body(request)
        )
        return web.json_response({"key": key.as_json(self._now())})

    async def revoke(self, request: web.Request, actor: str) -> web.Response:
        key = await self._admin.revoke_key(actor, request.match_info["key_id"])
        return web.json_response({"key": key.as_json(self._now())})

    async def _usage(self, key: ApiKey) -> list[dict[str, Any]]:
        """The key's counters now, each beside its limit (None: no limit)."""
        ids = window_ids(self._clock.now())
        scope = Scope("key", key.key_id)
        wanted = {
            (metric, window): counter_key(scope, metric, ids.of(window))
            for metric in Metric
            for window in Window
        }
        totals = await self._admin.store.read(list(wanted.values()))
        rows = []
        for (metric, window), name in wanted.items():
            limit = key.limits.limit(metric, window)
            scale = 60 if metric is Metric.MINUTES else 1
            rows.append(
                {
                    "metric": metric.value,
                    "window": window.value,
                    "used": round(totals[name] / scale, 6),
                    "limit": None if limit is None else round(limit / scale, 6),
                }
            )
        return rows

    # -- teams and users -------------------------------------------------------------------------

    async def list_teams(self, request: web.Request, actor: str) -> web.Response:
        teams = await self._admin.store.teams()
        return web.json_response({"teams": [team.as_json() for team in teams]})

    async def put_team(self, request: web.Request, actor: str) -> web.Response:
        team = await self._admin.put_team(
            actor, request.match_info["team_id"], await _body(request)
        )
        return web.json_response({"team": team.as_json()})

    async def show_team(self, request: web.Request, actor: str) -> web.Response:
        team = await self._admin.team(request.match_info["team_id"])
        return web.json_response({"team": team.as_json()})

    async def put_user(self, request: web.Request, actor: str) -> web.Response:
        user = await self._admin.put_user(
            actor, request.match_info["user_id"], await _body(request)
        )
        return web.json_response({"user": user.as_json()})

    async def show_user(self, request: web.Request, actor: str) -> web.Response:
        user = await self._admin.user(request.match_info["user_id"])
        return web.json_response({"user": user.as_json()})

    # -- usage -----------------------------------------------------------------------------------

    async def usage(self, request: web.Request, actor: str) -> web.Response:
        query = UsageQuery(dict(request.query), self._clock.now().date())
        rows = await usage_rows(self._admin.store, query)
        if request.query.get("format") == "csv":
            return web.Response(text=usage_csv(rows), content_type="text/csv")
        return web.json_response({"group_by": query.group_by, "rows": rows})

    def _now(self) -> float:
        return self._clock.now().timestamp()


def _actor_name(user: SessionUser) -> str:
    return f"key:{user.key_id}" if user.key_id else f"user:{user.user_id}"


async def _body(request: web.Request) -> Any:
    try:
        return orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        raise KeyInputError("body: not valid JSON") from None
