"""Intents a tool returns; the orchestrator, never the tool, applies them to session state."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "EndVoiceSession",
    "Intent",
    "IntentType",
    "SetPendingMessage",
    "SuppressAudio",
    "SuppressTranscript",
    "intent_from_dict",
]


class IntentType(StrEnum):
    END_VOICE_SESSION = "END_VOICE_SESSION"
    SUPPRESS_AUDIO = "SUPPRESS_AUDIO"
    SUPPRESS_TRANSCRIPT = "SUPPRESS_TRANSCRIPT"
    SET_PENDING_MESSAGE = "SET_PENDING_MESSAGE"


@dataclass(frozen=True, slots=True)
class EndVoiceSession:
    type: IntentType = IntentType.END_VOICE_SESSION

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type.value}


@dataclass(frozen=True, slots=True)
class SuppressAudio:
    """Without ``duration_ms``: the current response and the reply that follows the result."""

    duration_ms: int | None = None
    type: IntentType = IntentType.SUPPRESS_AUDIO

    def to_dict(self) -> dict[str, Any]:
        return _with_duration(self.type, self.duration_ms)


@dataclass(frozen=True, slots=True)
class SuppressTranscript:
    duration_ms: int | None = None
    type: IntentType = IntentType.SUPPRESS_TRANSCRIPT

    def to_dict(self) -> dict[str, Any]:
        return _with_duration(self.type, self.duration_ms)


@dataclass(frozen=True, slots=True)
class SetPendingMessage:
    message: str
    type: IntentType = IntentType.SET_PENDING_MESSAGE

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type.value, "message": self.message}


Intent = EndVoiceSession | SuppressAudio | SuppressTranscript | SetPendingMessage


def _with_duration(kind: IntentType, duration_ms: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind.value}
    if duration_ms is not None:
        out["duration_ms"] = duration_ms
    return out


def intent_from_dict(raw: dict[str, Any]) -> Intent:
    """Parse one intent of an envelope; raises ``ValueError`` naming what is wrong."""
    kind = raw.get("type")
    try:
        intent_type = IntentType(str(kind))
    except ValueError:
        raise ValueError(f"unknown intent type {kind!r}") from None
    if intent_type is IntentType.END_VOICE_SESSION:
        return EndVoiceSession()
    if intent_type is IntentType.SET_PENDING_MESSAGE:
        message = raw.get("message")
        if not isinstance(message, str) or not message.strip():
            raise ValueError("SET_PENDING_MESSAGE needs a non-empty string 'message'")
        return SetPendingMessage(message=message)
    duration = raw.get("duration_ms")
    if duration is not None and (
        isinstance(duration, bool) or not isinstance(duration, int) or duration <= 0
    ):
        raise ValueError(f"{intent_type.value} 'duration_ms' must be a positive integer")
    if intent_type is IntentType.SUPPRESS_AUDIO:
        return SuppressAudio(duration_ms=duration)
    return SuppressTranscript(duration_ms=duration)
