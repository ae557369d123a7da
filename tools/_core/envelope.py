"""The ``ToolResponse`` envelope v1.0.0 (docs/tools.md section 4) and its validation.

    success: {"ok": true,  "data": {...}, "intents": [...], "meta": {...}}
    failure: {"ok": false, "error": {"type", "message", "retryable", "partialSideEffects"},
              "meta": {...}}

Handlers return a ``ToolResponse`` or a plain dict of that shape (``meta`` is filled in by the
runner). ``normalize_envelope`` accepts either and returns a ``ToolResponse`` or raises
``EnvelopeError`` saying what is wrong, so a sloppy handler becomes a clean ``INTERNAL``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tools._core.errors import ToolError, ToolErrorType
from tools._core.intents import Intent, intent_from_dict

__all__ = ["ENVELOPE_VERSION", "EnvelopeError", "ToolFailure", "ToolResponse", "normalize_envelope"]

ENVELOPE_VERSION = "1.0.0"


class EnvelopeError(ToolError, ValueError):
    """A handler returned something that is not a valid envelope (the model gets INTERNAL)."""

    def __init__(self, message: str) -> None:
        super().__init__(ToolErrorType.INTERNAL, message)


@dataclass(frozen=True, slots=True)
class ToolFailure:
    type: ToolErrorType
    message: str
    retryable: bool = False
    # None: unknown (the gateway cannot tell: the node running the call stopped).
    partial_side_effects: bool | None = False
    # Extra fields some errors carry (CONFIRMATION_REQUIRED: confirmationId, prompt, expiresAt).
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type.value,
            "message": self.message,
            "retryable": self.retryable,
            "partialSideEffects": self.partial_side_effects,
        }
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True)
class ToolResponse:
    ok: bool
    data: Mapping[str, Any] = field(default_factory=dict)
    intents: tuple[Intent, ...] = ()
    error: ToolFailure | None = None

    @classmethod
    def success(
        cls, data: Mapping[str, Any] | None = None, intents: Iterable[Intent] = ()
    ) -> ToolResponse:
        return cls(ok=True, data=dict(data or {}), intents=tuple(intents))

    @classmethod
    def failure(
        cls,
        type: ToolErrorType | str,
        message: str,
        *,
        retryable: bool = False,
        partial_side_effects: bool | None = False,
        **extra: Any,
    ) -> ToolResponse:
        failure = ToolFailure(
            type=ToolErrorType(type),
            message=message,
            retryable=retryable,
            partial_side_effects=partial_side_effects,
            extra=extra,
        )
        return cls(ok=False, error=failure)

    @property
    def intent_names(self) -> list[str]:
        return [intent.type.value for intent in self.intents]

    def to_envelope(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        if self.ok:
            return {
                "ok": True,
                "data": dict(self.data),
                "intents": [intent.to_dict() for intent in self.intents],
                "meta": dict(meta),
            }
        assert self.error is not None
        return {"ok": False, "error": self.error.to_dict(), "meta": dict(meta)}


_SUCCESS_KEYS = frozenset({"ok", "data", "intents", "meta"})
_FAILURE_KEYS = frozenset({"ok", "error", "meta"})
_ERROR_KEYS = frozenset({"type", "message", "retryable", "partialSideEffects"})


def normalize_envelope(value: object) -> ToolResponse:
    """Validate a handler's return value; raises ``EnvelopeError`` naming the problem."""
    if isinstance(value, ToolResponse):
        if value.ok == (value.error is not None):
            raise EnvelopeError("ok must be true without error, or false with an error")
        return value
    if not isinstance(value, Mapping):
        raise EnvelopeError(f"handler returned {type(value).__name__}, not an envelope")
    ok = value.get("ok")
    if not isinstance(ok, bool):
        raise EnvelopeError("envelope field 'ok' must be a boolean")
    if ok:
        return _success_from_dict(value)
    return _failure_from_dict(value)


def _success_from_dict(value: Mapping[str, Any]) -> ToolResponse:
    unknown = set(value) - _SUCCESS_KEYS
    if unknown:
        raise EnvelopeError(f"unexpected success envelope fields: {sorted(unknown)}")
    data = value.get("data", {})
    if not isinstance(data, Mapping):
        raise EnvelopeError("envelope field 'data' must be an object")
    raw_intents = value.get("intents", [])
    if not isinstance(raw_intents, list):
        raise EnvelopeError("envelope field 'intents' must be a list")
    intents: list[Intent] = []
    for raw in raw_intents:
        if not isinstance(raw, Mapping):
            raise EnvelopeError("each intent must be an object with a 'type'")
        try:
            intents.append(intent_from_dict(dict(raw)))
        except ValueError as exc:
            raise EnvelopeError(str(exc)) from None
    return ToolResponse(ok=True, data=dict(data), intents=tuple(intents))


def _failure_from_dict(value: Mapping[str, Any]) -> ToolResponse:
    unknown = set(value) - _FAILURE_KEYS
    if unknown:
        raise EnvelopeError(f"unexpected failure envelope fields: {sorted(unknown)}")
    error = value.get("error")
    if not isinstance(error, Mapping):
        raise EnvelopeError("a failure envelope needs an 'error' object")
    try:
        error_type = ToolErrorType(str(error.get("type")))
    except ValueError:
        raise EnvelopeError(f"unknown error type {error.get('type')!r}") from None
    message = error.get("message")
    if not isinstance(message, str) or not message:
        raise EnvelopeError("error 'message' must be a non-empty string")
    retryable = error.get("retryable", False)
    partial = error.get("partialSideEffects", False)
    if not isinstance(retryable, bool) or not (partial is None or isinstance(partial, bool)):
        raise EnvelopeError(
            "error 'retryable' must be a boolean, 'partialSideEffects' a boolean or null"
        )
    extra = {k: v for k, v in error.items() if k not in _ERROR_KEYS}
    return ToolResponse(
        ok=False,
        error=ToolFailure(error_type, message, retryable, partial, extra),
    )
