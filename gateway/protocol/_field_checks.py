"""Shared checks that turn a bad field into an ``invalid_event`` error naming that field.

Used by the event constructors (values) and by the decoder (JSON types), so that both speak
with one voice: ``"<event type>: '<field>' <problem>"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TypeVar

from .errors import ErrorCode, ProtocolError
from .json_types import JsonObject

__all__ = [
    "choice",
    "describe_choices",
    "invalid_field",
    "require_non_empty",
    "with_event_id",
]

_Choice = TypeVar("_Choice", bound=StrEnum)


def invalid_field(
    event_type: str, field_name: str, problem: str, event_id: str | None = None
) -> ProtocolError:
    """The ``invalid_event`` error for one field, e.g. ``session.start: 'mode' is required``."""
    return ProtocolError(
        ErrorCode.INVALID_EVENT, f"{event_type}: '{field_name}' {problem}", event_id=event_id
    )


def describe_choices(values: Iterable[str]) -> str:
    """``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``: the allowed values for a message."""
    quoted = [f"'{value}'" for value in values]
    if len(quoted) <= 1:
        return "".join(quoted)
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def choice(
    enum_type: type[_Choice],
    value: object,
    *,
    event_type: str,
    field_name: str,
    event_id: str | None = None,
) -> _Choice:
    """``value`` as a member of ``enum_type``; a plain string with a member's value is accepted."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type(value)
        except ValueError:
            pass
    allowed = describe_choices(member.value for member in enum_type)
    raise invalid_field(event_type, field_name, f"must be {allowed}", event_id)


def require_non_empty(
    value: str, *, event_type: str, field_name: str, event_id: str | None = None
) -> None:
    """Identifiers (ids, tokens, names) are never empty strings."""
    if not isinstance(value, str) or not value:
        raise invalid_field(event_type, field_name, "must be a non-empty string", event_id)


def with_event_id(body: JsonObject, event_id: str | None) -> JsonObject:
    """A client event's wire form, with its ``event_id`` when it has one."""
    if event_id is not None:
        body["event_id"] = event_id
    return body
