"""``POST /v1/realtime/client_secrets``: an ephemeral key for a browser, as OpenAI mints one.

A server holding a gateway credential (a ``gk_…`` key or a JWT, as for ``/v1/realtime``) asks
for a key for one session config; it hands the key's ``value`` to its page, which opens
``POST /v1/realtime/calls`` with it and never sees the credential::

    {"expires_after": {"anchor": "created_at", "seconds": 600}?,
     "session": {"type": "realtime", "model": "…", "instructions"?, "audio"?, "tools"?, …}?}
    → 200 {"value": "ek_…", "expires_at": <unix s>, "session": {…as the gateway will apply it}}

The config is checked as a ``session.update`` on ``/v1/realtime`` would be, for this caller
(``call_setup``), and ``expires_after.seconds`` is 10 to 7200 (600 by default), as OpenAI's.
Using the key is being its minter, as of the moment it is used (``gateway.admission``; the key
itself: ``gateway.security.ephemeral_keys``): a key whose budgets have run out mints nothing
(429), and its ephemeral keys are refused once it is revoked. The value is never logged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
import structlog
from aiohttp import web

from gateway.admission import Admission, bearer_or_query_token
from gateway.config import Settings
from gateway.edges.realtime.call_setup import plan_call, session_patch
from gateway.edges.realtime.errors import CompatError, invalid_type, invalid_value
from gateway.edges.realtime.http_errors import compat_error, openai_error, reshaped
from gateway.edges.realtime.json_fields import check_keys, object_at, require_object
from gateway.edges.realtime.session_config import SessionPatch
from gateway.security import TokenRefused
from gateway.security.ephemeral_keys import DEFAULT_TTL_S, MAX_TTL_S, MIN_TTL_S, KeyTooLarge
from gateway.session.manager import SessionManager

__all__ = ["ClientSecrets", "SecretRequest", "read_secret_request"]

_log = structlog.get_logger("realtime_calls")


@dataclass(frozen=True, slots=True)
class SecretRequest:
    ttl_s: int
    session: dict[str, Any]  # as given (``{"type": "realtime"}`` when none was)
    patch: SessionPatch
    model: str | None


def read_secret_request(body: bytes) -> SecretRequest:
    """The request's body, checked; ``CompatError`` naming the field (an empty body is
    ``{}``: a realtime session with the defaults, its model named by the call)."""
    try:
        raw: Any = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError as error:
        raise CompatError("invalid_json", f"The body is not valid JSON: {error}") from None
    request = require_object(raw, "body")
    check_keys(request, ("expires_after", "session"), "")
    ttl = DEFAULT_TTL_S
    expires_after = object_at(request, "expires_after", "expires_after")
    if expires_after is not None:
        check_keys(expires_after, ("anchor", "seconds"), "expires_after")
        anchor = expires_after.get("anchor", "created_at")
        if anchor != "created_at":
            raise invalid_value("expires_after.anchor", anchor, ["created_at"])
        seconds = expires_after.get("seconds", DEFAULT_TTL_S)
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            raise invalid_type("expires_after.seconds", "an integer", seconds)
        if not MIN_TTL_S <= seconds <= MAX_TTL_S:
            raise CompatError(
                "integer_out_of_range",
                f"Invalid 'expires_after.seconds': {seconds}. Expected a value between "
                f"{MIN_TTL_S} and {MAX_TTL_S}.",
                param="expires_after.seconds",
            )
        ttl = seconds
    session = request.get("session")
    if session is None:
        session = {"type": "realtime"}
    patch, model = session_patch(session)
    return SecretRequest(ttl, session, patch, model)


class ClientSecrets:
    def __init__(self, settings: Settings, admission: Admission, manager: SessionManager) -> None:
        self._settings = settings
        self._admission = admission
        self._manager = manager

    async def mint(self, request: web.Request) -> web.Response:
        refused = self._admission.refuse_origin(request)
        if refused is not None:
            return reshaped(refused)
        token = bearer_or_query_token(request)
        user = await self._admission.user_from_token(token)
        if isinstance(user, web.Response):
            return reshaped(user)  # 401, 429 (its budgets have run out: it mints nothing), 503
        try:
            asked = read_secret_request(await request.read())
        except CompatError as error:
            return compat_error(error)
        now = time.time()
        try:
            setup = plan_call(
                self._manager,
                self._settings,
                user,
                asked.model,
                [asked.patch],
                model_param="session.model",
                expires_at=int(now) + asked.ttl_s,
            )
        except CompatError as error:
            return compat_error(error)
        try:
            minter, not_after = self._admission.minter_of(user, token)
        except TokenRefused as refused:  # the token expired a moment ago
            return openai_error(401, "invalid_api_key", str(refused))
        try:
            value, expires_at = self._admission.ephemeral_keys.mint(
                minter, asked.session, now=now, ttl_s=asked.ttl_s, not_after=not_after
            )
        except KeyTooLarge as large:
            return openai_error(
                400,
                "invalid_value",
                f"The session config is too large for an ephemeral key ({large}): the key "
                "travels in an Authorization header. Give the large part (the tools) in the "
                "call's own session part, or in a session.update on the data channel.",
                param="session",
            )
        wire = setup.view.to_wire()
        wire["expires_at"] = expires_at
        if asked.model is None:
            wire["model"] = None  # the call names it
        _log.info(
            "client_secret_minted",
            user=user.user_id,
            key_id=user.key_id,
            model=asked.model,
            expires_at=expires_at,
        )
        body = {"value": value, "expires_at": expires_at, "session": wire}
        return web.json_response(body, headers={"Cache-Control": "no-store"})
