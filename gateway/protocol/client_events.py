"""Client → gateway events (docs/protocol.md section 5) as frozen dataclasses that validate
themselves.

Theory of operation: the decoder (``decode.py``) checks JSON *types* and builds these events;
each constructor then checks the *values* the protocol constrains (allowed choices, ranges,
lengths, whole 16-bit samples) and raises :class:`ProtocolError` (``invalid_event`` naming the
field, or ``invalid_audio``). So an event that exists is a valid one, whoever built it. Enum
fields accept their plain string values and store the enum member. ``to_dict`` goes the other
way, for Python clients and tests.

Defaults where sections 1 to 9 of docs/protocol.md leave the choice to the server (10.1):

- ``audio`` absent, or one of its rates absent: input 16000 Hz, output 24000 Hz.
- A JSON ``null`` for an optional field means the same as leaving the field out.
- ``provider``, ``model``, ``voice``, ``instructions``, ``locale`` absent (None): the server's
  defaults. ``tools`` absent (None): every tool the user may use; an empty list: no tools.
  ``provider`` names one of this build's providers (``gateway.providers``).
- Identifiers (``response_id``, ``confirmation_id``, resume ids, tool names) must be non-empty;
  free text (``model``, ``reason``, …) may be any string.
- ``audio.append`` with no samples is ``invalid_audio``, like an empty binary frame.
- ``tool_dialect`` is an extension for provider tool-calling styles; absent means native.
- ``client_tools`` (extension, ``client_tool_events``): tools the client runs itself; absent
  (None) or empty: none.
- ``turn_detection`` and ``tool_choice`` (extensions, ``turn_options``): absent (None) on
  ``session.start``: server turns and ``auto``; on ``session.update``: unchanged.
- ``audio.commit.respond`` (extension): absent means true (the model answers the utterance).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, TypeAlias

from gateway.providers import PROVIDERS

from ._field_checks import (
    choice,
    describe_choices,
    invalid_field,
    require_non_empty,
    with_event_id,
)
from .client_tool_events import ClientToolDeclaration, ClientToolOutput, check_client_tools
from .confirmation_events import ConfirmationRespond, Decision
from .errors import ErrorCode, ProtocolError
from .json_types import JsonObject, JsonScalar
from .turn_options import (
    ResponseCreate,
    ToolChoice,
    TurnDetection,
    add_turn_options,
    checked_turn_options,
)

__all__ = [
    "ALLOWED_SAMPLE_RATES",
    "DEFAULT_INPUT_RATE",
    "DEFAULT_OUTPUT_RATE",
    "MAX_METADATA_PAIRS",
    "MAX_TEXT_CHARS",
    "AudioAppend",
    "AudioClear",
    "AudioCommit",
    "AudioFormat",
    "AudioPlayback",
    "BinaryAudio",
    "ClientEvent",
    "ConfirmationRespond",
    "Decision",
    "JsonClientEvent",
    "Mode",
    "Ping",
    "ResponseCancel",
    "Resume",
    "SessionEnd",
    "SessionStart",
    "SessionUpdate",
    "TextSend",
    "ToolDialect",
]

ALLOWED_SAMPLE_RATES: tuple[int, ...] = (8000, 16000, 24000, 48000)
DEFAULT_INPUT_RATE = 16000
DEFAULT_OUTPUT_RATE = 24000
MAX_TEXT_CHARS = 16_000
MAX_METADATA_PAIRS = 16
_G711_ENCODINGS = ("pcmu", "pcma")  # a phone call's µ-law or A-law: 8000 Hz both ways


class Mode(StrEnum):
    VOICE = "voice"
    TEXT = "text"


class ToolDialect(StrEnum):
    """How tools are offered to the model (extension; None means the provider's native way)."""

    NATIVE = "native"
    INLINE = "inline"
    JSON = "json"


def provider_checked(value: object, *, event_type: str, event_id: str | None) -> str:
    """``value`` as the name of one of this build's providers."""
    if not isinstance(value, str) or value not in PROVIDERS:
        allowed = describe_choices(PROVIDERS.names())
        raise invalid_field(event_type, "provider", f"must be {allowed}", event_id)
    return str(value)


def _check_whole_samples(pcm: bytes, event_type: str, event_id: str | None) -> None:
    if not pcm:
        raise ProtocolError(
            ErrorCode.INVALID_AUDIO, f"{event_type}: audio holds no samples", event_id=event_id
        )
    if len(pcm) % 2:
        raise ProtocolError(
            ErrorCode.INVALID_AUDIO,
            f"{event_type}: PCM16 audio must have an even number of bytes, got {len(pcm)}",
            event_id=event_id,
        )


def _check_turn_options(
    event: SessionStart | SessionUpdate, event_type: str, event_id: str | None
) -> None:
    """``turn_detection`` and ``tool_choice`` checked, and kept as their neutral values."""
    turns, choice = checked_turn_options(
        event.turn_detection, event.tool_choice, event_type=event_type, event_id=event_id
    )
    object.__setattr__(event, "turn_detection", turns)
    object.__setattr__(event, "tool_choice", choice)


def _check_rate(rate: int, field_name: str) -> None:
    # type() rather than isinstance(): True is an int but never a sample rate.
    if type(rate) is not int or rate not in ALLOWED_SAMPLE_RATES:
        allowed = ", ".join(str(r) for r in ALLOWED_SAMPLE_RATES)
        raise invalid_field(SessionStart.TYPE, field_name, f"must be one of {allowed}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioFormat:
    """Mono sample rates of the session, in Hz (shared by session.start/started).

    ``encoding`` is PCM16 for every client of the protocol (``session.start`` cannot choose
    another); a phone bridge opens its sessions with G.711 at 8 kHz, µ-law (``"pcmu"``) or A-law
    (``"pcma"``), which an upstream that takes that law itself receives untouched."""

    input_rate: int = DEFAULT_INPUT_RATE
    output_rate: int = DEFAULT_OUTPUT_RATE
    encoding: str = "pcm16"

    def __post_init__(self) -> None:
        _check_rate(self.input_rate, "audio.input_rate")
        _check_rate(self.output_rate, "audio.output_rate")
        encoding, where = self.encoding, "audio.encoding"
        if encoding not in ("pcm16", *_G711_ENCODINGS):
            raise invalid_field(SessionStart.TYPE, where, 'must be "pcm16", "pcmu" or "pcma"')
        if encoding in _G711_ENCODINGS and (self.input_rate, self.output_rate) != (8000, 8000):
            raise invalid_field(SessionStart.TYPE, where, f"{encoding} is 8000 Hz both ways")

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"input_rate": self.input_rate, "output_rate": self.output_rate}
        if self.encoding != "pcm16":
            body["encoding"] = self.encoding
        return body


@dataclass(frozen=True, slots=True, kw_only=True)
class Resume:
    """``session.start.resume``: the ids of the session to pick up again."""

    session_id: str
    resume_token: str

    def __post_init__(self) -> None:
        require_non_empty(
            self.session_id, event_type=SessionStart.TYPE, field_name="resume.session_id"
        )
        require_non_empty(
            self.resume_token, event_type=SessionStart.TYPE, field_name="resume.resume_token"
        )

    def to_dict(self) -> JsonObject:
        return {"session_id": self.session_id, "resume_token": self.resume_token}


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStart:
    """``session.start``: open (or, with ``resume``, pick up) a session; defaults above."""

    TYPE: ClassVar[str] = "session.start"

    mode: Mode
    provider: str | None = None
    model: str | None = None
    voice: str | None = None
    instructions: str | None = None
    locale: str | None = None
    audio: AudioFormat = AudioFormat()
    tools: tuple[str, ...] | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    resume: Resume | None = None
    tool_dialect: ToolDialect | None = None
    client_tools: tuple[ClientToolDeclaration, ...] = ()
    turn_detection: TurnDetection | None = None
    tool_choice: ToolChoice | None = None
    event_id: str | None = None

    def __post_init__(self) -> None:
        event_type, event_id = self.TYPE, self.event_id
        object.__setattr__(self, "client_tools", check_client_tools(self.client_tools, event_id))
        _check_turn_options(self, event_type, event_id)
        mode = choice(Mode, self.mode, event_type=event_type, field_name="mode", event_id=event_id)
        object.__setattr__(self, "mode", mode)
        if self.provider is not None:
            provider = provider_checked(self.provider, event_type=event_type, event_id=event_id)
            object.__setattr__(self, "provider", provider)
        if self.tool_dialect is not None:
            dialect = choice(
                ToolDialect,
                self.tool_dialect,
                event_type=event_type,
                field_name="tool_dialect",
                event_id=event_id,
            )
            object.__setattr__(self, "tool_dialect", dialect)
        if self.tools is not None:
            object.__setattr__(self, "tools", tuple(self.tools))
            for index, name in enumerate(self.tools):
                require_non_empty(
                    name, event_type=event_type, field_name=f"tools[{index}]", event_id=event_id
                )
        if len(self.metadata) > MAX_METADATA_PAIRS:
            raise invalid_field(
                self.TYPE,
                "metadata",
                f"must have at most {MAX_METADATA_PAIRS} entries",
                self.event_id,
            )
        for key, value in self.metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise invalid_field(
                    self.TYPE, "metadata", "must map strings to strings", self.event_id
                )

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE, "mode": self.mode.value}
        optional_strings = {
            "provider": self.provider,
            "model": self.model,
            "voice": self.voice,
            "instructions": self.instructions,
            "locale": self.locale,
            "tool_dialect": self.tool_dialect,
        }
        body.update({name: value for name, value in optional_strings.items() if value is not None})
        body["audio"] = self.audio.to_dict()
        if self.tools is not None:
            body["tools"] = list(self.tools)
        if self.metadata:
            body["metadata"] = dict(self.metadata)
        if self.resume is not None:
            body["resume"] = self.resume.to_dict()
        if self.client_tools:
            body["client_tools"] = [tool.to_dict() for tool in self.client_tools]
        add_turn_options(body, self.turn_detection, self.tool_choice)
        return with_event_id(body, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class BinaryAudio:
    """A binary frame: the user's microphone as PCM16 LE mono at the session's input rate."""

    pcm: bytes

    def __post_init__(self) -> None:
        _check_whole_samples(self.pcm, "binary frame", None)


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioAppend:
    """``audio.append``: the same as a binary frame, for clients that cannot send one."""

    TYPE: ClassVar[str] = "audio.append"

    audio: bytes  # decoded from base64 by the decoder
    event_id: str | None = None

    def __post_init__(self) -> None:
        _check_whole_samples(self.audio, self.TYPE, self.event_id)

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE, "audio": base64.b64encode(self.audio).decode()}
        return with_event_id(body, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioCommit:
    """``audio.commit``: the end of the user's utterance (push-to-talk). ``respond`` False
    (extension): the utterance is committed and the model does not answer it yet
    (``response.create`` asks it to)."""

    TYPE: ClassVar[str] = "audio.commit"

    respond: bool = True
    event_id: str | None = None

    def __post_init__(self) -> None:
        if type(self.respond) is not bool:
            raise invalid_field(self.TYPE, "respond", "must be true or false", self.event_id)

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE}
        if not self.respond:
            body["respond"] = False
        return with_event_id(body, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioClear:
    """``audio.clear``: drop buffered, uncommitted user audio."""

    TYPE: ClassVar[str] = "audio.clear"

    event_id: str | None = None

    def to_dict(self) -> JsonObject:
        return with_event_id({"type": self.TYPE}, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioPlayback:
    """``audio.playback``: how much of a response's audio the client really played."""

    TYPE: ClassVar[str] = "audio.playback"

    response_id: str
    played_ms: int
    event_id: str | None = None

    def __post_init__(self) -> None:
        require_non_empty(
            self.response_id, event_type=self.TYPE, field_name="response_id", event_id=self.event_id
        )
        if type(self.played_ms) is not int or self.played_ms < 0:
            raise invalid_field(self.TYPE, "played_ms", "must be an integer >= 0", self.event_id)

    def to_dict(self) -> JsonObject:
        body: JsonObject = {
            "type": self.TYPE,
            "response_id": self.response_id,
            "played_ms": self.played_ms,
        }
        return with_event_id(body, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextSend:
    """``text.send``: a user text message (1 to 16,000 characters)."""

    TYPE: ClassVar[str] = "text.send"

    text: str
    event_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not 1 <= len(self.text) <= MAX_TEXT_CHARS:
            raise invalid_field(
                self.TYPE, "text", f"must be 1 to {MAX_TEXT_CHARS} characters", self.event_id
            )

    def to_dict(self) -> JsonObject:
        return with_event_id({"type": self.TYPE, "text": self.text}, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseCancel:
    """``response.cancel``: stop the assistant's current response (manual barge-in)."""

    TYPE: ClassVar[str] = "response.cancel"

    event_id: str | None = None

    def to_dict(self) -> JsonObject:
        return with_event_id({"type": self.TYPE}, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionUpdate:
    """``session.update``: switch mode, instructions and/or the input rate mid-session (at least
    one). ``input_rate`` (``audio.input_rate`` on the wire, an extension): the client's binary
    audio from here on is at this rate (a browser that learnt ``upstream_input_rate``)."""

    TYPE: ClassVar[str] = "session.update"

    mode: Mode | None = None
    instructions: str | None = None
    input_rate: int | None = None
    turn_detection: TurnDetection | None = None
    tool_choice: ToolChoice | None = None
    event_id: str | None = None

    def __post_init__(self) -> None:
        given = (self.mode, self.instructions, self.input_rate)
        turn_options = (self.turn_detection, self.tool_choice)
        if all(value is None for value in (*given, *turn_options)):
            raise ProtocolError(
                ErrorCode.INVALID_EVENT,
                f"{self.TYPE}: 'mode', 'instructions', 'audio.input_rate', 'turn_detection' or "
                "'tool_choice' is required",
                event_id=self.event_id,
            )
        _check_turn_options(self, self.TYPE, self.event_id)
        if self.input_rate is not None and (
            type(self.input_rate) is not int or self.input_rate not in ALLOWED_SAMPLE_RATES
        ):
            allowed = ", ".join(str(r) for r in ALLOWED_SAMPLE_RATES)
            raise invalid_field(
                self.TYPE, "audio.input_rate", f"must be one of {allowed}", self.event_id
            )
        if self.mode is not None:
            mode = choice(
                Mode, self.mode, event_type=self.TYPE, field_name="mode", event_id=self.event_id
            )
            object.__setattr__(self, "mode", mode)

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE}
        if self.mode is not None:
            body["mode"] = self.mode.value
        if self.instructions is not None:
            body["instructions"] = self.instructions
        if self.input_rate is not None:
            body["audio"] = {"input_rate": self.input_rate}
        add_turn_options(body, self.turn_detection, self.tool_choice)
        return with_event_id(body, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEnd:
    """``session.end``: the client ends the session."""

    TYPE: ClassVar[str] = "session.end"

    reason: str | None = None
    event_id: str | None = None

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE}
        if self.reason is not None:
            body["reason"] = self.reason
        return with_event_id(body, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping:
    """``ping``: answered by ``pong`` echoing ``id``, whatever JSON scalar it was (or null)."""

    TYPE: ClassVar[str] = "ping"

    id: JsonScalar = None
    event_id: str | None = None

    def __post_init__(self) -> None:
        if self.id is not None and not isinstance(self.id, str | int | float | bool):
            raise invalid_field(
                self.TYPE, "id", "must be a string, number, boolean or null", self.event_id
            )

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE}
        if self.id is not None:
            body["id"] = self.id
        return with_event_id(body, self.event_id)


JsonClientEvent: TypeAlias = (
    SessionStart
    | AudioAppend
    | AudioCommit
    | AudioClear
    | AudioPlayback
    | TextSend
    | ResponseCreate
    | ResponseCancel
    | ConfirmationRespond
    | SessionUpdate
    | SessionEnd
    | Ping
    | ClientToolOutput
)
"""Every event a client sends in a text frame."""

ClientEvent: TypeAlias = JsonClientEvent | BinaryAudio
"""Everything a client sends: text-frame events and binary audio frames."""
