"""Wire pieces shared by the fake OpenAI Realtime server: errors, ids, actions, usage.

The fake is split the way the style guide asks: pure modules decide (``config``,
``conversation``, ``response``, ``session``) and return *actions*; the aiohttp
shell (``server``) carries them out. The actions are:

- ``Send(event)``: send one server event (already stamped with its ``event_id``);
- ``Close(code, reason)``: close the socket after everything queued before it;
- ``Begin(response_id)``: start delivering that response (``FakeSession.next_step``);
- ``Halt(response_id)``: stop delivering it now (it was already closed out, or abandoned);
- ``Stamp(call_id)``: dispatch mode (``dispatch``): note the time once everything queued
  before it has been written to the socket.

A response is delivered in ``Step``s; the shell sends a step's actions, then waits as the step
says (``audio_s`` × pace, ``wait_s`` of "thinking", or forever when ``hang``).

Error messages follow the API's own wording where public captures show it (the ``error`` event of
https://platform.openai.com/docs/api-reference/realtime-server-events); ``ClientError`` is "the
client sent something illegal": the session answers with an ``error`` event that echoes the client's
``event_id`` and goes on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fakes.close import Close

# The API's wording, shared with the gateway's OpenAI-compatible endpoint (one copy of it).
from gateway.edges.realtime.errors import json_type_name, quoted_list

__all__ = [
    "Action",
    "Begin",
    "ClientError",
    "Close",
    "Event",
    "Halt",
    "IdSource",
    "Send",
    "Stamp",
    "Step",
    "TokenMeter",
    "invalid_type",
    "invalid_value",
    "json_type_name",
    "missing_parameter",
    "rate_limits",
    "unknown_parameter",
    "usage",
]

Event = dict[str, Any]


class ClientError(Exception):
    """A client event the API would reject; becomes an ``error`` event, the session stays open."""

    def __init__(
        self,
        code: str,
        message: str,
        param: str | None = None,
        *,
        error_type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.error_type = error_type

    def payload(self, client_event_id: str | None) -> dict[str, Any]:
        return {
            "type": self.error_type,
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "event_id": client_event_id,
        }


def missing_parameter(param: str) -> ClientError:
    return ClientError(
        "missing_required_parameter", f"Missing required parameter: '{param}'.", param
    )


def unknown_parameter(param: str) -> ClientError:
    return ClientError("unknown_parameter", f"Unknown parameter: '{param}'.", param)


def invalid_type(param: str, expected: str, value: Any) -> ClientError:
    got = json_type_name(value)
    article = "an" if got[0] in "aeiou" else "a"
    return ClientError(
        "invalid_type",
        f"Invalid type for '{param}': expected {expected}, but got {article} {got} instead.",
        param,
    )


def invalid_value(param: str, value: Any, supported: Iterable[str] | None = None) -> ClientError:
    shown = value if isinstance(value, str) else repr(value)
    message = f"Invalid value: '{shown}'."
    if supported is not None:
        message += f" Supported values are: {quoted_list(supported)}."
    return ClientError("invalid_value", message, param)


# Actions -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    event: Event


@dataclass(frozen=True, slots=True)
class Begin:
    response_id: str


@dataclass(frozen=True, slots=True)
class Halt:
    response_id: str


@dataclass(frozen=True, slots=True)
class Stamp:
    call_id: str


Action = Send | Close | Begin | Halt | Stamp


@dataclass(frozen=True, slots=True)
class Step:
    """One piece of a response: actions to carry out, then how long to wait."""

    actions: tuple[Action, ...] = ()
    audio_s: float = 0.0  # audio carried by this step; the shell paces by it
    wait_s: float = 0.0  # "thinking" time after the step, wall clock, not scaled by pace
    hang: bool = False  # wait until the response is cancelled


# Ids and accounting --------------------------------------------------------------------------


class IdSource:
    """Deterministic ids: ``<prefix>_1``, ``<prefix>_2``… one counter per prefix."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def next(self, prefix: str) -> str:
        count = self._counters.get(prefix, 0) + 1
        self._counters[prefix] = count
        return f"{prefix}_{count}"


class TokenMeter:
    """Tokens used by a session, for ``usage`` and ``rate_limits.updated``."""

    TOKEN_LIMIT = 400_000
    REQUEST_LIMIT = 5_000

    def __init__(self) -> None:
        self.tokens_used = 0
        self.requests = 0

    def settle(self, tokens: int) -> None:
        self.requests += 1
        self.tokens_used += tokens


def usage(
    *, input_text: int, input_audio: int, output_text: int, output_audio: int
) -> dict[str, Any]:
    input_tokens = input_text + input_audio
    output_tokens = output_text + output_audio
    return {
        "total_tokens": input_tokens + output_tokens,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "input_token_details": {
            "text_tokens": input_text,
            "audio_tokens": input_audio,
            "image_tokens": 0,
            "cached_tokens": 0,
            "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": output_text, "audio_tokens": output_audio},
    }


def rate_limits(meter: TokenMeter) -> list[dict[str, Any]]:
    return [
        {
            "name": "requests",
            "limit": TokenMeter.REQUEST_LIMIT,
            "remaining": max(0, TokenMeter.REQUEST_LIMIT - meter.requests),
            "reset_seconds": 0.012,
        },
        {
            "name": "tokens",
            "limit": TokenMeter.TOKEN_LIMIT,
            "remaining": max(0, TokenMeter.TOKEN_LIMIT - meter.tokens_used),
            "reset_seconds": 0.9,
        },
    ]
