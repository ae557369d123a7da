"""The HTTP refusals of OpenAI's WebRTC interface (``/v1/realtime/client_secrets``,
``/v1/realtime/calls``), in OpenAI's shape::

    {"error": {"type": "invalid_request_error", "code": "…", "message": "…", "param": "…"}}

A client's mistake in its body is a ``CompatError`` (``compat_error``: 400, the field named in
``param``); the refusals ``gateway.admission`` shares with every endpoint (its own
``{"error": {"code", "message"}}``) are reshaped (``reshaped``), status and extra fields kept:
401 ``invalid_api_key`` (OpenAI's code for a credential it refuses; the message says why),
403 origin, 429 ``budget_exhausted`` (type ``insufficient_quota``, with the ``budget``),
503 draining, session limit, store (type ``server_error``).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.edges.realtime.errors import CompatError

__all__ = ["compat_error", "openai_error", "reshaped"]


def openai_error(
    status: int,
    code: str,
    message: str,
    *,
    param: str | None = None,
    error_type: str | None = None,
    extra: dict[str, Any] | None = None,
) -> web.Response:
    kind = error_type or ("server_error" if status >= 500 else "invalid_request_error")
    body = {"type": kind, "code": code, "message": message, "param": param, **(extra or {})}
    return web.json_response({"error": body}, status=status)


def compat_error(error: CompatError, status: int = 400) -> web.Response:
    return openai_error(status, error.code, error.message, param=error.param, error_type=error.type)


def reshaped(refusal: web.Response) -> web.Response:
    """One of admission's refusals in OpenAI's shape."""
    try:
        given = orjson.loads(refusal.body if isinstance(refusal.body, bytes) else b"")
        error = dict(given["error"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        error = {}
    status = refusal.status
    code = str(error.pop("code", "error"))
    message = str(error.pop("message", refusal.reason or "refused"))
    kind = None
    if status == 401:
        code = "invalid_api_key"
    elif code == "budget_exhausted":
        kind = "insufficient_quota"
    elif status == 429:
        kind, code = "requests", "rate_limit_exceeded"
    answer = openai_error(status, code, message, error_type=kind, extra=error)
    for name in ("Retry-After", "WWW-Authenticate"):
        if name in refusal.headers:
            answer.headers[name] = refusal.headers[name]
    return answer
