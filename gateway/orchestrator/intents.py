"""Intents applied to session state. Pure: the session asks, with the time, what to do.

Without ``duration_ms``, SUPPRESS_AUDIO / SUPPRESS_TRANSCRIPT cover the current response (if one
is still active) and the reply that follows the tool result; END_VOICE_SESSION ends the session
once that reply has been delivered completely. Both count response ends rather than guessing
times. SET_PENDING_MESSAGE texts wait for the start of the next user turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tools._core import (
    EndVoiceSession,
    Intent,
    SetPendingMessage,
    SuppressAudio,
    SuppressTranscript,
)

__all__ = ["IntentState"]


@dataclass(slots=True)
class _Window:
    """Suppression for a number of response ends, or until a monotonic time."""

    responses_left: int = 0
    until: float = 0.0

    def active(self, now: float) -> bool:
        return self.responses_left > 0 or now < self.until

    def cover(self, duration_ms: int | None, response_active: bool, now: float) -> None:
        if duration_ms is None:
            self.responses_left = max(self.responses_left, 2 if response_active else 1)
        else:
            self.until = max(self.until, now + duration_ms / 1000.0)

    def response_ended(self) -> None:
        if self.responses_left > 0:
            self.responses_left -= 1


@dataclass(slots=True)
class IntentState:
    audio: _Window = field(default_factory=_Window)
    transcript: _Window = field(default_factory=_Window)
    # Response ends to wait for before the session ends (END_VOICE_SESSION); None = not ending.
    end_after: int | None = None
    pending_messages: list[str] = field(default_factory=list)

    def apply(
        self, intents: Iterable[Intent], *, mode: str, response_active: bool, now: float
    ) -> list[str]:
        """Apply a tool's intents; returns the names of those that took effect."""
        applied: list[str] = []
        for intent in intents:
            if isinstance(intent, EndVoiceSession):
                if mode != "voice":
                    continue  # a text session is not ended by a voice-only intent
                self.end_after = 2 if response_active else 1
            elif isinstance(intent, SuppressAudio):
                self.audio.cover(intent.duration_ms, response_active, now)
            elif isinstance(intent, SuppressTranscript):
                self.transcript.cover(intent.duration_ms, response_active, now)
            elif isinstance(intent, SetPendingMessage):
                self.pending_messages.append(intent.message)
            applied.append(intent.type.value)
        return applied

    def audio_suppressed(self, now: float) -> bool:
        return self.audio.active(now)

    def transcript_suppressed(self, now: float) -> bool:
        return self.transcript.active(now)

    def response_ended(self) -> bool:
        """Count one response end; True when the session must now end (END_VOICE_SESSION)."""
        self.audio.response_ended()
        self.transcript.response_ended()
        if self.end_after is None:
            return False
        self.end_after -= 1
        return self.end_after <= 0

    def take_pending_messages(self) -> list[str]:
        """At the start of a user turn: the queued messages, once."""
        messages, self.pending_messages = self.pending_messages, []
        return messages
