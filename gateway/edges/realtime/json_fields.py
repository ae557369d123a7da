"""Typed reads of one field of a client event's JSON, refusing what OpenAI's server refuses.

Each reader takes the parent object, the key and the dotted ``param`` path the error names;
a missing required field is ``missing_required_parameter``, a JSON type other than the one
expected is ``invalid_type``. An explicit ``null`` counts as absent unless the caller says so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from .errors import invalid_type, invalid_value, missing_parameter, unknown_parameter

__all__ = [
    "check_keys",
    "choice",
    "object_at",
    "optional_bool",
    "optional_int",
    "optional_number",
    "optional_string",
    "require_object",
    "required_int",
    "required_string",
]


def require_object(value: Any, param: str) -> dict[str, Any]:
    if value is None:
        raise missing_parameter(param)
    if not isinstance(value, dict):
        raise invalid_type(param, "an object", value)
    return value


def object_at(parent: Mapping[str, Any], key: str, param: str) -> dict[str, Any] | None:
    """An optional object field (``None`` when absent or null)."""
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid_type(param, "an object", value)
    return value


def check_keys(obj: Mapping[str, Any], allowed: Collection[str], param: str) -> None:
    """``unknown_parameter`` for the first key OpenAI's API does not document here."""
    for key in obj:
        if key not in allowed:
            raise unknown_parameter(f"{param}.{key}" if param else key)


def required_string(parent: Mapping[str, Any], key: str, param: str) -> str:
    value = parent.get(key)
    if value is None:
        raise missing_parameter(param)
    if not isinstance(value, str):
        raise invalid_type(param, "a string", value)
    return value


def optional_string(parent: Mapping[str, Any], key: str, param: str) -> str | None:
    value = parent.get(key)
    if value is not None and not isinstance(value, str):
        raise invalid_type(param, "a string", value)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def required_int(parent: Mapping[str, Any], key: str, param: str, *, minimum: int = 0) -> int:
    value = parent.get(key)
    if value is None:
        raise missing_parameter(param)
    return _checked_int(value, param, minimum)


def optional_int(
    parent: Mapping[str, Any], key: str, param: str, *, minimum: int = 0
) -> int | None:
    value = parent.get(key)
    return None if value is None else _checked_int(value, param, minimum)


def _checked_int(value: Any, param: str, minimum: int) -> int:
    if not _is_int(value):
        raise invalid_type(param, "an integer", value)
    if value < minimum:
        raise invalid_value(param, value, note=f"Expected an integer >= {minimum}.")
    result: int = value
    return result


def optional_number(
    parent: Mapping[str, Any], key: str, param: str, *, low: float, high: float
) -> float | None:
    value = parent.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid_type(param, "a number", value)
    if not low <= value <= high:
        raise invalid_value(param, value, note=f"Expected a value between {low:g} and {high:g}.")
    return float(value)


def optional_bool(parent: Mapping[str, Any], key: str, param: str) -> bool | None:
    value = parent.get(key)
    if value is not None and not isinstance(value, bool):
        raise invalid_type(param, "a boolean", value)
    return value


def choice(value: Any, param: str, supported: tuple[str, ...]) -> str:
    """A string that must be one of ``supported`` (``invalid_value`` listing them)."""
    if not isinstance(value, str):
        raise invalid_type(param, "a string", value)
    if value not in supported:
        raise invalid_value(param, value, supported)
    return value
