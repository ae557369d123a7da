"""The one error of the OpenAI-compatible endpoint: what the GA Realtime API would refuse.

::

    GatewayError (gateway.errors)
     └── CompatError            type, code, message, param, event_id
           raised by ``client_wire`` for a malformed client event (not JSON, not an object,
           no ``type``, a field of the wrong type or value) and by ``translate.Translator``
           for one the conversation cannot honour (an unknown item, an empty commit, a
           second response); the bridge sends ``Translator.error_event(error)`` and goes on,
           as OpenAI's server does: a client mistake never ends the session.

Codes and messages follow OpenAI's own wording where public captures show it (the ``error``
event of https://platform.openai.com/docs/api-reference/realtime-server-events,
and ``fakes/openai_realtime``, which follows it): ``missing_required_parameter``
("Missing required parameter: 'session.type'."), ``invalid_type`` ("Invalid type for 'x':
expected a string, but got an integer instead."), ``invalid_value`` ("Invalid value: 'x'.
Supported values are: 'a', 'b', and 'c'."), ``unknown_parameter`` ("Unknown parameter: 'x'.").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.errors import GatewayError

__all__ = [
    "CompatError",
    "invalid_type",
    "invalid_value",
    "json_type_name",
    "missing_parameter",
    "unknown_parameter",
]


class CompatError(GatewayError):
    """A client event OpenAI's server would refuse; becomes an ``error`` event.

    ``type`` is OpenAI's error type (``invalid_request_error`` for the client's mistakes,
    ``server_error`` for ours); ``param`` names the offending field (dotted, with ``[i]``
    for list positions), ``event_id`` is the client event's own id, echoed back."""

    type: str
    code: str
    message: str
    param: str | None
    event_id: str | None

    def __init__(
        self,
        code: str,
        message: str,
        *,
        param: str | None = None,
        event_id: str | None = None,
        error_type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.type = error_type
        self.code = code
        self.message = message
        self.param = param
        self.event_id = event_id

    def for_event(self, event_id: str | None) -> CompatError:
        """The same error, blamed on the client event ``event_id``."""
        return CompatError(
            self.code, self.message, param=self.param, event_id=event_id, error_type=self.type
        )

    def payload(self) -> dict[str, Any]:
        """The ``error`` object of OpenAI's ``error`` event."""
        return {
            "type": self.type,
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "event_id": self.event_id,
        }

    def __repr__(self) -> str:
        return (
            f"CompatError(code={self.code!r}, message={self.message!r}, param={self.param!r}, "
            f"event_id={self.event_id!r}, type={self.type!r})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only arguments defeat Exception's default pickling.
        return (_rebuild, (self.code, self.message, self.param, self.event_id, self.type))


def _rebuild(
    code: str, message: str, param: str | None, event_id: str | None, error_type: str
) -> CompatError:
    return CompatError(code, message, param=param, event_id=event_id, error_type=error_type)


def quoted_list(values: Iterable[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b', and 'c'``: how OpenAI lists supported values."""
    quoted = [f"'{value}'" for value in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def json_type_name(value: object) -> str:
    """The JSON type name OpenAI uses in ``invalid_type`` messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "decimal"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def missing_parameter(param: str) -> CompatError:
    return CompatError(
        "missing_required_parameter", f"Missing required parameter: '{param}'.", param=param
    )


def unknown_parameter(param: str) -> CompatError:
    return CompatError("unknown_parameter", f"Unknown parameter: '{param}'.", param=param)


def invalid_type(param: str, expected: str, value: object) -> CompatError:
    got = json_type_name(value)
    article = "an" if got[0] in "aeiou" else "a"
    return CompatError(
        "invalid_type",
        f"Invalid type for '{param}': expected {expected}, but got {article} {got} instead.",
        param=param,
    )


def invalid_value(
    param: str, value: object, supported: Iterable[str] | None = None, *, note: str = ""
) -> CompatError:
    shown = value if isinstance(value, str) else repr(value)
    message = f"Invalid value: '{shown}'."
    if supported is not None:
        message += f" Supported values are: {quoted_list(supported)}."
    if note:
        message += f" {note}"
    return CompatError("invalid_value", message, param=param)
