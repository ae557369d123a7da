"""The API's answer → the tool envelope (pure: no I/O, no event loop).

Status → error type (the handler's types of ``tools._core``)::

    2xx       ok; data = the JSON object; a JSON array is {"items": [...]}, another JSON value
              {"value": ...}, an empty body {}, a body that is not JSON {"text": ...} (capped)
    3xx       PERMANENT: HTTP tools never follow redirects (one to another host is named so)
    400, 422  VALIDATION, with the API's own message
    401, 403  AUTH: the API refused the credentials (the user's, or the service's) or permission
    404       NOT_FOUND
    409       CONFLICT
    429       RATE_LIMIT, retryable
    5xx       TRANSIENT, retryable
    other     PERMANENT

The API's message is taken from a JSON body (``message``, ``error``, ``detail``, ``title``,
``error_description``; nested ``{"error": {"message": ...}}`` and FastAPI's list of ``detail``
items too), else from a short plain-text body; whitespace collapsed, capped at
``MESSAGE_CAP`` characters; never a header.

``partialSideEffects`` says whether the API may have applied the request although the call
failed. Never for GET (read-only by HTTP's contract), nor for a request that was not sent, nor
for a 4xx (the API refused it). For any other method it is true when the request reached the
API and the answer does not say it was refused: a 3xx, a 5xx, an answer too large to read, a 2xx
that is not valid JSON, a connection that broke after the request was sent. (A timeout is the
runner's ``TIMEOUT``, with its own rule: true for ``action`` tools.)

Retry-After: an idempotent GET answered 429 or 503 with ``Retry-After`` (seconds or an HTTP
date) is retried once, if the wait fits in what is left of the deadline (``retry_wait_s`` says
how long; the executor decides whether it fits).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from tools._core import ToolErrorType, ToolResponse

__all__ = [
    "MESSAGE_CAP",
    "TEXT_CAP",
    "ApiAnswer",
    "api_message",
    "connection_failed",
    "interpret_answer",
    "may_have_applied",
    "parse_retry_after",
    "retry_wait_s",
    "too_large",
]

MESSAGE_CAP = 300  # characters of the API's own message in an error
TEXT_CAP = 8000  # characters of a non-JSON success body in data["text"]
_MESSAGE_KEYS = ("message", "error", "detail", "title", "error_description")
_WHITESPACE = re.compile(r"\s+")
_RETRIED_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class ApiAnswer:
    """What the executor read: the status, the body (at most the tool's limit, any credential
    already blanked out) and the few headers the mapping looks at."""

    status: int
    content_type: str
    body: bytes
    retry_after: str | None = None
    redirect_elsewhere: bool = False  # a 3xx whose Location names another origin


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _short(text: str) -> str:
    flat = _WHITESPACE.sub(" ", "".join(c if c.isprintable() else " " for c in text)).strip()
    return flat if len(flat) <= MESSAGE_CAP else flat[: MESSAGE_CAP - 1] + "…"


def _message_in(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, Mapping):
        return _message_in(value.get("message"))
    if isinstance(value, list):  # FastAPI: [{"loc": [...], "msg": "..."}]
        parts = []
        for item in value[:5]:
            if isinstance(item, Mapping) and isinstance(item.get("msg"), str):
                loc = item.get("loc")
                where = ".".join(str(p) for p in loc) if isinstance(loc, list) else ""
                parts.append(f"{where}: {item['msg']}" if where else item["msg"])
        return "; ".join(parts) or None
    return None


def api_message(content_type: str, body: bytes) -> str | None:
    """The API's own explanation in an error answer, short, or None."""
    if not body.strip():
        return None
    if _is_json(content_type):
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(parsed, Mapping):
            return None
        for key in _MESSAGE_KEYS:
            found = _message_in(parsed.get(key))
            if found:
                return _short(found)
        return None
    if content_type.split(";", 1)[0].strip().lower() == "text/plain":
        return _short(body[: MESSAGE_CAP * 4].decode("utf-8", errors="replace"))
    return None  # HTML error pages and the like say nothing useful to the model


def may_have_applied(method: str, status: int | None) -> bool:
    """``partialSideEffects`` of a failed call (``status`` None: sent, no usable answer)."""
    if method == "GET":
        return False
    return status is None or not 400 <= status < 500


def _failure(
    error_type: ToolErrorType,
    what: str,
    answer: ApiAnswer,
    method: str,
    *,
    retryable: bool = False,
) -> ToolResponse:
    said = api_message(answer.content_type, answer.body)
    return ToolResponse.failure(
        error_type,
        f"{what}: {said}" if said else what,
        retryable=retryable,
        partial_side_effects=may_have_applied(method, answer.status),
    )


def _success(answer: ApiAnswer, method: str) -> ToolResponse:
    if not answer.body.strip():
        return ToolResponse.success({})
    if not _is_json(answer.content_type):
        text = answer.body.decode("utf-8", errors="replace")
        return ToolResponse.success({"text": text[:TEXT_CAP]})
    try:
        parsed = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        return ToolResponse.failure(
            ToolErrorType.PERMANENT,
            f"the API answered {answer.status} with a body that is not valid JSON",
            partial_side_effects=may_have_applied(method, answer.status),
        )
    if isinstance(parsed, dict):
        return ToolResponse.success(parsed)
    if isinstance(parsed, list):
        return ToolResponse.success({"items": parsed})
    return ToolResponse.success({"value": parsed})


def interpret_answer(answer: ApiAnswer, *, method: str, service_auth: bool) -> ToolResponse:
    """The envelope for a complete answer (status and a body within the limit)."""
    status = answer.status
    if 200 <= status < 300:
        return _success(answer, method)
    if 300 <= status < 400:
        what = (
            "the API redirected to another host, which HTTP tools never follow"
            if answer.redirect_elsewhere
            else f"the API answered with a redirect ({status}), which HTTP tools do not follow"
        )
        return ToolResponse.failure(
            ToolErrorType.PERMANENT,
            what,
            partial_side_effects=may_have_applied(method, status),
        )
    if status in (400, 422):
        return _failure(
            ToolErrorType.VALIDATION, f"the API refused the arguments ({status})", answer, method
        )
    if status in (401, 403):
        whose = "the gateway's service credentials" if service_auth else "the user's credentials"
        return _failure(
            ToolErrorType.AUTH, f"the API refused {whose} or permission ({status})", answer, method
        )
    if status == 404:
        return _failure(ToolErrorType.NOT_FOUND, "the API has no such thing (404)", answer, method)
    if status == 409:
        return _failure(ToolErrorType.CONFLICT, "the API reported a conflict (409)", answer, method)
    if status == 429:
        return _failure(
            ToolErrorType.RATE_LIMIT,
            "the API is limiting requests (429); try again later",
            answer,
            method,
            retryable=True,
        )
    if 500 <= status < 600:
        return _failure(
            ToolErrorType.TRANSIENT,
            f"the API failed ({status}); try again",
            answer,
            method,
            retryable=True,
        )
    return _failure(
        ToolErrorType.PERMANENT, f"the API refused the request ({status})", answer, method
    )


def too_large(limit: int, method: str) -> ToolResponse:
    return ToolResponse.failure(
        ToolErrorType.PERMANENT,
        f"the API's response is larger than {limit} bytes",
        partial_side_effects=may_have_applied(method, None),
    )


def connection_failed(*, sent: bool, method: str) -> ToolResponse:
    """The connection failed: before the request went out (``sent`` False: nothing can have
    happened) or after (the API may have received it)."""
    what = (
        "the API could not be reached; try again"
        if not sent
        else "the connection to the API broke before it answered; try again"
    )
    return ToolResponse.failure(
        ToolErrorType.TRANSIENT,
        what,
        retryable=True,
        partial_side_effects=sent and may_have_applied(method, None),
    )


def parse_retry_after(value: str, now: datetime) -> float | None:
    """Seconds to wait from ``Retry-After`` (delay-seconds or an HTTP date; ``now`` is an aware
    UTC datetime); None when it is neither."""
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None  # an HTTP date is always GMT; one without a zone is not an HTTP date
    return max(0.0, (when - now).total_seconds())


def retry_wait_s(answer: ApiAnswer, method: str, now: datetime) -> float | None:
    """How long to wait before the one retry an answer allows, or None for no retry."""
    if method != "GET" or answer.status not in _RETRIED_STATUSES or answer.retry_after is None:
        return None
    return parse_retry_after(answer.retry_after, now)
