"""Reading a carrier's JSON messages strictly, the same way for every carrier. Pure.

A field that is missing or of the wrong type raises ``PhoneFormatError`` naming it with its
place (``start.media_format.sample_rate``); numbers may come as JSON numbers or as decimal
strings (Twilio's and Exotel's habit); nothing here raises anything else, whatever the input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.edges.phone.wire import PhoneFormatError

__all__ = [
    "DTMF_DIGITS",
    "dumps",
    "integer_field",
    "message_object",
    "object_field",
    "start_object",
    "text_field",
]

DTMF_DIGITS = frozenset("0123456789*#ABCD")  # A-D are DTMF too, though phones rarely have them
_MAX_DIGITS = 18  # int("9" * 5000) is a ValueError in Python 3.11+; no real field is that long


def message_object(message: str | bytes, carrier: str) -> dict[str, Any]:
    """One text frame → its JSON object; ``PhoneFormatError`` for anything else."""
    if not isinstance(message, str):
        raise PhoneFormatError(f"a binary frame: {carrier} sends JSON text frames")
    try:
        parsed = orjson.loads(message)
    except orjson.JSONDecodeError:
        raise PhoneFormatError("frame is not JSON") from None
    if not isinstance(parsed, dict):
        raise PhoneFormatError(f"frame is a JSON {type(parsed).__name__}, not an object")
    return parsed


def start_object(
    message: str | bytes, *, binary: bool = False
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A ``start`` frame and its ``start`` object, or None (never raises: for ``claims``).
    ``binary``: a binary frame may carry it too (else only a text frame does)."""
    if isinstance(message, bytes):
        if not binary or b'"start"' not in message:
            return None
    elif '"start"' not in message:
        return None
    try:
        parsed = orjson.loads(message)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict) or parsed.get("event") != "start":
        return None
    body = parsed.get("start")
    return (parsed, body) if isinstance(body, dict) else None


def object_field(message: Mapping[str, Any], key: str, where: str = "") -> Mapping[str, Any]:
    value = message.get(key)
    if not isinstance(value, dict):
        raise PhoneFormatError(f"{where}{key} must be an object")
    return value


def text_field(message: Mapping[str, Any], key: str, where: str = "") -> str:
    value = message.get(key)
    if not isinstance(value, str) or not value:
        raise PhoneFormatError(f"{where}{key} must be a non-empty string")
    return value


def integer_field(message: Mapping[str, Any], key: str, where: str = "") -> int:
    """A non-negative int, sent as a JSON number or as a decimal string."""
    value = message.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit():
        return int(value)
    raise PhoneFormatError(f"{where}{key} must be a non-negative integer")


def dumps(message: Mapping[str, Any]) -> str:
    """An outbound frame: compact JSON text."""
    return orjson.dumps(message).decode()
