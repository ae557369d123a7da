"""Builders of GA Realtime server events and objects (plain dicts, JSON-ready), and the small
mappings from the gateway protocol's values to OpenAI's: response status, usage, errors, the
close code at the end of a session.

Pure. Every builder takes ids it is given (``Ids``: ``event_…``, ``item_…``, ``resp_…``); the
shapes are those of the SDK's models (``openai.types.realtime``), which the unit tests parse
every built event with.
"""

from __future__ import annotations

import copy
import itertools
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

from gateway.protocol import ErrorEvent

from .errors import CompatError
from .session_config import PCM_24K, Modality

__all__ = [
    "BYTES_PER_MS",
    "CountingIds",
    "Ids",
    "PartKind",
    "ServerEvent",
    "SessionIds",
    "assistant_item",
    "close_code",
    "error_from_gateway",
    "ga_status",
    "ga_usage",
    "response_object",
    "session_end_error",
    "user_audio_item",
]

ServerEvent: TypeAlias = dict[str, Any]
"""One GA server event, ready for ``orjson.dumps``."""

Ids: TypeAlias = Callable[[str], str]
"""``ids("event")`` → a new ``event_…`` id; also ``item``, ``resp``, ``conv``."""

PartKind: TypeAlias = Literal["audio", "text"]

BYTES_PER_MS = 48  # PCM16 mono at 24 kHz, both ways


class SessionIds:
    """Production ids, one instance per session: ``<prefix>_``, 12 random hex digits drawn
    once, then a counter in hex (OpenAI's ids are opaque too). Unique within the session, and
    across sessions but by a 48-bit chance; no fresh randomness per audio delta's event id."""

    def __init__(self) -> None:
        self._salt = secrets.token_hex(6)
        self._next = itertools.count(1).__next__

    def __call__(self, prefix: str) -> str:
        return f"{prefix}_{self._salt}{self._next():x}"


class CountingIds:
    """Deterministic ids for tests and replays: ``<prefix>_1``, ``<prefix>_2``… per prefix."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def __call__(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}_{next(counter)}"


# Items ---------------------------------------------------------------------------------------


def assistant_item(
    item_id: str, status: str, part: PartKind | None = None, text: str = ""
) -> dict[str, Any]:
    """An assistant message; ``part`` None: no content yet (``output_item.added``)."""
    content: list[dict[str, Any]] = []
    if part == "audio":
        content.append({"type": "output_audio", "transcript": text})
    elif part == "text":
        content.append({"type": "output_text", "text": text})
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def user_audio_item(item_id: str, transcript: str | None = None) -> dict[str, Any]:
    """The user message a committed input buffer becomes (its audio is never echoed)."""
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": [{"type": "input_audio", "transcript": transcript}],
    }


# Responses -----------------------------------------------------------------------------------


def response_object(
    *,
    response_id: str,
    status: str,
    conversation_id: str | None,
    modality: Modality,
    voice: Any,
    metadata: Mapping[str, str] | None = None,
    output: list[dict[str, Any]] | None = None,
    status_details: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``response`` of ``response.created`` (``in_progress``, no output, no usage) and of
    ``response.done`` (final status, the output items without audio bytes, usage)."""
    return {
        "object": "realtime.response",
        "id": response_id,
        "status": status,
        "status_details": status_details,
        "output": copy.deepcopy(output) if output else [],
        "conversation_id": conversation_id,
        "output_modalities": [modality],
        "max_output_tokens": "inf",
        "audio": {"output": {"format": dict(PCM_24K), "voice": copy.deepcopy(voice)}},
        "usage": usage,
        "metadata": None if metadata is None else dict(metadata),
    }


def ga_status(status: str, error_message: str | None = None) -> tuple[str, dict[str, Any] | None]:
    """Our ``response.done.status`` → OpenAI's ``status`` and ``status_details``.

    ``interrupted`` (barge-in) is OpenAI's ``cancelled`` by ``turn_detected``; ``cancelled``
    (``response.cancel``) is ``client_cancelled``; ``failed`` carries the error the session
    reported just before (``upstream_error``), when there was one."""
    if status == "completed":
        return "completed", None
    if status == "interrupted":
        return "cancelled", {"type": "cancelled", "reason": "turn_detected"}
    if status == "cancelled":
        return "cancelled", {"type": "cancelled", "reason": "client_cancelled"}
    error = {
        "type": "server_error",
        "code": "upstream_error",
        "message": error_message or "The model failed to produce a response.",
    }
    return "failed", {"type": "failed", "error": error}


def _count(usage: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0


def ga_usage(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """Our ``response.done.usage`` (the provider's own counts) → OpenAI's ``usage``; zeros for
    what is not known. Understood: OpenAI Realtime's (``input_tokens``, details kept), chat
    completions' (``prompt_tokens``, ``completion_tokens``) and Gemini's (``promptTokenCount``,
    ``responseTokenCount``)."""
    given = usage or {}
    input_tokens = _count(given, "input_tokens", "prompt_tokens", "promptTokenCount")
    output_tokens = _count(given, "output_tokens", "completion_tokens", "responseTokenCount")
    total = _count(given, "total_tokens", "totalTokenCount") or input_tokens + output_tokens
    input_details = given.get("input_token_details")
    output_details = given.get("output_token_details")
    return {
        "total_tokens": total,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "input_token_details": (
            copy.deepcopy(input_details)
            if isinstance(input_details, dict)
            else {
                "text_tokens": input_tokens,
                "audio_tokens": 0,
                "image_tokens": 0,
                "cached_tokens": 0,
                "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0, "image_tokens": 0},
            }
        ),
        "output_token_details": (
            copy.deepcopy(output_details)
            if isinstance(output_details, dict)
            else {"text_tokens": output_tokens, "audio_tokens": 0}
        ),
    }


# Errors and the end of a session -------------------------------------------------------------

# Our error codes that are the gateway's or the upstream's fault, not the client's.
_SERVER_CODES = frozenset(
    {"upstream_unavailable", "upstream_error", "internal", "store_unavailable"}
)


def error_from_gateway(event: ErrorEvent) -> CompatError:
    """Our ``error`` event → OpenAI's error: our ``code`` and ``message`` kept (our codes are
    documented in the gateway protocol), ``server_error`` for the gateway's and the upstream's
    faults, ``invalid_request_error`` otherwise; ``event_id`` echoed (the bridge gives our
    client events the GA client's ``event_id``)."""
    code = event.code.value
    return CompatError(
        code,
        event.message or code,
        event_id=event.event_id,
        error_type="server_error" if code in _SERVER_CODES else "invalid_request_error",
    )


_END_ERRORS: Mapping[str, tuple[str, str, str]] = {
    # reason → (error type, code, default message)
    "max_duration": (
        "invalid_request_error",
        "session_expired",
        "Your session hit the maximum duration.",
    ),
    "idle_timeout": ("invalid_request_error", "idle_timeout", "The session was idle too long."),
    "upstream_failed": ("server_error", "upstream_failed", "The model's session failed."),
    "shutdown": ("server_error", "server_shutdown", "The server is shutting down."),
    "error": ("server_error", "internal", "The session ended on an internal error."),
    "budget_exhausted": (
        "invalid_request_error",
        "budget_exhausted",
        "A budget of this key, user or team has run out.",
    ),
    "key_revoked": ("invalid_request_error", "key_revoked", "The key was revoked."),
}

_CLOSE_CODES: Mapping[str, int] = {
    "client": 1000,
    "intent": 1000,
    "idle_timeout": 1000,
    "max_duration": 1001,  # as OpenAI's own expiry
    "shutdown": 1001,  # going away: the SDK's opt-in reconnect may open a new session
    "upstream_failed": 1011,
    "error": 1011,
    "budget_exhausted": 1008,  # policy: the client may not go on with this credential
    "key_revoked": 1008,
}


def session_end_error(reason: str, detail: str | None) -> CompatError | None:
    """The ``error`` a GA client is told before the socket closes (None: a normal end)."""
    known = _END_ERRORS.get(reason)
    if known is None:
        return None
    error_type, code, default = known
    return CompatError(code, detail or default, error_type=error_type)


def close_code(reason: str) -> int:
    """The WebSocket close code for our ``session.ended.reason``."""
    return _CLOSE_CODES.get(reason, 1011)
