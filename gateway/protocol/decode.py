"""Decode client frames into events: a frame in, a client event or a ProtocolError out.

Theory of operation. A text frame passes these gates in order; the first that fails decides the
error code:

1. size: more than ``max_bytes`` of UTF-8 → ``payload_too_large`` (before any parsing);
2. JSON: not parseable by orjson → ``invalid_json``;
3. shape: not an object, or no string ``type`` → ``invalid_event``;
4. type: not one of docs/protocol.md section 5 → ``unknown_event`` (the session continues);
5. ``event_id``: present and not a string (or null) → ``invalid_event``;
6. fields: wrong JSON type → ``invalid_event`` naming the field; then the event's constructor
   checks the values (choices, ranges, lengths, whole samples → ``invalid_audio``).

From gate 3 on, every error carries the frame's ``event_id`` whenever it is a string. Fields the
protocol does not know are ignored, so that newer clients work with this gateway. Nothing but
:class:`ProtocolError` ever leaves this module.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

import orjson

from ._field_checks import choice, invalid_field
from .client_events import (
    DEFAULT_INPUT_RATE,
    DEFAULT_OUTPUT_RATE,
    AudioAppend,
    AudioClear,
    AudioCommit,
    AudioFormat,
    AudioPlayback,
    BinaryAudio,
    ConfirmationRespond,
    Decision,
    JsonClientEvent,
    Mode,
    Ping,
    ResponseCancel,
    Resume,
    SessionEnd,
    SessionStart,
    SessionUpdate,
    TextSend,
    ToolDialect,
    provider_checked,
)
from .client_tool_events import (
    ClientToolDeclaration,
    ClientToolOutput,
    declaration_problem,
    no_parameters,
)
from .errors import ErrorCode, ProtocolError
from .turn_options import ResponseCreate

__all__ = [
    "DEFAULT_MAX_BINARY_FRAME_BYTES",
    "DEFAULT_MAX_TEXT_FRAME_BYTES",
    "decode_binary",
    "decode_text",
]

DEFAULT_MAX_TEXT_FRAME_BYTES = 256 * 1024
DEFAULT_MAX_BINARY_FRAME_BYTES = 64 * 1024

# An unknown type is echoed in the error message, but never at length.
_MAX_ECHOED_TYPE_CHARS = 64

_Choice = TypeVar("_Choice", bound=StrEnum)


def decode_text(
    frame: str | bytes, *, max_bytes: int = DEFAULT_MAX_TEXT_FRAME_BYTES
) -> JsonClientEvent:
    """Decode one text frame (a JSON object) into its client event."""
    size = _utf8_size(frame)
    if size > max_bytes:
        raise ProtocolError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"text frame of {size} bytes exceeds the limit of {max_bytes} bytes",
        )
    try:
        message = orjson.loads(frame)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"frame is not valid JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError(ErrorCode.INVALID_EVENT, "an event must be a JSON object")

    raw_event_id = message.get("event_id")
    event_id = raw_event_id if isinstance(raw_event_id, str) else None
    event_type = message.get("type")
    if not isinstance(event_type, str):
        raise ProtocolError(
            ErrorCode.INVALID_EVENT, "an event needs a string 'type'", event_id=event_id
        )
    parse = _PARSERS.get(event_type)
    if parse is None:
        shown = event_type[:_MAX_ECHOED_TYPE_CHARS]
        raise ProtocolError(
            ErrorCode.UNKNOWN_EVENT, f"unknown event type {shown!r}", event_id=event_id
        )
    if raw_event_id is not None and event_id is None:
        raise invalid_field(event_type, "event_id", "must be a string")
    try:
        return parse(_Fields(message, event_type, event_id))
    except ProtocolError as exc:
        # Nested values (audio, resume) validate without knowing which frame they came from.
        if exc.event_id is None:
            exc.event_id = event_id
        raise


def decode_binary(frame: bytes, *, max_bytes: int = DEFAULT_MAX_BINARY_FRAME_BYTES) -> BinaryAudio:
    """Decode one binary frame: PCM16 audio, a whole number of samples, not empty."""
    if len(frame) > max_bytes:
        raise ProtocolError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"binary frame of {len(frame)} bytes exceeds the limit of {max_bytes} bytes",
        )
    return BinaryAudio(pcm=frame)


def _utf8_size(frame: str | bytes) -> int:
    if not isinstance(frame, str):
        return len(frame)
    if frame.isascii():  # O(1) in CPython: the common case costs nothing
        return len(frame)
    # surrogatepass: a lone surrogate must be measured here and rejected by the JSON parser.
    return len(frame.encode("utf-8", "surrogatepass"))


class _Fields:
    """Typed reads of one JSON object's fields; errors name the field (with its path)."""

    __slots__ = ("_event_type", "_message", "_prefix", "event_id")

    def __init__(
        self, message: dict[str, Any], event_type: str, event_id: str | None, prefix: str = ""
    ) -> None:
        self._message = message
        self._event_type = event_type
        self._prefix = prefix
        self.event_id = event_id

    def invalid(self, name: str, problem: str) -> ProtocolError:
        return invalid_field(self._event_type, self._prefix + name, problem, self.event_id)

    def raw(self, name: str) -> Any:
        """The value as parsed, for fields whose event constructor checks the value itself."""
        return self._message.get(name)

    def required_str(self, name: str) -> str:
        value = self._message.get(name)
        if isinstance(value, str):
            return value
        raise self.invalid(name, "is required" if value is None else "must be a string")

    def optional_str(self, name: str) -> str | None:
        value = self._message.get(name)
        if value is None or isinstance(value, str):
            return value
        raise self.invalid(name, "must be a string")

    def required_int(self, name: str, problem: str) -> int:
        value = self._message.get(name)
        if type(value) is int:  # not isinstance: JSON true/false must not count as 1/0
            return value
        raise self.invalid(name, "is required" if value is None else problem)

    def required_choice(self, name: str, enum_type: type[_Choice]) -> _Choice:
        if self._message.get(name) is None:
            raise self.invalid(name, "is required")
        return self._choice(name, enum_type)

    def optional_choice(self, name: str, enum_type: type[_Choice]) -> _Choice | None:
        if self._message.get(name) is None:
            return None
        return self._choice(name, enum_type)

    def _choice(self, name: str, enum_type: type[_Choice]) -> _Choice:
        return choice(
            enum_type,
            self._message[name],
            event_type=self._event_type,
            field_name=self._prefix + name,
            event_id=self.event_id,
        )

    def optional_provider(self, name: str) -> str | None:
        value = self._message.get(name)
        if value is None:
            return None
        return provider_checked(value, event_type=self._event_type, event_id=self.event_id)

    def optional_object(self, name: str) -> dict[str, Any] | None:
        value = self._message.get(name)
        if value is None or isinstance(value, dict):
            return value
        raise self.invalid(name, "must be an object")

    def optional_nested(self, name: str) -> _Fields | None:
        value = self.optional_object(name)
        if value is None:
            return None
        return _Fields(value, self._event_type, self.event_id, f"{self._prefix}{name}.")

    def optional_list(self, name: str) -> list[Any] | None:
        value = self._message.get(name)
        if value is None or isinstance(value, list):
            return value
        raise self.invalid(name, "must be a list")


def _session_start(fields: _Fields) -> SessionStart:
    mode = fields.required_choice("mode", Mode)
    audio = fields.optional_nested("audio")
    resume = fields.optional_nested("resume")
    tools = fields.optional_list("tools")
    return SessionStart(
        mode=mode,
        provider=fields.optional_provider("provider"),
        model=fields.optional_str("model"),
        voice=fields.optional_str("voice"),
        instructions=fields.optional_str("instructions"),
        locale=fields.optional_str("locale"),
        audio=AudioFormat() if audio is None else _audio_format(audio),
        # Entries and metadata values are checked by SessionStart itself.
        tools=None if tools is None else tuple(tools),
        metadata=fields.optional_object("metadata") or {},
        resume=None
        if resume is None
        else Resume(
            session_id=resume.required_str("session_id"),
            resume_token=resume.required_str("resume_token"),
        ),
        tool_dialect=fields.optional_choice("tool_dialect", ToolDialect),
        client_tools=_client_tools(fields),
        # SessionStart checks both and names the field in its error.
        turn_detection=fields.raw("turn_detection"),
        tool_choice=fields.raw("tool_choice"),
        event_id=fields.event_id,
    )


def _client_tools(fields: _Fields) -> tuple[ClientToolDeclaration, ...]:
    """Each declaration checked here, so that the error names its place in the list; the
    list's own rules (how many, no name twice) are ``SessionStart``'s."""
    tools = []
    for index, raw in enumerate(fields.optional_list("client_tools") or []):
        where = f"client_tools[{index}]"
        if not isinstance(raw, dict):
            raise fields.invalid(where, "must be an object")
        name: Any = raw.get("name")
        description, parameters = raw.get("description"), raw.get("parameters")
        if description is None:
            description = ""
        if parameters is None:
            parameters = no_parameters()
        problem = declaration_problem(name, description, parameters)
        if problem is not None:
            part, text = problem
            raise fields.invalid(f"{where}.{part}" if part else where, text)
        tools.append(
            ClientToolDeclaration(name=name, description=description, parameters=parameters)
        )
    return tuple(tools)


def _audio_format(audio: _Fields) -> AudioFormat:
    # AudioFormat checks the rates (type and value) and names the field in its error.
    input_rate = audio.raw("input_rate")
    output_rate = audio.raw("output_rate")
    return AudioFormat(
        input_rate=DEFAULT_INPUT_RATE if input_rate is None else input_rate,
        output_rate=DEFAULT_OUTPUT_RATE if output_rate is None else output_rate,
    )


def _audio_append(fields: _Fields) -> AudioAppend:
    encoded = fields.required_str("audio")
    try:
        pcm = base64.b64decode(encoded, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII characters in the string
        raise fields.invalid("audio", "must be standard base64") from None
    return AudioAppend(audio=pcm, event_id=fields.event_id)


def _audio_playback(fields: _Fields) -> AudioPlayback:
    return AudioPlayback(
        response_id=fields.required_str("response_id"),
        played_ms=fields.required_int("played_ms", "must be an integer >= 0"),
        event_id=fields.event_id,
    )


def _confirmation_respond(fields: _Fields) -> ConfirmationRespond:
    return ConfirmationRespond(
        confirmation_id=fields.required_str("confirmation_id"),
        decision=fields.required_choice("decision", Decision),
        parameters=fields.optional_object("parameters"),
        event_id=fields.event_id,
    )


def _session_update(fields: _Fields) -> SessionUpdate:
    if fields.raw("client_tools") is not None:
        raise fields.invalid(
            "client_tools",
            "can only be declared in session.start: the model is told its tools when the "
            "session opens",
        )
    audio = fields.optional_nested("audio")
    return SessionUpdate(
        mode=fields.optional_choice("mode", Mode),
        instructions=fields.optional_str("instructions"),
        # SessionUpdate checks the rate (type and value) and names the field in its error.
        input_rate=None if audio is None else audio.raw("input_rate"),
        turn_detection=fields.raw("turn_detection"),
        tool_choice=fields.raw("tool_choice"),
        event_id=fields.event_id,
    )


_PARSERS: dict[str, Callable[[_Fields], JsonClientEvent]] = {
    SessionStart.TYPE: _session_start,
    AudioAppend.TYPE: _audio_append,
    # AudioCommit checks that respond is a boolean.
    AudioCommit.TYPE: lambda fields: AudioCommit(
        respond=True if fields.raw("respond") is None else fields.raw("respond"),
        event_id=fields.event_id,
    ),
    AudioClear.TYPE: lambda fields: AudioClear(event_id=fields.event_id),
    AudioPlayback.TYPE: _audio_playback,
    TextSend.TYPE: lambda fields: TextSend(
        text=fields.required_str("text"), event_id=fields.event_id
    ),
    ResponseCreate.TYPE: lambda fields: ResponseCreate(event_id=fields.event_id),
    ResponseCancel.TYPE: lambda fields: ResponseCancel(event_id=fields.event_id),
    ConfirmationRespond.TYPE: _confirmation_respond,
    SessionUpdate.TYPE: _session_update,
    SessionEnd.TYPE: lambda fields: SessionEnd(
        reason=fields.optional_str("reason"), event_id=fields.event_id
    ),
    ClientToolOutput.TYPE: lambda fields: ClientToolOutput(
        call_id=fields.required_str("call_id"),
        output=fields.required_str("output"),
        event_id=fields.event_id,
    ),
    # Ping checks that its id is a JSON scalar.
    Ping.TYPE: lambda fields: Ping(id=fields.raw("id"), event_id=fields.event_id),
}
