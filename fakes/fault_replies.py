"""What the fakes' aiohttp shells answer when a connection fault applies (``fakes.faults``).

- ``refuse(request)``: the connection is reset before any HTTP answer. A loopback server cannot
  refuse a connection that the kernel has already accepted, so this is the closest it gets: the
  handler sets ``SO_LINGER`` to 0 and aborts the transport, so the kernel sends an RST instead
  of a FIN. The client has sent its request (the upgrade, or the POST) and reads no status
  line: ``ECONNRESET`` (aiohttp: ``ClientOSError`` errno 104), or, from a client that treats the
  reset as an end of stream (``websockets``: ``InvalidMessage("did not receive a valid HTTP
  response")`` caused by ``EOFError``), an EOF. Over TLS the handshake has completed first.
- ``openai_error(status)`` / ``gemini_error(status)``: the provider's JSON error body for that
  status, as its HTTP API writes it (OpenAI: ``{"error": {"message", "type", "param", "code"}}``;
  Google: ``{"error": {"code", "message", "status"}}``, plus ``details`` with a ``RetryInfo``
  on a 429), with ``Retry-After`` (seconds) on a 429.
"""

from __future__ import annotations

import socket
import struct
import uuid
from contextlib import suppress
from typing import Any

from aiohttp import web

__all__ = ["gemini_error", "gemini_error_body", "openai_error", "openai_error_body", "refuse"]

# status → (type, code, message), as the OpenAI API writes them
_OPENAI: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Bad request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    403: (
        "invalid_request_error",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests per min (RPM): Limit 100, Used 100, Requested 1. "
        "Please try again in 1s.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    504: ("server_error", None, "Gateway timeout."),
}

# status → (status name, message), as Google's APIs write them
_GOOGLE: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: (
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
        "cookie or other valid authentication credential.",
    ),
    403: ("PERMISSION_DENIED", "The caller does not have permission"),
    404: ("NOT_FOUND", "Requested entity was not found."),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    500: ("INTERNAL", "Internal error encountered."),
    502: ("UNAVAILABLE", "Bad gateway."),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "The request timed out. Please try again."),
}


def refuse(request: web.Request) -> web.StreamResponse:
    """Reset the request's connection (RST, no HTTP answer); return what the handler returns
    (aiohttp writes nothing on an aborted transport)."""
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with suppress(OSError):  # no RST then: the client reads a plain EOF
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return web.Response()


def _headers(status: int, retry_after_s: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    if status == 429:
        headers["Retry-After"] = str(retry_after_s)
    return headers


def openai_error_body(status: int) -> dict[str, Any]:
    kind, code, message = _OPENAI[status]
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def openai_error(status: int, retry_after_s: int) -> web.Response:
    """The OpenAI API's answer with that status."""
    headers = _headers(status, retry_after_s) | {"x-request-id": f"req_{uuid.uuid4().hex}"}
    return web.json_response(openai_error_body(status), status=status, headers=headers)


def gemini_error_body(status: int, retry_after_s: int) -> dict[str, Any]:
    name, message = _GOOGLE[status]
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if status == 429:
        retry_info = "type.googleapis.com/google.rpc.RetryInfo"
        error["details"] = [{"@type": retry_info, "retryDelay": f"{retry_after_s}s"}]
    return {"error": error}


def gemini_error(status: int, retry_after_s: int) -> web.Response:
    """The Gemini API's answer with that status."""
    body = gemini_error_body(status, retry_after_s)
    return web.json_response(body, status=status, headers=_headers(status, retry_after_s))
