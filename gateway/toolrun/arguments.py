"""Tool-call arguments: parse once at the boundary, canonicalise for hashing and caching."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "ArgumentError",
    "ParsedArguments",
    "arguments_hash",
    "canonical_json",
    "parse_arguments",
]

CONFIRMATION_ID = "confirmation_id"


class ArgumentError(ValueError):
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
    args = dict(value)
    confirmation_id = args.pop(CONFIRMATION_ID, None)
    if confirmation_id is not None and not isinstance(confirmation_id, str):
        raise ArgumentError("confirmation_id must be a string")
    return ParsedArguments(args, confirmation_id or None)


def canonical_json(args: Mapping[str, Any]) -> bytes:
    return orjson.dumps(args, option=orjson.OPT_SORT_KEYS)


def arguments_hash(tool_id: str, args: Mapping[str, Any]) -> str:
    """Binds a confirmation to the exact call and names a call in the audit log without its data."""
    digest = hashlib.sha256(tool_id.encode() + b"\0" + canonical_json(args))
    return digest.hexdigest()[:32]
