"""Tool-call arguments: parse once at the boundary, canonicalise for hashing and caching."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.errors import GatewayError

__all__ = [
    "ArgumentError",
    "ParsedArguments",
    "arguments_hash",
    "canonical_json",
    "measure_arguments",
    "parse_arguments",
]

CONFIRMATION_ID = "confirmation_id"
# Arguments are the model's words: measured before anything recursive (validation, hashing,
# encoding for the client or the audit) touches them. Real tool arguments are a few levels deep
# and a few hundred bytes; these bounds leave room for any honest schema.
MAX_DEPTH = 32
MAX_BYTES = 128 * 1024
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what JSON encoders of other systems can take


class ArgumentError(GatewayError, ValueError):
    """The arguments are not a JSON object; the message is safe to show the model."""


@dataclass(frozen=True, slots=True)
class ParsedArguments:
    args: dict[str, Any]
    # Taken out before validation: it is ours, not the tool's.
    confirmation_id: str | None = None


def parse_arguments(raw: str | bytes | Mapping[str, Any] | None) -> ParsedArguments:
    """Providers send a JSON string (OpenAI, chat) or an object (Gemini)."""
    if raw is None or raw == "" or raw == b"":
        value: Any = {}
    elif isinstance(raw, str | bytes):
        if len(raw) > MAX_BYTES:
            raise ArgumentError(f"arguments are larger than {MAX_BYTES} bytes")
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ArgumentError(
                f"arguments are not valid JSON ({exc.msg}); send a JSON object"
            ) from None
    else:
        value = raw
    if not isinstance(value, Mapping):
        raise ArgumentError(f"arguments must be a JSON object, not {type(value).__name__}")
    measure_arguments(value)
    args = dict(value)
    confirmation_id = args.pop(CONFIRMATION_ID, None)
    if confirmation_id is not None and not isinstance(confirmation_id, str):
        raise ArgumentError("confirmation_id must be a string")
    return ParsedArguments(args, confirmation_id or None)


def measure_arguments(value: Any) -> None:
    """Raise ``ArgumentError`` unless ``value`` is plain JSON data (dicts with string keys,
    lists, strings, finite-width numbers, booleans, null) at most ``MAX_DEPTH`` levels deep and
    about ``MAX_BYTES`` long as JSON. Iterative: a hostile depth costs no recursion."""
    size = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, bool) or item is None:
            size += 5
        elif isinstance(item, int):
            if not _INT_MIN <= item <= _INT_MAX:
                raise ArgumentError("arguments hold an integer out of range")
            size += 20
        elif isinstance(item, float):
            size += 24
        elif isinstance(item, Mapping | list | tuple):
            if depth > MAX_DEPTH:
                raise ArgumentError(f"arguments are nested deeper than {MAX_DEPTH} levels")
            size += 2 + len(item)
            if size > MAX_BYTES:
                raise ArgumentError(f"arguments are larger than {MAX_BYTES} bytes")
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise ArgumentError("arguments hold an object key that is not a string")
                    size += len(key) + 4
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        else:
            raise ArgumentError(f"arguments hold a value that is not JSON ({type(item).__name__})")
        if size > MAX_BYTES:
            raise ArgumentError(f"arguments are larger than {MAX_BYTES} bytes")


def canonical_json(args: Mapping[str, Any]) -> bytes:
    return orjson.dumps(args, option=orjson.OPT_SORT_KEYS)


def arguments_hash(tool_id: str, args: Mapping[str, Any]) -> str:
    """Binds a confirmation to the exact call and names a call in the audit log without its data."""
    digest = hashlib.sha256(tool_id.encode() + b"\0" + canonical_json(args))
    return digest.hexdigest()[:32]
