"""The neutral transport interface every upstream implements, and its ``Capabilities`` record.

The session talks to a ``Transport`` only through these methods and reads ``events()``; it checks
``Capabilities`` instead of asking which provider it has. Audio crosses this boundary as PCM16
mono at the transport's own rates (``Capabilities``); the session resamples for the client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from transports.events import AudioDelta, UpstreamEvent

__all__ = [
    "AudioEncoding",
    "Capabilities",
    "ConversationItem",
    "DirectAudio",
    "ForcedTool",
    "HoldingLines",
    "Prewarm",
    "ScheduledResults",
    "ToolChoice",
    "ToolDeclaration",
    "ToolResult",
    "Transport",
    "TransportError",
    "TurnDetection",
    "UpstreamConfig",
    "WarmUpstream",
    "follow_up_choice",
]

Mode = Literal["voice", "text"]
# How audio bytes code samples: PCM16 little-endian (two bytes a sample), or G.711 at 8 kHz,
# µ-law or A-law (one byte a sample), which telephony carries and some providers take as it is.
AudioEncoding = Literal["pcm16", "pcmu", "pcma"]
# When a background call's result enters the conversation: at once, cutting what the model says;
# once the model is idle; or silently, as context the model does not answer.
Delivery = Literal["interrupt", "when_idle", "silent"]


class TransportError(Exception):
    """The root of what transports raise: ``connect`` when the upstream session cannot be
    opened, and the errors of the wire formats below (local scenarios; the phone edge's Twilio
    messages too). ``rfc6455``'s errors become one at the transport's boundary. The gateway
    translates it at its boundary (``gateway.errors``)."""

    def __init__(self, message: str, *, retryable: bool = False, code: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.code = code  # the provider's close code, when it closed the connection


@dataclass(frozen=True, slots=True)
class Capabilities:
    input_rate: int
    output_rate: int
    # The provider detects the user's speech itself (server VAD); else audio.commit ends a turn.
    server_vad: bool = False
    # ``truncate`` tells the provider how much of a response the user actually heard.
    truncation: bool = False
    # Reconnects transparently (resumption handle or context replay).
    resumable: bool = False
    modes: frozenset[str] = frozenset({"voice", "text"})
    # The audio bytes ``send_audio`` takes and ``AudioDelta`` carries, both ways.
    encoding: AudioEncoding = "pcm16"
    # The answer to a batch of calls comes in the response that made them (an agent loop),
    # whose end is then the reply; else the answer is a new response.
    answers_calls_in_response: bool = False


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    name: str
    description: str
    # The registry's per-provider declarations (``providerSchemas``), picked by the transport.
    provider_schemas: Mapping[str, Any]
    # Its work may outlive the turn: the model does not wait for its result.
    background: bool = False


@dataclass(frozen=True, slots=True)
class ConversationItem:
    """One turn of history, for replay after a reconnect or on resume."""

    role: Literal["user", "assistant", "tool"]
    text: str


@dataclass(frozen=True, slots=True)
class TurnDetection:
    """Who ends the user's voice turns.

    Server (the default): the provider's voice activity detection ends each turn and the model
    answers it by itself; speech cuts a reply. ``settings``: OpenAI Realtime's own
    ``turn_detection`` object (``type`` ``server_vad`` | ``semantic_vad`` and its tuning),
    given as is to that provider; the others use their own detector's defaults.
    Manual (push-to-talk): no detector; only ``commit_audio`` ends a turn, and the model
    answers when asked (``commit_audio(respond=True)`` or ``request_response``)."""

    manual: bool = False
    settings: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ForcedTool:
    """``tool_choice`` naming one tool: the model must call it."""

    name: str


# Whether the model may call tools in its reply to a user turn: ``auto`` (it decides),
# ``none`` (it may not), ``required`` (it must call one), or one tool it must call.
ToolChoice: TypeAlias = Literal["auto", "none", "required"] | ForcedTool


def follow_up_choice(choice: ToolChoice) -> ToolChoice:
    """The choice for the reply that follows tool results: a call that is forced again would
    never let the model answer (it would loop), so ``required`` and a forced tool are ``auto``
    there."""
    return "none" if choice == "none" else "auto"


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    mode: Mode
    instructions: str
    tools: Sequence[ToolDeclaration]
    # The client's audio rates; transports that can produce any rate (local) may match them.
    client_input_rate: int = 16000
    client_output_rate: int = 24000
    # The client's audio encoding (G.711 µ-law or A-law: a phone call); a transport whose
    # provider takes it as it is says so in its capabilities, and the audio then passes
    # untouched both ways.
    client_encoding: AudioEncoding = "pcm16"
    model: str | None = None
    voice: str | None = None
    locale: str | None = None
    session_id: str = ""
    history: Sequence[ConversationItem] = field(default_factory=tuple)
    turn_detection: TurnDetection = TurnDetection()
    tool_choice: ToolChoice = "auto"
    # Provider-specific extras (e.g. the chat transport's tool dialect).
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    name: str
    # The whole ToolResponse envelope; the transport serialises it as its provider wants.
    envelope: Mapping[str, Any]
    # Only the acknowledgement of a background call (its result follows later): a transport
    # whose provider runs such calls natively (``ScheduledResults``) sends nothing for it.
    acknowledgement: bool = False


class Transport(Protocol):
    """One upstream model session. Every method may be called from the session's tasks only."""

    capabilities: Capabilities

    async def connect(self, config: UpstreamConfig) -> None:
        """Open the upstream session; raises ``TransportError`` if it cannot."""
        ...

    def events(self) -> AsyncIterator[UpstreamEvent]:
        """Neutral events until the transport closes; ends after ``UpstreamFailed`` or close."""
        ...

    async def send_audio(self, pcm: bytes) -> None:
        """User audio, PCM16 at ``capabilities.input_rate``."""
        ...

    async def commit_audio(self, *, respond: bool = True) -> None:
        """End of the user's utterance (push-to-talk): the model answers, unless ``respond`` is
        False (the utterance is committed; ``request_response`` asks for the answer)."""
        ...

    async def request_response(self) -> None:
        """The model answers now: what the user said (and committed) since its last reply."""
        ...

    async def clear_audio(self) -> None: ...

    async def send_text(self, text: str) -> None:
        """A user message; the model answers."""
        ...

    async def add_context(self, text: str) -> None:
        """Give the model input without asking it to answer (a pending message)."""
        ...

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        """Results of one batch; the transport decides when the model continues."""
        ...

    async def send_late_result(self, result: ToolResult) -> None:
        """A result the model no longer waits for (a confirmation the client approved or
        rejected, or a call that finished on the node a session moved from): give it to the
        model as new input and let it tell the user."""
        ...

    async def cancel_response(self) -> None: ...

    async def truncate(self, response_id: str, played_ms: int) -> None:
        """The user heard only ``played_ms`` of that response's audio."""
        ...

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        """Change what is given (None: unchanged) from the next input on."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class DirectAudio(Protocol):
    """What a transport may add for the audio hot path: audio crossing without a task switch.

    - ``set_audio_sink``: each ``AudioDelta`` goes to the sink as the transport reads it, when
      no other event is queued before it; the sink returns False to have it queued after all.
    - ``accepts_audio_now`` / ``send_audio_now``: user audio handed over synchronously; while
      the upstream cannot take it at once (a full socket), ``accepts_audio_now`` says no and the
      audio takes ``send_audio``, whose await holds the client back.
    """

    def set_audio_sink(self, sink: Callable[[AudioDelta], bool] | None) -> None: ...

    def accepts_audio_now(self) -> bool: ...

    def send_audio_now(self, pcm: bytes, encoded: str | None = None) -> None:
        """``encoded``: the same audio as standard base64, when the client sent it so (an
        OpenAI-protocol client's own string): a transport that sends base64 may send it as
        is rather than encode the bytes again."""
        ...


@runtime_checkable
class ScheduledResults(Protocol):
    """A provider that runs background calls natively (Gemini Live's ``NON_BLOCKING``
    declarations): the model goes on by itself, and the result is sent when ready with the
    provider's own scheduling. Without it, the session does the timing (``send_late_result``
    once idle or after cancelling the reply, ``add_context`` for a silent one)."""

    async def send_scheduled_result(self, result: ToolResult, delivery: Delivery) -> None: ...


class WarmUpstream(Protocol):
    """An upstream connection opened before the session it will serve is known (a pool's)."""

    @property
    def alive(self) -> bool:
        """Still open (the provider may close an idle connection)."""
        ...

    async def wait_closed(self) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class Prewarm(Protocol):
    """A transport whose provider lets a connection be opened before its session's
    configuration is known: ``open_warm`` opens one (for a pool), ``connect_warm`` is
    ``connect`` on it. What is left at the session's start is the configuration itself."""

    async def open_warm(self, model: str | None) -> WarmUpstream: ...

    async def connect_warm(self, config: UpstreamConfig, warm: WarmUpstream) -> None: ...


@runtime_checkable
class HoldingLines(Protocol):
    """A provider that can speak a short line outside the conversation (OpenAI Realtime's
    out-of-band response): what the caller hears while a slow tool call runs."""

    async def say_holding_line(self, instructions: str) -> bool:
        """Ask for the line; False when it cannot be said now (the model is already talking,
        or the connection is down)."""
        ...
