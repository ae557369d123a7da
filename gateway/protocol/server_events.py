"""Gateway → client events (docs/protocol.md section 6) as frozen dataclasses.

Each event knows its wire shape: ``to_dict`` returns exactly the documented field names, with
``type`` first. Required fields are always present (``null`` when the value is None); a field
the protocol marks optional or conditional is left out when it does not apply:

- ``transcript.delta`` / ``transcript.done``: ``response_id`` (assistant transcripts only);
- ``response.done``: ``usage``;
- ``tool.finished``: ``data`` when ``ok``, ``error`` otherwise (never both);
- ``confirmation.resolved``: ``result`` (only when approved);
- ``session.ended``: ``detail``; ``usage`` (an extension: the session's usage summary);
- ``session.started``: ``recovery`` (an extension: only for a session rebuilt after its node
  stopped);
- ``error``: ``event_id`` (only when a client event caused it).

The gateway builds these events itself, so their constructors only check what mypy cannot
(e.g. that ``tool.finished`` has ``error`` exactly when not ``ok``) and raise ValueError: a
failure there is a bug in the gateway, not the client's fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import ClassVar, TypeAlias

from .budget_events import BudgetWarning
from .client_events import AudioFormat, Mode
from .client_tool_events import ClientToolCancelled, ClientToolRequested
from .errors import ErrorCode, ProtocolError
from .json_types import JsonObject, JsonScalar, JsonValue
from .moving_events import Recovery, SessionMoving
from .routing_events import ProviderChanged
from .tool_progress_events import ToolSlow

__all__ = [
    "ConfirmationOutcome",
    "ConfirmationRequested",
    "ConfirmationResolved",
    "EndReason",
    "ErrorEvent",
    "Pong",
    "ResponseDone",
    "ResponseStarted",
    "ResponseStatus",
    "ServerEvent",
    "SessionEnded",
    "SessionLimits",
    "SessionStarted",
    "SessionUpdated",
    "SpeechStarted",
    "TextDelta",
    "ToolErrorInfo",
    "ToolFinished",
    "ToolInfo",
    "ToolStarted",
    "TranscriptDelta",
    "TranscriptDone",
    "TranscriptRole",
]


class ResponseStatus(StrEnum):
    """``response.done.status``."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"  # response.cancel from the client
    INTERRUPTED = "interrupted"  # barge-in: the user started talking
    FAILED = "failed"


class EndReason(StrEnum):
    """``session.ended.reason``."""

    CLIENT = "client"
    INTENT = "intent"
    IDLE_TIMEOUT = "idle_timeout"
    MAX_DURATION = "max_duration"
    UPSTREAM_FAILED = "upstream_failed"
    SHUTDOWN = "shutdown"
    ERROR = "error"
    # Extensions (docs/keys.md): a limit of the key, user or team ran out; the key was revoked.
    BUDGET_EXHAUSTED = "budget_exhausted"
    KEY_REVOKED = "key_revoked"


class ConfirmationOutcome(StrEnum):
    """``confirmation.resolved.decision`` (past tense, unlike the client's ``Decision``)."""

    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


class TranscriptRole(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInfo:
    """One entry of ``session.started.tools``."""

    name: str
    summary: str
    category: str  # retrieval | action | utility (docs/tools.md section 2)
    requires_confirmation: bool
    background: bool = False  # extension (10.14): sent only when true

    def to_dict(self) -> JsonObject:
        info: JsonObject = {
            "name": self.name,
            "summary": self.summary,
            "category": self.category,
            "requires_confirmation": self.requires_confirmation,
        }
        if self.background:
            info["background"] = True
        return info


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionLimits:
    """``session.started.limits``, in seconds."""

    max_duration_s: float
    idle_timeout_s: float

    def to_dict(self) -> JsonObject:
        return {"max_duration_s": self.max_duration_s, "idle_timeout_s": self.idle_timeout_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStarted:
    TYPE: ClassVar[str] = "session.started"

    session_id: str
    resume_token: str
    mode: Mode
    provider: str
    model: str
    registry_version: str
    tools: tuple[ToolInfo, ...]
    audio: AudioFormat
    resumed: bool
    limits: SessionLimits
    recovery: Recovery | None = None  # extension: rebuilt after its node stopped
    # Extension: the input rate the upstream takes natively (a client sending at it is never
    # resampled); None in text mode.
    upstream_input_rate: int | None = None

    def to_dict(self) -> JsonObject:
        audio = self.audio.to_dict()
        if self.upstream_input_rate is not None:
            audio["upstream_input_rate"] = self.upstream_input_rate
        body: JsonObject = {
            "type": self.TYPE,
            "session_id": self.session_id,
            "resume_token": self.resume_token,
            "mode": self.mode,
            "provider": self.provider,
            "model": self.model,
            "registry_version": self.registry_version,
            "tools": [tool.to_dict() for tool in self.tools],
            "audio": audio,
            "resumed": self.resumed,
            "limits": self.limits.to_dict(),
        }
        if self.recovery is not None:
            body["recovery"] = self.recovery.to_dict()
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseStarted:
    TYPE: ClassVar[str] = "response.started"

    response_id: str

    def to_dict(self) -> JsonObject:
        return {"type": self.TYPE, "response_id": self.response_id}


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """Text-mode output of the assistant."""

    TYPE: ClassVar[str] = "text.delta"

    response_id: str
    delta: str

    def to_dict(self) -> JsonObject:
        return {"type": self.TYPE, "response_id": self.response_id, "delta": self.delta}


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptDelta:
    TYPE: ClassVar[str] = "transcript.delta"

    role: TranscriptRole
    delta: str
    response_id: str | None = None  # assistant transcripts only

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE, "role": self.role}
        if self.response_id is not None:
            body["response_id"] = self.response_id
        body["delta"] = self.delta
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptDone:
    TYPE: ClassVar[str] = "transcript.done"

    role: TranscriptRole
    text: str
    response_id: str | None = None  # assistant transcripts only

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE, "role": self.role}
        if self.response_id is not None:
            body["response_id"] = self.response_id
        body["text"] = self.text
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechStarted:
    """The user started talking: the client stops playback now."""

    TYPE: ClassVar[str] = "speech.started"

    def to_dict(self) -> JsonObject:
        return {"type": self.TYPE}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseDone:
    TYPE: ClassVar[str] = "response.done"

    response_id: str
    status: ResponseStatus
    text: str  # full text (text mode) or assistant transcript (voice); "" when suppressed
    usage: JsonObject | None = None

    def to_dict(self) -> JsonObject:
        body: JsonObject = {
            "type": self.TYPE,
            "response_id": self.response_id,
            "status": self.status,
            "text": self.text,
        }
        if self.usage is not None:
            body["usage"] = self.usage
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted:
    TYPE: ClassVar[str] = "tool.started"

    call_id: str
    name: str
    arguments: JsonObject  # redacted, without confirmation_id
    background: bool = False  # extension (10.14): sent only when true

    def to_dict(self) -> JsonObject:
        event: JsonObject = {
            "type": self.TYPE,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
        }
        if self.background:
            event["background"] = True
        return event


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolErrorInfo:
    """``tool.finished.error``: the same ``type`` the model received, and a safe message."""

    type: str
    message: str

    def to_dict(self) -> JsonObject:
        return {"type": self.type, "message": self.message}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished:
    TYPE: ClassVar[str] = "tool.finished"

    call_id: str
    name: str
    ok: bool
    duration_ms: int
    intents: tuple[str, ...] = ()  # intent type names, e.g. "END_VOICE_SESSION"
    data: JsonValue = None  # projected through the tool's resultAllowlist; only when ok
    error: ToolErrorInfo | None = None  # only when not ok

    def __post_init__(self) -> None:
        if self.ok == (self.error is not None):
            raise ValueError("tool.finished carries 'error' exactly when 'ok' is false")
        if not self.ok and self.data is not None:
            raise ValueError("tool.finished carries 'data' only when 'ok' is true")

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE}
        body.update(self.payload())
        return body

    def payload(self) -> JsonObject:
        """The fields without ``type``: also the ``result`` of ``confirmation.resolved``."""
        body: JsonObject = {"call_id": self.call_id, "name": self.name, "ok": self.ok}
        if self.error is None:
            body["data"] = self.data
        else:
            body["error"] = self.error.to_dict()
        body["duration_ms"] = self.duration_ms
        body["intents"] = list(self.intents)
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmationRequested:
    TYPE: ClassVar[str] = "confirmation.requested"

    confirmation_id: str
    call_id: str
    tool: str
    prompt: str  # a sentence to show or read back
    parameters: JsonObject
    sensitivity: str  # low | medium | high | critical (docs/tools.md section 2)
    expires_at: datetime  # timezone-aware; sent as ISO 8601 UTC, e.g. 2025-01-31T12:00:00.000Z

    def __post_init__(self) -> None:
        if self.expires_at.utcoffset() is None:
            raise ValueError("confirmation.requested 'expires_at' must be timezone-aware")

    def to_dict(self) -> JsonObject:
        return {
            "type": self.TYPE,
            "confirmation_id": self.confirmation_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "prompt": self.prompt,
            "parameters": self.parameters,
            "sensitivity": self.sensitivity,
            "expires_at": _iso_utc(self.expires_at),
        }


def _iso_utc(moment: datetime) -> str:
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.removesuffix("+00:00") + "Z"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmationResolved:
    TYPE: ClassVar[str] = "confirmation.resolved"

    confirmation_id: str
    decision: ConfirmationOutcome
    result: ToolFinished | None = None  # the approved call's tool.finished; sent when approved

    def to_dict(self) -> JsonObject:
        body: JsonObject = {
            "type": self.TYPE,
            "confirmation_id": self.confirmation_id,
            "decision": self.decision,
        }
        if self.result is not None:
            body["result"] = self.result.payload()
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionUpdated:
    TYPE: ClassVar[str] = "session.updated"

    mode: Mode
    audio: AudioFormat | None = None  # extension: after a change of the input rate
    # Extensions (10.18): after a change of either, both as they are now (wire forms).
    turn_detection: str | JsonObject | None = None
    tool_choice: str | JsonObject | None = None

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE, "mode": self.mode}
        if self.audio is not None:
            body["audio"] = self.audio.to_dict()
        if self.turn_detection is not None:
            body["turn_detection"] = self.turn_detection
        if self.tool_choice is not None:
            body["tool_choice"] = self.tool_choice
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEnded:
    """Always the last event of a session."""

    TYPE: ClassVar[str] = "session.ended"

    reason: EndReason
    detail: str | None = None
    usage: JsonObject | None = None
    budget: JsonObject | None = None  # budget_exhausted: the limit that ran out

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE, "reason": self.reason}
        if self.detail is not None:
            body["detail"] = self.detail
        if self.usage is not None:
            body["usage"] = self.usage
        if self.budget is not None:
            body["budget"] = self.budget
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent:
    """The ``error`` event. ``fatal``: the session ends after it."""

    TYPE: ClassVar[str] = "error"

    code: ErrorCode
    message: str
    retryable: bool = False
    fatal: bool = False
    event_id: str | None = None  # the client event that caused it, if any

    @classmethod
    def from_error(cls, error: ProtocolError) -> ErrorEvent:
        return cls(
            code=error.code,
            message=error.message,
            retryable=error.retryable,
            fatal=error.fatal,
            event_id=error.event_id,
        )

    def to_dict(self) -> JsonObject:
        body: JsonObject = {
            "type": self.TYPE,
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "fatal": self.fatal,
        }
        if self.event_id is not None:
            body["event_id"] = self.event_id
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class Pong:
    """The answer to ``ping``: ``id`` echoed as given (null when the ping had none)."""

    TYPE: ClassVar[str] = "pong"

    id: JsonScalar = None

    def to_dict(self) -> JsonObject:
        return {"type": self.TYPE, "id": self.id}


ServerEvent: TypeAlias = (
    SessionStarted
    | ResponseStarted
    | TextDelta
    | TranscriptDelta
    | TranscriptDone
    | SpeechStarted
    | ResponseDone
    | ToolStarted
    | ToolFinished
    | ConfirmationRequested
    | ConfirmationResolved
    | SessionUpdated
    | SessionEnded
    | ErrorEvent
    | Pong
    | SessionMoving
    | ToolSlow
    | ClientToolRequested
    | ClientToolCancelled
    | BudgetWarning
    | ProviderChanged
)
"""Every event the gateway sends in a text frame (assistant audio goes in binary frames)."""
