"""Who may come in: the checks every endpoint shares, in one place (server and Twilio routes).

For every request (``middleware``):
    1. auth off: the ``Host`` must name this machine (DNS rebinding)     403
    2. requests per client address per minute (through trusted proxies)   429
       (probes and the metrics scrape are not counted)

For a WebSocket upgrade (``refuse_socket``), then:
    3. ``Origin``: absent, listed, or, with auth off, a page of this machine  403
    4. draining                                                            503
    5. the gateway's session cap                                           503

Then the credential: a gateway key (``gk_…``, ``gateway.keys``) or a user token on
``/v1/session`` and ``/v1/realtime`` (``user``: 401 when refused; 429 ``budget_exhausted`` when a
limit of its key, user or team has run out), a phone-stream token on ``/twilio/media``
(``stream_user``), each refused where the other is expected; a stream token is used once (the
store remembers its id until it expires). An ephemeral key (``ek_…``,
``gateway.security.ephemeral_keys``) is minted from a key or a user token (``minter_of``) and
accepted on ``/v1/realtime/calls`` only (``ephemeral_user``): its minter, looked up again, with
the same refusals.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

import structlog
from aiohttp import web

from gateway.budgets import Plan
from gateway.budgets.guard import exhausted_now
from gateway.calls.records import CallRecord
from gateway.clock import Clock
from gateway.config import Settings
from gateway.governance import BudgetCounters
from gateway.governance.credentials import KeyAuthority, KeyRefused
from gateway.keys.material import looks_like_key
from gateway.keys.records import ApiKey
from gateway.security import (
    ConnectionRateLimiter,
    TokenAuthority,
    TokenRefused,
    TrustedProxies,
    is_loopback_host_header,
    origin_allowed,
    parse_networks,
)
from gateway.security.ephemeral_keys import EphemeralGrant, EphemeralKeys, Minter
from gateway.security.stream_tokens import StreamTokens
from gateway.session import SessionUser
from gateway.store import StoreUnavailable

__all__ = [
    "UNCOUNTED_PATHS",
    "Admission",
    "AdmissionStore",
    "bearer_or_query_token",
    "json_error",
]

_log = structlog.get_logger("admission")

# Probes and scrapes come from the infrastructure, often many a minute: never rate-limited.
UNCOUNTED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
ANONYMOUS_USER = "local"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AdmissionStore(Protocol):
    """What admission keeps across nodes (the session store: Redis for several)."""

    async def claim_once(self, key: str, ttl_s: float) -> bool: ...

    async def admit_address(self, address: str, per_minute: int, now: float) -> bool: ...


def bearer_or_query_token(request: web.Request) -> str | None:
    """The credential of a request: its bearer header, else ``?token=``."""
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else None
    return token or request.query.get("token")


def json_error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message}}, status=status, headers=headers
    )


class Admission:
    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock,
        sessions_open: Callable[[], int],
        store: AdmissionStore,
        keys: KeyAuthority | None = None,
        counters: BudgetCounters | None = None,
    ) -> None:
        """``keys``: gateway keys and the budgets of users and teams (None: JWTs only, nothing
        counted); ``counters``: where the budgets are read."""
        self._settings = settings
        self._clock = clock
        self._sessions_open = sessions_open
        self._store = store
        self.keys = keys
        self._counters = counters
        self._auth_on = settings.auth != "none"
        secret = settings.auth_secret
        lifetime = settings.token_max_lifetime_s
        self.tokens = (
            TokenAuthority(secret.get_secret_value(), max_lifetime_s=lifetime)
            if self._auth_on and secret is not None
            else None
        )
        self.stream_tokens = (
            StreamTokens(secret.get_secret_value(), max_lifetime_s=lifetime)
            if self._auth_on and secret is not None
            else None
        )
        # Auth off and no secret: keys of this process only (one process, on loopback).
        self.ephemeral_keys = EphemeralKeys(
            secrets.token_bytes(32) if secret is None else secret.get_secret_value()
        )
        self.proxies = TrustedProxies(parse_networks(settings.trusted_proxies))
        # While the shared store cannot be reached, the rate is counted on this node alone.
        self._limiter = ConnectionRateLimiter(settings.connections_per_minute)
        self.draining = False

    # -- every request ---------------------------------------------------------------------------

    def client_address(self, request: web.Request) -> str:
        return self.proxies.client_address(request.remote, request.headers.get("X-Forwarded-For"))

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self._auth_on and not is_loopback_host_header(request.headers.get("Host")):
            _log.warning("host_refused", host=_short(request.headers.get("Host")))
            return json_error(403, "forbidden", "this gateway answers to localhost names only")
        if request.path not in UNCOUNTED_PATHS and not await self._admit(
            self.client_address(request)
        ):
            return json_error(429, "rate_limited", "too many connections; slow down")
        return await handler(request)

    async def _admit(self, address: str) -> bool:
        per_minute = self._settings.connections_per_minute
        now = self._clock.now().timestamp()  # wall time: shared with the other nodes
        try:
            return await self._store.admit_address(address, per_minute, now)
        except StoreUnavailable:
            return self._limiter.admit(address, self._clock.monotonic())

    # -- WebSocket upgrades ----------------------------------------------------------------------

    def refuse_origin(self, request: web.Request) -> web.Response | None:
        """403 for a page whose origin may not call the gateway, else None."""
        origin = request.headers.get("Origin")
        if not origin_allowed(
            origin, allowed=self._settings.allowed_origins, auth_enabled=self._auth_on
        ):
            _log.warning("origin_refused", origin=_short(origin), path=request.path)
            return json_error(403, "forbidden", "origin not allowed")
        return None

    def refuse_socket(self, request: web.Request) -> web.Response | None:
        """Why this upgrade is refused before any token is read, or None."""
        refused = self.refuse_origin(request)
        if refused is not None:
            return refused
        if self.draining:
            return json_error(503, "unavailable", "the gateway is draining")
        if self._sessions_open() >= self._settings.max_sessions:
            return json_error(503, "rate_limited", "the gateway is at its session limit")
        return None

    async def user(self, request: web.Request) -> SessionUser | web.Response:
        """The user of a ``/v1/session`` upgrade (a bearer header or ``?token=``), or the
        refusal to answer with."""
        return await self.user_from_token(bearer_or_query_token(request))

    async def user_from_token(self, token: str | None) -> SessionUser | web.Response:
        """Who ``token`` (a gateway key or a JWT) names, with their budgets; or a refusal: 401
        (unusable credential), 429 (a budget has run out), 503 (the store is unreachable)."""
        user = await self.identify(token)
        if isinstance(user, web.Response):
            return user
        refused = await self._budget_refusal(user)
        return user if refused is None else refused

    async def _budget_refusal(self, user: SessionUser) -> web.Response | None:
        """429 when a limit of ``user``'s key, user or team has run out (503: unreadable)."""
        try:
            if user.plan is not None and self._counters is not None:
                reading = await exhausted_now(user.plan, self._counters, self._clock)
                if reading is not None:
                    message = f"budget exhausted: {reading.describe()}"
                    body = {"code": "budget_exhausted", "message": message}
                    return web.json_response(
                        {"error": {**body, "budget": reading.as_json()}}, status=429
                    )
        except StoreUnavailable:
            return _store_unavailable()
        return None

    async def identify(self, token: str | None) -> SessionUser | web.Response:
        """Who ``token`` names (its budgets not checked: the admin API), or the refusal."""
        try:
            return await self._identify(token)
        except (TokenRefused, KeyRefused) as refused:
            return json_error(401, "unauthorized", str(refused))
        except StoreUnavailable:
            return _store_unavailable()

    async def _identify(self, token: str | None) -> SessionUser:
        if looks_like_key(token) and self.keys is not None:
            assert token is not None
            return await self._key_user(await self.keys.verify(token))
        if self.tokens is None:
            user = SessionUser(user_id=ANONYMOUS_USER, roles=tuple(self._settings.anonymous_roles))
        else:
            verified = self.tokens.verify_user(token, time.time())
            user = SessionUser(
                user_id=verified.subject,
                roles=verified.roles,
                tenant=verified.tenant,
                token=token,
            )
        try:
            return replace(user, plan=await self._plan(user))
        except StoreUnavailable:  # a token needs no store: its session's start will say so
            return replace(user, budgets_unread=True)

    async def _key_user(self, key: ApiKey) -> SessionUser:
        """The user a key is: its owner, with the key's roles, models, tools and budgets."""
        assert self.keys is not None
        user = SessionUser(
            user_id=key.owner,
            roles=key.roles,
            tenant=key.team,
            key_id=key.key_id,
            models=key.models,
            tools=key.tools,
        )
        if self._counters is None:  # budgets off: nothing counted
            return user
        return replace(user, plan=await self.keys.plan(key.owner, key.team, key))

    async def _plan(self, user: SessionUser) -> Plan | None:
        if self.keys is None or self._counters is None:
            return None
        return await self.keys.plan(user.user_id, user.tenant)

    async def stream_user(
        self, token: str | None, call_id: str, carrier: str = "twilio"
    ) -> SessionUser | str:
        """The caller of a phone stream, or why it is refused. A token opens one stream."""
        roles = tuple(self._settings.phone_roles)
        user = SessionUser(user_id=f"{carrier}:{call_id}", roles=roles)
        if self.stream_tokens is None:
            return user
        now = time.time()
        try:
            grant = self.stream_tokens.verify(token, now, call_id=call_id)
        except TokenRefused as refused:
            return str(refused)
        ttl = max(grant.expires_at - now, 1.0) + 60.0  # past expiry and clock skew
        try:
            fresh = await self._store.claim_once(f"stream-token:{grant.token_id}", ttl)
        except StoreUnavailable:
            return "the gateway's store cannot be reached to check the token"
        if not fresh:
            return "this stream token was used already"
        return user

    async def placed_call_user(self, record: CallRecord) -> SessionUser | str:
        """Who a call the gateway placed runs as, now that it is answered: the key or user that
        placed it, with their budgets as of now; or why it may no longer run (the key was
        revoked meanwhile)."""
        try:
            if record.key_id is not None and self.keys is not None:
                return await self._key_user(await self.keys.active(record.key_id))
            user = SessionUser(user_id=record.owner, roles=record.roles, tenant=record.tenant)
            return replace(user, plan=await self._plan(user))
        except KeyRefused as refused:
            return str(refused)
        except StoreUnavailable:
            return "the gateway's store cannot be reached to check who placed the call"

    # -- ephemeral keys (OpenAI's WebRTC interface) ----------------------------------------------

    def minter_of(self, user: SessionUser, token: str | None) -> tuple[Minter, float | None]:
        """Whom an ephemeral key minted by ``user`` (who presented ``token``) speaks for, and
        the latest it may expire (a JWT's own expiry; a key is checked at each use)."""
        if user.key_id is not None:
            return Minter("key", key_id=user.key_id), None
        if self.tokens is None:
            return Minter("anonymous"), None
        verified = self.tokens.verify_user(token, time.time())
        minter = Minter("user", user_id=user.user_id, roles=user.roles, tenant=user.tenant)
        return minter, verified.expires_at

    async def ephemeral_user(self, value: str) -> tuple[SessionUser, EphemeralGrant] | web.Response:
        """Who an ephemeral key speaks for, as of now, and what it grants; or the refusal: 401
        (not a key of this gateway, expired, its source key revoked or expired), 429 (a budget
        of its minter has run out), 503 (the store is unreachable)."""
        try:
            grant = self.ephemeral_keys.read(value, now=time.time())
            user = await self._minter_user(grant.minter)
        except (TokenRefused, KeyRefused) as refused:
            return json_error(401, "unauthorized", str(refused))
        except StoreUnavailable:
            return _store_unavailable()
        out_of_budget = await self._budget_refusal(user)
        return (user, grant) if out_of_budget is None else out_of_budget

    async def _minter_user(self, minter: Minter) -> SessionUser:
        if minter.kind == "key":
            if self.keys is None or minter.key_id is None:
                raise KeyRefused("invalid key")
            return await self._key_user(await self.keys.active(minter.key_id))
        if minter.kind == "anonymous" or minter.user_id is None:
            if self._auth_on:  # minted while auth was off: no one's key now
                raise TokenRefused("invalid ephemeral key")
            return SessionUser(user_id=ANONYMOUS_USER, roles=tuple(self._settings.anonymous_roles))
        user = SessionUser(user_id=minter.user_id, roles=minter.roles, tenant=minter.tenant)
        try:
            return replace(user, plan=await self._plan(user))
        except StoreUnavailable:  # as for a token: its session's start will say so
            return replace(user, budgets_unread=True)

    def stream_token(self, call_id: str) -> str:
        """The token a carrier's answer document hands it for this call ("" with auth off)."""
        if self.stream_tokens is None:
            return ""
        return self.stream_tokens.mint(
            call_id, now=time.time(), ttl_s=self._settings.phone_token_ttl_s
        )


def _store_unavailable() -> web.Response:
    return json_error(503, "store_unavailable", "the gateway's store cannot be reached; try again")


def _short(value: str | None, limit: int = 120) -> str | None:
    """Header values in logs are the client's words: bounded."""
    return value if value is None or len(value) <= limit else value[:limit] + "…"
