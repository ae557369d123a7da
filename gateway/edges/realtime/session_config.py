"""The GA session object of the compatible endpoint: what ``session.update`` may change
(``SessionPatch``, decoded and validated), the effective session (``SessionView``), the merge,
and the wire form that ``session.created`` / ``session.updated`` carry.

Theory of operation: ``decode_session_patch`` validates the ``session`` object of a
``session.update`` completely before anything changes (a refused update changes nothing, as on
OpenAI's server); ``SessionView.apply`` then merges it (only the fields present change; a
``null`` ``turn_detection`` or ``transcription`` clears it). What is kept and applied:

- ``instructions``; ``output_modalities`` (``["audio"]`` or ``["text"]``);
- ``audio.input.format`` / ``audio.output.format``: only ``{"type":"audio/pcm","rate":24000}``
  (a missing ``rate`` means 24000); ``audio/pcmu``, ``audio/pcma`` or another rate are
  ``invalid_value``;
- ``audio.input.turn_detection`` (``server_vad`` / ``semantic_vad`` / ``null``), merged over the
  current one of the same type, else over OpenAI's defaults: the session's turn detection
  (``turn_options``: null is push-to-talk, a detector's settings go to an OpenAI upstream as
  they are). ``create_response`` and ``interrupt_response`` are taken as ``true`` only
  (``unsupported`` otherwise: the gateway answers every turn the detector ends and lets speech
  cut a reply; a client that wants to decide sets null). ``audio.input.transcription``;
- ``audio.output.voice`` (a name or ``{"id": …}``); ``tools`` (function tools only: the
  client's own tools, flat GA form; the bridge makes them the session's ``client_tools``) and
  ``tool_choice`` (the session's, ``turn_options``; a function it names must be one of
  ``tools``: ``invalid_value`` otherwise, the update refused whole).

Documented GA fields this endpoint does not apply are accepted and listed in
``SessionPatch.ignored`` (so the bridge may log them) without being type-checked: ``model``,
``max_output_tokens``, ``truncation``, ``tracing``, ``prompt``, ``include``, ``reasoning``,
``parallel_tool_calls``, ``audio.input.noise_reduction``, ``audio.output.speed``, and the
read-only ``id`` / ``object`` / ``expires_at`` a client may echo back. A key the GA API does not
document at all (beta names such as ``modalities``, ``voice`` at the top, ``temperature``; the
nested Chat Completions tool form) is ``unknown_parameter``, as OpenAI answers it: a client
written for the retired beta shape learns so at once. ``session.type`` is required
(``missing_required_parameter``) and must be ``"realtime"``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Final, Literal, TypeAlias, cast

from .errors import CompatError, invalid_type, invalid_value, missing_parameter
from .json_fields import (
    check_keys,
    choice,
    object_at,
    optional_bool,
    optional_int,
    optional_number,
    optional_string,
    require_object,
    required_string,
)

__all__ = [
    "KEEP",
    "PCM_24K",
    "ForcedFunction",
    "FunctionTool",
    "Keep",
    "Modality",
    "SessionPatch",
    "SessionView",
    "ToolChoice",
    "TurnDetection",
    "decode_session_patch",
    "decode_tool_choice",
    "decode_tools",
    "modality_of",
]

Modality: TypeAlias = Literal["audio", "text"]
PCM_24K: Final[Mapping[str, Any]] = {"type": "audio/pcm", "rate": 24000}


class Keep(Enum):
    """ "Not in the update": distinct from an explicit ``null`` that clears a field."""

    KEEP = "keep"


KEEP: Final = Keep.KEEP

_SESSION_KEYS = frozenset(
    {"type", "instructions", "output_modalities", "audio", "tools", "tool_choice"}
)
_SESSION_IGNORED = frozenset(
    {
        "model",
        "max_output_tokens",
        "truncation",
        "tracing",
        "prompt",
        "include",
        "reasoning",
        "parallel_tool_calls",
        "id",
        "object",
        "expires_at",
    }
)
_INPUT_KEYS = frozenset({"format", "noise_reduction", "transcription", "turn_detection"})
_OUTPUT_KEYS = frozenset({"format", "voice", "speed"})
_VAD_KEYS = frozenset(
    {
        "type",
        "threshold",
        "prefix_padding_ms",
        "silence_duration_ms",
        "idle_timeout_ms",
        "create_response",
        "interrupt_response",
        "eagerness",
    }
)
_TOOL_KEYS = frozenset({"type", "name", "description", "parameters"})
_EAGERNESS = ("low", "medium", "high", "auto")
_TOOL_CHOICES = ("auto", "none", "required")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDetection:
    """``audio.input.turn_detection`` with every default filled in (OpenAI's values)."""

    type: Literal["server_vad", "semantic_vad"] = "server_vad"
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    idle_timeout_ms: int | None = None
    create_response: bool = True
    interrupt_response: bool = True
    eagerness: str = "auto"

    def to_wire(self) -> dict[str, Any]:
        if self.type == "semantic_vad":
            return {
                "type": "semantic_vad",
                "eagerness": self.eagerness,
                "create_response": self.create_response,
                "interrupt_response": self.interrupt_response,
            }
        return {
            "type": "server_vad",
            "threshold": self.threshold,
            "prefix_padding_ms": self.prefix_padding_ms,
            "silence_duration_ms": self.silence_duration_ms,
            "idle_timeout_ms": self.idle_timeout_ms,
            "create_response": self.create_response,
            "interrupt_response": self.interrupt_response,
        }

    def merged(self, given: Mapping[str, Any]) -> TurnDetection:
        """``given`` (validated keys) over this one when the type is the same, else over the
        defaults of the new type."""
        base = self if given["type"] == self.type else TurnDetection(type=given["type"])
        return replace(base, **given)


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionTool:
    """One of the client's own tools (GA flat form)."""

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        tool: dict[str, Any] = {"type": "function", "name": self.name}
        if self.description is not None:
            tool["description"] = self.description
        if self.parameters is not None:
            tool["parameters"] = copy.deepcopy(dict(self.parameters))
        return tool


@dataclass(frozen=True, slots=True)
class ForcedFunction:
    """``tool_choice`` naming one function."""

    name: str

    def to_wire(self) -> dict[str, Any]:
        return {"type": "function", "name": self.name}


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | ForcedFunction


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPatch:
    """A validated ``session.update``: ``None`` / ``KEEP`` fields are not in the update."""

    instructions: str | None = None
    modality: Modality | None = None
    turn_detection: Mapping[str, Any] | Keep | None = KEEP  # validated keys; None clears
    transcription: Mapping[str, Any] | Keep | None = KEEP  # None clears
    voice: str | Mapping[str, Any] | None = None
    tools: tuple[FunctionTool, ...] | None = None
    tool_choice: ToolChoice | None = None
    ignored: tuple[str, ...] = ()  # documented fields given but not applied (param paths)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionView:
    """The effective session, as ``session.created`` / ``session.updated`` show it."""

    id: str
    model: str
    expires_at: int  # Unix seconds
    instructions: str = ""
    modality: Modality = "audio"
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    transcription: Mapping[str, Any] | None = None
    voice: str | Mapping[str, Any] = "alloy"
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: ToolChoice = "auto"

    def apply(self, patch: SessionPatch) -> SessionView:
        """The session with ``patch`` applied; ``CompatError`` (nothing changed) for a
        ``tool_choice`` naming a function that is not one of the resulting ``tools``."""
        changes: dict[str, Any] = {}
        if patch.instructions is not None:
            changes["instructions"] = patch.instructions
        if patch.modality is not None:
            changes["modality"] = patch.modality
        if patch.turn_detection is None:
            changes["turn_detection"] = None
        elif not isinstance(patch.turn_detection, Keep):
            current = self.turn_detection or TurnDetection(type=patch.turn_detection["type"])
            changes["turn_detection"] = current.merged(patch.turn_detection)
        if not isinstance(patch.transcription, Keep):
            changes["transcription"] = patch.transcription
        if patch.voice is not None:
            changes["voice"] = patch.voice
        if patch.tools is not None:
            changes["tools"] = patch.tools
        if patch.tool_choice is not None:
            changes["tool_choice"] = patch.tool_choice
        applied = replace(self, **changes)
        forced = applied.tool_choice
        if isinstance(forced, ForcedFunction) and forced.name not in {
            tool.name for tool in applied.tools
        }:
            raise CompatError(
                "invalid_value",
                f"Invalid value: tool_choice names the function '{forced.name}', which is not "
                "one of the session's tools.",
                param="session.tool_choice.name",
            )
        return applied

    def to_wire(self) -> dict[str, Any]:
        choice_wire = self.tool_choice
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self.model,
            "output_modalities": [self.modality],
            "instructions": self.instructions,
            "tools": [tool.to_wire() for tool in self.tools],
            "tool_choice": choice_wire if isinstance(choice_wire, str) else choice_wire.to_wire(),
            "max_output_tokens": "inf",
            "tracing": None,
            "truncation": "auto",
            "prompt": None,
            "expires_at": self.expires_at,
            "include": None,
            "audio": {
                "input": {
                    "format": dict(PCM_24K),
                    "transcription": _copy_or_none(self.transcription),
                    "noise_reduction": None,
                    "turn_detection": (
                        None if self.turn_detection is None else self.turn_detection.to_wire()
                    ),
                },
                "output": {
                    "format": dict(PCM_24K),
                    "voice": copy.deepcopy(self.voice),
                    "speed": 1.0,
                },
            },
        }


def _copy_or_none(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else copy.deepcopy(dict(value))


# Decoding ------------------------------------------------------------------------------------


def modality_of(value: Any, param: str) -> Modality:
    if not isinstance(value, list):
        raise invalid_type(param, "an array", value)
    if value == ["audio"]:
        return "audio"
    if value == ["text"]:
        return "text"
    raise CompatError(
        "invalid_value",
        f"Invalid value: {value!r}. Supported values are: ['audio'] and ['text'].",
        param=param,
    )


def _check_format(value: Any, param: str) -> None:
    audio_format = require_object(value, param)
    check_keys(audio_format, ("type", "rate"), param)
    if audio_format.get("type") is None:
        raise missing_parameter(f"{param}.type")
    kind = choice(audio_format.get("type"), f"{param}.type", ("audio/pcm",))
    rate = audio_format.get("rate", 24000)
    if kind == "audio/pcm" and rate != 24000:
        raise invalid_value(f"{param}.rate", rate, ["24000"])


def _turn_detection(value: Any, param: str) -> dict[str, Any]:
    given = require_object(value, param)
    check_keys(given, _VAD_KEYS, param)
    if given.get("type") is None:
        raise missing_parameter(f"{param}.type")
    kind = choice(given["type"], f"{param}.type", ("server_vad", "semantic_vad"))
    fields: dict[str, Any] = {"type": kind}
    threshold = optional_number(given, "threshold", f"{param}.threshold", low=0.0, high=1.0)
    if threshold is not None:
        fields["threshold"] = threshold
    for key in ("prefix_padding_ms", "silence_duration_ms"):
        number = optional_int(given, key, f"{param}.{key}")
        if number is not None:
            fields[key] = number
    if "idle_timeout_ms" in given:
        fields["idle_timeout_ms"] = optional_int(
            given, "idle_timeout_ms", f"{param}.idle_timeout_ms"
        )
    for key in ("create_response", "interrupt_response"):
        flag = optional_bool(given, key, f"{param}.{key}")
        if flag is False:
            raise CompatError(
                "unsupported",
                f"{key}: false is not supported by this gateway: it answers every turn the "
                "detector ends and lets speech cut a reply. For turns the client ends and "
                "answers itself, set turn_detection to null (commit, then response.create).",
                param=f"{param}.{key}",
            )
        if flag is not None:
            fields[key] = flag
    if given.get("eagerness") is not None:
        fields["eagerness"] = choice(given["eagerness"], f"{param}.eagerness", _EAGERNESS)
    return fields


def _transcription(value: Any, param: str) -> dict[str, Any]:
    given = require_object(value, param)
    for key in ("model", "language", "prompt"):
        optional_string(given, key, f"{param}.{key}")
    return copy.deepcopy(given)


def _voice(value: Any, param: str) -> str | dict[str, Any]:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return {"id": value["id"]}
    raise invalid_type(param, "a string", value)


def decode_tools(value: Any, param: str) -> tuple[FunctionTool, ...]:
    if not isinstance(value, list):
        raise invalid_type(param, "an array", value)
    tools = []
    for index, raw in enumerate(value):
        where = f"{param}[{index}]"
        tool = require_object(raw, where)
        kind = tool.get("type", "function")
        if kind != "function":
            raise invalid_value(
                f"{where}.type", kind, ["function"], note="This endpoint takes function tools only."
            )
        check_keys(tool, _TOOL_KEYS, where)
        parameters = object_at(tool, "parameters", f"{where}.parameters")
        tools.append(
            FunctionTool(
                name=required_string(tool, "name", f"{where}.name"),
                description=optional_string(tool, "description", f"{where}.description"),
                parameters=None if parameters is None else copy.deepcopy(parameters),
            )
        )
    return tuple(tools)


def decode_tool_choice(value: Any, param: str) -> ToolChoice:
    if isinstance(value, str) and value in _TOOL_CHOICES:
        return cast(ToolChoice, value)
    if isinstance(value, dict) and value.get("type") == "function":
        return ForcedFunction(required_string(value, "name", f"{param}.name"))
    raise invalid_value(param, value, ["auto", "none", "required"])


def _audio(
    audio: dict[str, Any], ignored: list[str]
) -> tuple[Mapping[str, Any] | Keep | None, Mapping[str, Any] | Keep | None, Any]:
    check_keys(audio, ("input", "output"), "session.audio")
    turn_detection: Mapping[str, Any] | Keep | None = KEEP
    transcription: Mapping[str, Any] | Keep | None = KEEP
    voice = None
    given = object_at(audio, "input", "session.audio.input")
    if given is not None:
        check_keys(given, _INPUT_KEYS, "session.audio.input")
        if given.get("format") is not None:
            _check_format(given["format"], "session.audio.input.format")
        if "turn_detection" in given:
            where = "session.audio.input.turn_detection"
            raw = given["turn_detection"]
            turn_detection = None if raw is None else _turn_detection(raw, where)
        if "transcription" in given:
            raw = given["transcription"]
            where = "session.audio.input.transcription"
            transcription = None if raw is None else _transcription(raw, where)
        if "noise_reduction" in given:
            ignored.append("session.audio.input.noise_reduction")
    given = object_at(audio, "output", "session.audio.output")
    if given is not None:
        check_keys(given, _OUTPUT_KEYS, "session.audio.output")
        if given.get("format") is not None:
            _check_format(given["format"], "session.audio.output.format")
        if given.get("voice") is not None:
            voice = _voice(given["voice"], "session.audio.output.voice")
        if "speed" in given:
            ignored.append("session.audio.output.speed")
    return turn_detection, transcription, voice


def decode_session_patch(value: Any) -> SessionPatch:
    """The ``session`` object of a ``session.update``; ``CompatError`` if OpenAI would refuse it."""
    session = require_object(value, "session")
    check_keys(session, _SESSION_KEYS | _SESSION_IGNORED, "session")
    if session.get("type") is None:
        raise missing_parameter("session.type")
    choice(session["type"], "session.type", ("realtime",))
    ignored = [f"session.{key}" for key in session if key in _SESSION_IGNORED]
    modality = None
    if session.get("output_modalities") is not None:
        modality = modality_of(session["output_modalities"], "session.output_modalities")
    tools = None
    if session.get("tools") is not None:
        tools = decode_tools(session["tools"], "session.tools")
    tool_choice = None
    if session.get("tool_choice") is not None:
        tool_choice = decode_tool_choice(session["tool_choice"], "session.tool_choice")
    turn_detection: Mapping[str, Any] | Keep | None = KEEP
    transcription: Mapping[str, Any] | Keep | None = KEEP
    voice = None
    audio = object_at(session, "audio", "session.audio")
    if audio is not None:
        turn_detection, transcription, voice = _audio(audio, ignored)
    return SessionPatch(
        instructions=optional_string(session, "instructions", "session.instructions"),
        modality=modality,
        turn_detection=turn_detection,
        transcription=transcription,
        voice=voice,
        tools=tools,
        tool_choice=tool_choice,
        ignored=tuple(ignored),
    )
