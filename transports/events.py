"""Neutral upstream events: what any provider told us, in one vocabulary.

Transports decode their wire format into these past-tense facts; the session never sees a
provider's own event names. The union is closed except for ``Unknown``, which carries anything a
provider added without notice instead of raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "AudioDelta",
    "RequestedCall",
    "ResponseDone",
    "ResponseStarted",
    "ResponseStatus",
    "SpeechStarted",
    "SpeechStopped",
    "TextDelta",
    "ToolCallsCancelled",
    "ToolCallsRequested",
    "TranscriptDelta",
    "TranscriptDone",
    "Unknown",
    "UpstreamEvent",
    "UpstreamFailed",
    "UpstreamNotice",
    "UpstreamRecovered",
    "UpstreamReplaced",
    "UserInputTranscribed",
]

Role = Literal["user", "assistant"]
ResponseStatus = Literal["completed", "cancelled", "interrupted", "failed"]


@dataclass(frozen=True, slots=True)
class ResponseStarted:
    response_id: str
    type: Literal["response.started"] = "response.started"
    # Said outside the conversation (a holding line): the model will not remember it.
    aside: bool = False


@dataclass(frozen=True, slots=True)
class AudioDelta:
    """Assistant speech, PCM16 mono at the transport's ``Capabilities.output_rate``.

    ``encoded``: the same audio as the upstream sent it, standard base64 (strictly valid), so
    that a client that takes base64 gets it as is when nothing converts the audio."""

    response_id: str
    pcm: bytes
    type: Literal["audio.delta"] = "audio.delta"
    encoded: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    response_id: str
    delta: str
    type: Literal["text.delta"] = "text.delta"


@dataclass(frozen=True, slots=True)
class TranscriptDelta:
    role: Role
    delta: str
    response_id: str | None = None
    type: Literal["transcript.delta"] = "transcript.delta"


@dataclass(frozen=True, slots=True)
class TranscriptDone:
    role: Role
    text: str
    response_id: str | None = None
    type: Literal["transcript.done"] = "transcript.done"


@dataclass(frozen=True, slots=True)
class UserInputTranscribed:
    """The provider's final transcript of a user utterance (the user's 'last words')."""

    text: str
    type: Literal["user.transcribed"] = "user.transcribed"


@dataclass(frozen=True, slots=True)
class RequestedCall:
    call_id: str
    name: str
    # A JSON string (OpenAI, chat) or an object (Gemini); parsed once, by the tool runner.
    arguments: str | Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class ToolCallsRequested:
    """One batch: every call of a response (OpenAI) or of one ``toolCall`` message (Gemini)."""

    response_id: str
    calls: tuple[RequestedCall, ...]
    type: Literal["tool_calls.requested"] = "tool_calls.requested"


@dataclass(frozen=True, slots=True)
class ToolCallsCancelled:
    call_ids: tuple[str, ...]
    type: Literal["tool_calls.cancelled"] = "tool_calls.cancelled"


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The provider heard the user start talking: barge-in."""

    type: Literal["speech.started"] = "speech.started"


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    type: Literal["speech.stopped"] = "speech.stopped"


@dataclass(frozen=True, slots=True)
class ResponseDone:
    response_id: str
    status: ResponseStatus
    usage: Mapping[str, Any] | None = None
    type: Literal["response.done"] = "response.done"


@dataclass(frozen=True, slots=True)
class UpstreamNotice:
    """A non-fatal upstream error or warning (e.g. a response already active)."""

    code: str
    message: str
    # Trying again later may work (a rate limit, a provider outage), as the client is told.
    retryable: bool = False
    type: Literal["upstream.notice"] = "upstream.notice"


@dataclass(frozen=True, slots=True)
class UpstreamRecovered:
    """The transport reconnected by itself; the client must not notice."""

    attempts: int
    # From the loss to the new connection's readiness (a trace's reconnect span).
    downtime_s: float = 0.0
    type: Literal["upstream.recovered"] = "upstream.recovered"


@dataclass(frozen=True, slots=True)
class UpstreamFailed:
    """The upstream is gone for good (retries exhausted or a fatal error): the session ends."""

    message: str
    retryable: bool = False
    type: Literal["upstream.failed"] = "upstream.failed"


@dataclass(frozen=True, slots=True)
class UpstreamReplaced:
    """Another upstream serves the session from here on (a failover): what follows comes
    from it, at its own rates and encoding (``Transport.capabilities`` says them now)."""

    provider: str
    model: str | None
    voice: str | None
    reason: str  # what ended the previous one: connect, lost, stall_first_output, ...
    previous: str  # the previous target, ``provider/model``
    type: Literal["upstream.replaced"] = "upstream.replaced"


@dataclass(frozen=True, slots=True)
class Unknown:
    raw: Any = field(repr=False)
    type: Literal["unknown"] = "unknown"


UpstreamEvent = (
    ResponseStarted
    | AudioDelta
    | TextDelta
    | TranscriptDelta
    | TranscriptDone
    | UserInputTranscribed
    | ToolCallsRequested
    | ToolCallsCancelled
    | SpeechStarted
    | SpeechStopped
    | ResponseDone
    | UpstreamNotice
    | UpstreamRecovered
    | UpstreamFailed
    | UpstreamReplaced
    | Unknown
)
