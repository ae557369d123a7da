"""The GA session object of the fake: defaults, validation, the ``session.update`` merge, and
the per-response overrides of ``response.create``.

Pure. ``default_session`` is what ``session.created`` carries
(https://platform.openai.com/docs/api-reference/realtime-server-events); ``merge_session_update``
validates a ``session.update`` payload completely before changing anything, then deep-merges the
fields present (``null`` clears) and returns the new effective session, which ``session.updated``
carries in full. Invalid updates raise ``ClientError``:

- no ``session.type`` → ``missing_required_parameter`` (``param: "session.type"``);
- a field the GA API does not know (beta names such as ``modalities`` or ``temperature``, the
  nested Chat Completions tool form) → ``unknown_parameter``;
- ``output_modalities`` other than ``["audio"]`` / ``["text"]``, an audio format other than
  ``audio/pcm`` 24000, ``audio/pcmu``, ``audio/pcma``, and other bad enum values →
  ``invalid_value``;
- a different ``voice`` once audio has been output → ``cannot_update_voice`` (captured message);
- a different ``model`` → ``invalid_value`` (inferred: the model is fixed by the URL).

``parse_response_overrides`` validates ``response.create``'s ``response`` object the same way
(``param`` under ``response.``); its ``input`` items are left to the session to resolve.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fakes.openai_realtime.wire import (
    ClientError,
    invalid_type,
    invalid_value,
    missing_parameter,
    unknown_parameter,
)
from transports.base import ForcedTool, ToolChoice
from transports.local.brain import ToolOffer

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "SERVER_VAD_DEFAULTS",
    "ResponseOverrides",
    "default_session",
    "merge_session_update",
    "parse_response_overrides",
    "tool_offer",
    "validate_audio_format",
    "validate_max_output_tokens",
    "validate_output_modalities",
    "validate_tool_choice",
]

DEFAULT_INSTRUCTIONS = (
    "You are a helpful, witty, and friendly AI voice assistant. Answer briefly and clearly, in "
    "the language of the user. Call a function when a tool can answer better than you can."
)

SERVER_VAD_DEFAULTS: dict[str, Any] = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 500,
    "idle_timeout_ms": None,
    "create_response": True,
    "interrupt_response": True,
}
_SEMANTIC_VAD_DEFAULTS: dict[str, Any] = {
    "type": "semantic_vad",
    "eagerness": "auto",
    "create_response": True,
    "interrupt_response": True,
}
_PCM_24K: dict[str, Any] = {"type": "audio/pcm", "rate": 24000}

_SESSION_FIELDS = frozenset(
    {
        "type",
        "model",
        "instructions",
        "output_modalities",
        "max_output_tokens",
        "audio",
        "tools",
        "tool_choice",
        "truncation",
        "tracing",
        "prompt",
        "include",
        "reasoning",
        "parallel_tool_calls",
    }
)
_INPUT_FIELDS = frozenset({"format", "noise_reduction", "transcription", "turn_detection"})
_OUTPUT_FIELDS = frozenset({"format", "voice", "speed"})
_SERVER_VAD_FIELDS = frozenset(SERVER_VAD_DEFAULTS)
_SEMANTIC_VAD_FIELDS = frozenset(_SEMANTIC_VAD_DEFAULTS)


def default_session(*, session_id: str, model: str, expires_at: int) -> dict[str, Any]:
    return {
        "id": session_id,
        "object": "realtime.session",
        "type": "realtime",
        "model": model,
        "output_modalities": ["audio"],
        "instructions": DEFAULT_INSTRUCTIONS,
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "expires_at": expires_at,
        "audio": {
            "input": {
                "format": dict(_PCM_24K),
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": dict(SERVER_VAD_DEFAULTS),
            },
            "output": {"format": dict(_PCM_24K), "voice": "alloy", "speed": 1.0},
        },
        "include": None,
    }


# Validators (shared with response.create overrides) ------------------------------------------


def validate_output_modalities(value: Any, param: str) -> list[str]:
    if not isinstance(value, list):
        raise invalid_type(param, "an array", value)
    if value not in (["audio"], ["text"]):
        raise ClientError(
            "invalid_value",
            f"Invalid value: {value!r}. Supported values are: ['audio'] and ['text'].",
            param,
        )
    return list(value)


def validate_audio_format(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid_type(param, "an object", value)
    for key in value:
        if key not in ("type", "rate"):
            raise unknown_parameter(f"{param}.{key}")
    kind = value.get("type")
    if kind is None:
        raise missing_parameter(f"{param}.type")
    if kind == "audio/pcm":
        rate = value.get("rate", 24000)
        if rate != 24000:
            raise invalid_value(f"{param}.rate", str(rate), ["24000"])
        return {"type": "audio/pcm", "rate": 24000}
    if kind in ("audio/pcmu", "audio/pcma"):
        if "rate" in value:
            raise unknown_parameter(f"{param}.rate")
        return {"type": kind}
    raise invalid_value(f"{param}.type", kind, ["audio/pcm", "audio/pcmu", "audio/pcma"])


def _check_fields(value: Any, param: str, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid_type(param, "an object", value)
    for key in value:
        if key not in allowed:
            raise unknown_parameter(f"{param}.{key}")
    return value


def _validate_tools(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise invalid_type(param, "an array", value)
    for index, tool in enumerate(value):
        where = f"{param}[{index}]"
        if not isinstance(tool, dict):
            raise invalid_type(where, "an object", tool)
        kind = tool.get("type", "function")
        if kind == "function":
            if "name" not in tool:
                raise missing_parameter(f"{where}.name")
            if not isinstance(tool["name"], str):
                raise invalid_type(f"{where}.name", "a string", tool["name"])
            for key in tool:
                if key not in ("type", "name", "description", "parameters"):
                    raise unknown_parameter(f"{where}.{key}")
        elif kind == "mcp":
            if "server_label" not in tool:
                raise missing_parameter(f"{where}.server_label")
        else:
            raise invalid_value(f"{where}.type", str(kind), ["function", "mcp"])
    return value


def validate_tool_choice(value: Any, param: str) -> Any:
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise invalid_value(param, value, ["auto", "none", "required"])
        return value
    if isinstance(value, dict) and value.get("type") in ("function", "mcp"):
        return value
    raise invalid_value(param, repr(value), ["auto", "none", "required"])


def validate_max_output_tokens(value: Any, param: str) -> int | str:
    if value == "inf":
        return "inf"
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4096:
        raise ClientError(
            "invalid_value",
            f"Invalid value: '{value}'. Expected an integer between 1 and 4096, or 'inf'.",
            param,
        )
    return value


def _validate_turn_detection(value: Any, param: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise invalid_type(param, "an object", value)
    kind = value.get("type")
    if kind is None:
        raise missing_parameter(f"{param}.type")
    if kind == "server_vad":
        _check_fields(value, param, _SERVER_VAD_FIELDS)
    elif kind == "semantic_vad":
        _check_fields(value, param, _SEMANTIC_VAD_FIELDS)
    else:
        raise invalid_value(f"{param}.type", str(kind), ["server_vad", "semantic_vad"])


def _validate_audio(value: Any, *, voice_locked: bool, current: Mapping[str, Any]) -> None:
    audio = _check_fields(value, "session.audio", frozenset({"input", "output"}))
    if "input" in audio and audio["input"] is not None:
        given = _check_fields(audio["input"], "session.audio.input", _INPUT_FIELDS)
        if "format" in given:
            validate_audio_format(given["format"], "session.audio.input.format")
        if "turn_detection" in given:
            _validate_turn_detection(given["turn_detection"], "session.audio.input.turn_detection")
        for name in ("transcription", "noise_reduction"):
            if given.get(name) is not None and not isinstance(given[name], dict):
                raise invalid_type(f"session.audio.input.{name}", "an object", given[name])
    if "output" in audio and audio["output"] is not None:
        given = _check_fields(audio["output"], "session.audio.output", _OUTPUT_FIELDS)
        if "format" in given:
            validate_audio_format(given["format"], "session.audio.output.format")
        if "voice" in given:
            voice = given["voice"]
            if not isinstance(voice, str) and not (
                isinstance(voice, dict) and isinstance(voice.get("id"), str)
            ):
                raise invalid_type("session.audio.output.voice", "a string", voice)
            if voice_locked and voice != current["audio"]["output"]["voice"]:
                raise ClientError(
                    "cannot_update_voice",
                    "Cannot update a conversation's voice if assistant audio is present.",
                )
        if "speed" in given:
            speed = given["speed"]
            if isinstance(speed, bool) or not isinstance(speed, int | float):
                raise invalid_type("session.audio.output.speed", "a number", speed)
            if not 0.25 <= speed <= 1.5:
                raise ClientError(
                    "invalid_value",
                    f"Invalid 'session.audio.output.speed': {speed}. "
                    "Expected a value between 0.25 and 1.5.",
                    "session.audio.output.speed",
                )


def _validate(update: dict[str, Any], current: Mapping[str, Any], *, voice_locked: bool) -> None:
    for key in update:
        if key not in _SESSION_FIELDS:
            raise unknown_parameter(f"session.{key}")
    if "type" not in update:
        raise missing_parameter("session.type")
    if update["type"] != "realtime":
        raise invalid_value("session.type", str(update["type"]), ["realtime"])
    if "model" in update and update["model"] != current["model"]:
        raise ClientError(
            "invalid_value",
            f"Cannot change the model of a session from '{current['model']}' "
            f"to '{update['model']}'.",
            "session.model",
        )
    if "instructions" in update and not isinstance(update["instructions"], str):
        raise invalid_type("session.instructions", "a string", update["instructions"])
    if "output_modalities" in update:
        validate_output_modalities(update["output_modalities"], "session.output_modalities")
    if "max_output_tokens" in update:
        validate_max_output_tokens(update["max_output_tokens"], "session.max_output_tokens")
    if "tools" in update:
        _validate_tools(update["tools"], "session.tools")
    if "tool_choice" in update:
        validate_tool_choice(update["tool_choice"], "session.tool_choice")
    if "audio" in update and update["audio"] is not None:
        _validate_audio(update["audio"], voice_locked=voice_locked, current=current)


# Merge ---------------------------------------------------------------------------------------


def _merge_turn_detection(current: Any, given: Any) -> Any:
    if given is None:
        return None
    defaults = SERVER_VAD_DEFAULTS if given["type"] == "server_vad" else _SEMANTIC_VAD_DEFAULTS
    base = current if isinstance(current, dict) and current.get("type") == given["type"] else {}
    return {**defaults, **base, **given}


def _deep_merge(current: Any, given: Any) -> Any:
    """Objects merge key by key; anything else (lists included) replaces; ``None`` clears."""
    if not isinstance(given, dict) or not isinstance(current, dict):
        return copy.deepcopy(given)
    merged = dict(current)
    for key, value in given.items():
        merged[key] = _deep_merge(current.get(key), value)
    return merged


def merge_session_update(
    current: Mapping[str, Any], update: Any, *, voice_locked: bool
) -> dict[str, Any]:
    """The new effective session, or ``ClientError`` with nothing changed."""
    if update is None:
        raise missing_parameter("session")
    if not isinstance(update, dict):
        raise invalid_type("session", "an object", update)
    _validate(update, current, voice_locked=voice_locked)
    merged = copy.deepcopy(dict(current))
    for key, value in update.items():
        if key == "audio":
            continue
        merged[key] = _deep_merge(merged.get(key), value)
    audio = update.get("audio")
    if isinstance(audio, dict):
        merged_input = dict(merged["audio"]["input"])
        merged_output = dict(merged["audio"]["output"])
        for key, value in (audio.get("input") or {}).items():
            if key == "turn_detection":
                merged_input[key] = _merge_turn_detection(merged_input.get(key), value)
            elif key == "format":
                merged_input[key] = validate_audio_format(value, "session.audio.input.format")
            else:
                merged_input[key] = _deep_merge(merged_input.get(key), value)
        for key, value in (audio.get("output") or {}).items():
            if key == "format":
                merged_output[key] = validate_audio_format(value, "session.audio.output.format")
            else:
                merged_output[key] = _deep_merge(merged_output.get(key), value)
        merged["audio"] = {"input": merged_input, "output": merged_output}
    merged["type"] = "realtime"
    merged["model"] = current["model"]
    return merged


# response.create ------------------------------------------------------------------------------

_RESPONSE_FIELDS = frozenset(
    {
        "instructions",
        "tools",
        "tool_choice",
        "output_modalities",
        "max_output_tokens",
        "metadata",
        "audio",
        "conversation",
        "input",
        "prompt",
        "reasoning",
        "parallel_tool_calls",
    }
)


@dataclass(frozen=True, slots=True)
class ResponseOverrides:
    """What one response changes; ``None`` keeps the session's value."""

    output_modalities: list[str] | None = None
    audio_format: dict[str, Any] | None = None
    voice: Any = None
    out_of_band: bool = False  # conversation: "none"
    max_output_tokens: int | str | None = None
    metadata: dict[str, Any] | None = None
    input: Any = None  # raw items (``None``: the conversation)
    instructions: str | None = None
    tools: list[Any] | None = None  # validated
    tool_choice: Any = None  # validated


def _response_audio(audio: Any) -> tuple[dict[str, Any] | None, Any]:
    if audio is None:
        return None, None
    output = audio.get("output") if isinstance(audio, dict) else None
    if not isinstance(output, dict):
        raise invalid_type("response.audio.output", "an object", output)
    audio_format = None
    if output.get("format") is not None:
        audio_format = validate_audio_format(output["format"], "response.audio.output.format")
    return audio_format, output.get("voice")


def parse_response_overrides(params: Any) -> ResponseOverrides:
    if params is None:
        return ResponseOverrides()
    if not isinstance(params, dict):
        raise invalid_type("response", "an object", params)
    for key in params:
        if key not in _RESPONSE_FIELDS:
            raise unknown_parameter(f"response.{key}")
    if "instructions" in params and not isinstance(params["instructions"], str):
        raise invalid_type("response.instructions", "a string", params["instructions"])
    if params.get("tools") is not None:
        _validate_tools(params["tools"], "response.tools")
    if "tool_choice" in params:
        validate_tool_choice(params["tool_choice"], "response.tool_choice")
    modalities = None
    if params.get("output_modalities") is not None:
        modalities = validate_output_modalities(
            params["output_modalities"], "response.output_modalities"
        )
    max_tokens = None
    if params.get("max_output_tokens") is not None:
        max_tokens = validate_max_output_tokens(
            params["max_output_tokens"], "response.max_output_tokens"
        )
    audio_format, voice = _response_audio(params.get("audio"))
    conversation = params.get("conversation", "auto")
    if conversation not in ("auto", "none"):
        raise invalid_value("response.conversation", str(conversation), ["auto", "none"])
    metadata = params.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict) or len(metadata) > 16):
        raise invalid_type("response.metadata", "an object of at most 16 pairs", metadata)
    if params.get("input") is not None and not isinstance(params["input"], list):
        raise invalid_type("response.input", "an array", params["input"])
    return ResponseOverrides(
        output_modalities=modalities,
        audio_format=audio_format,
        voice=voice,
        out_of_band=conversation == "none",
        max_output_tokens=max_tokens,
        metadata=metadata,
        input=params.get("input"),
        instructions=params.get("instructions"),
        tools=params.get("tools"),
        tool_choice=params.get("tool_choice"),
    )


def tool_offer(session: Mapping[str, Any], overrides: ResponseOverrides) -> ToolOffer:
    """The function tools one response may call and its ``tool_choice`` (the response's own,
    else the session's), as the model follows them: a function named by ``tool_choice`` is
    the one it calls; an MCP choice leaves the functions to the model."""
    tools = session["tools"] if overrides.tools is None else overrides.tools
    names = tuple(t["name"] for t in tools if t.get("type", "function") == "function")
    raw = session["tool_choice"] if overrides.tool_choice is None else overrides.tool_choice
    choice: ToolChoice = "auto"
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("name"), str):
        choice = ForcedTool(raw["name"])
    elif raw in ("none", "required"):
        choice = raw
    return ToolOffer(names, choice)
