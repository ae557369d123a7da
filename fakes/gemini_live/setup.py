"""The ``setup`` message of the fake Gemini Live server: validation and the settings it fixes.

Pure. ``parse_setup`` takes the *normalised* (camelCase, ``wire.normalise``) value of
``setup`` and returns a ``SetupConfig`` or raises ``ProtocolError`` (the socket then closes
before ``setupComplete``, which the SDK's ``connect()`` raises as ``APIError``):

- ``model`` must be a string ``models/{id}`` → else 1007;
- ``generationConfig.responseModalities``: exactly one of ``AUDIO`` / ``TEXT`` (``AUDIO`` when
  absent, as the service defaults) → else 1007; a model whose id contains ``native-audio`` only
  speaks: ``TEXT`` → 1007 "… does not support TEXT …";
- ``realtimeInputConfig``: ``automaticActivityDetection.disabled`` (manual ``activityStart`` /
  ``activityEnd``), ``silenceDurationMs`` (the VAD's end-of-speech silence; int64 as a number or
  a string), ``activityHandling`` (``NO_INTERRUPTION`` turns barge-in off);
- ``sessionResumption`` present → handles are issued; a non-empty ``handle`` resumes;
- ``inputAudioTranscription`` / ``outputAudioTranscription`` present → transcripts are sent;
- ``tools[].functionDeclarations[]``: the ``name``s are kept for the record (the local brain may
  call any name, as the ``/tool`` directive asks); ``behavior`` must be one of
  ``tools.BEHAVIORS`` (``UNSPECIFIED``, ``BLOCKING``, ``NON_BLOCKING``; the names the SDK's
  ``types.Behavior`` sends; absent or null = ``BLOCKING``), else 1007 "Invalid value at
  'setup.tools[i].function_declarations[j].behavior' (Behavior), 'X'" (integers, lower case and
  other spellings included). The names declared ``NON_BLOCKING`` are kept (``non_blocking``).
  ``contextUpdate`` tools are checked the same way (``function_declarations``) and replace them.

Every other field is accepted and ignored, as the service ignores what it does not use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fakes.gemini_live.tools import BEHAVIORS
from fakes.gemini_live.wire import (
    INVALID_ARGUMENT,
    Message,
    ProtocolError,
    expect_object,
    parse_int,
)

__all__ = [
    "MODALITIES",
    "FunctionDeclarations",
    "SetupConfig",
    "apply_context_update",
    "function_declarations",
    "is_native_audio",
    "parse_setup",
]

MODALITIES = ("AUDIO", "TEXT")
_INVALID = "Request contains an invalid argument."


@dataclass(frozen=True, slots=True)
class SetupConfig:
    model: str  # "models/{id}"
    modality: str  # "AUDIO" | "TEXT"
    input_transcription: bool = False
    output_transcription: bool = False
    resumption: bool = False  # sessionResumption present: handles are issued
    handle: str | None = None  # the handle to resume, if any
    automatic_activity: bool = True  # False: the client sends activityStart / activityEnd
    silence_duration_ms: int | None = None
    interrupts: bool = True  # activityHandling is not NO_INTERRUPTION
    function_names: tuple[str, ...] = ()
    non_blocking: frozenset[str] = frozenset()  # names declared "behavior": "NON_BLOCKING"

    @property
    def model_id(self) -> str:
        return self.model.removeprefix("models/")


def is_native_audio(model: str) -> bool:
    return "native-audio" in model


def _object(value: Any, where: str) -> dict[str, Any]:
    return expect_object(value, where, optional=True)


def _modality(generation: dict[str, Any], model: str) -> str:
    modalities = generation.get("responseModalities")
    if modalities is None:
        return "AUDIO"
    if not isinstance(modalities, list) or len(modalities) != 1:
        raise ProtocolError(INVALID_ARGUMENT, _INVALID + " Exactly one response modality.")
    modality = modalities[0]
    if not isinstance(modality, str) or modality.upper() not in MODALITIES:
        raise ProtocolError(
            INVALID_ARGUMENT,
            "Invalid value at 'setup.generation_config.response_modalities[0]' "
            f"(Modality), {modality!r}",
        )
    modality = modality.upper()
    if modality == "TEXT" and is_native_audio(model):
        raise ProtocolError(
            INVALID_ARGUMENT,
            f"{model.removeprefix('models/')} does not support TEXT response modality; use AUDIO.",
        )
    return modality


@dataclass(frozen=True, slots=True)
class FunctionDeclarations:
    names: tuple[str, ...] = ()
    non_blocking: frozenset[str] = frozenset()


def function_declarations(tools: Any, where: str = "setup.tools") -> FunctionDeclarations:
    """The declared names and the NON_BLOCKING ones; a bad ``behavior`` → 1007 (``where`` is
    the proto path of ``tools`` for the reason)."""
    names: list[str] = []
    non_blocking: set[str] = set()
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        for j, declaration in enumerate(declarations if isinstance(declarations, list) else []):
            if not isinstance(declaration, dict):
                continue
            behavior = declaration.get("behavior")
            if behavior is not None and behavior not in BEHAVIORS:
                raise ProtocolError(
                    INVALID_ARGUMENT,
                    f"Invalid value at '{where}[{i}].function_declarations[{j}].behavior' "
                    f"(Behavior), {behavior!r}",
                )
            name = declaration.get("name")
            if isinstance(name, str):
                names.append(name)
                if behavior == "NON_BLOCKING":
                    non_blocking.add(name)
    return FunctionDeclarations(tuple(names), frozenset(non_blocking))


def parse_setup(setup: Any) -> SetupConfig:
    body = _object(setup, "setup")
    model = body.get("model")
    if not isinstance(model, str) or not model.startswith("models/") or model == "models/":
        raise ProtocolError(
            INVALID_ARGUMENT, f"{_INVALID} setup.model must be 'models/{{model}}', got {model!r}."
        )
    modality = _modality(_object(body.get("generationConfig"), "setup.generationConfig"), model)
    realtime = _object(body.get("realtimeInputConfig"), "setup.realtimeInputConfig")
    detection = _object(
        realtime.get("automaticActivityDetection"),
        "setup.realtimeInputConfig.automaticActivityDetection",
    )
    silence = parse_int(detection.get("silenceDurationMs"))
    resumption = body.get("sessionResumption")
    handle = resumption.get("handle") if isinstance(resumption, dict) else None
    functions = function_declarations(body.get("tools"))
    return SetupConfig(
        model=model,
        modality=modality,
        input_transcription=isinstance(body.get("inputAudioTranscription"), dict),
        output_transcription=isinstance(body.get("outputAudioTranscription"), dict),
        resumption=isinstance(resumption, dict),
        handle=handle if isinstance(handle, str) and handle else None,
        automatic_activity=detection.get("disabled") is not True,
        silence_duration_ms=silence if silence is not None and silence > 0 else None,
        interrupts=realtime.get("activityHandling") != "NO_INTERRUPTION",
        function_names=functions.names,
        non_blocking=functions.non_blocking,
    )


def apply_context_update(setup: Message, update: Any) -> Message:
    """The setup with a ``contextUpdate``'s system instruction and tools in place."""
    body = _object(update, "contextUpdate")
    merged = dict(setup)
    if "systemInstruction" in body:
        merged["systemInstruction"] = body["systemInstruction"]
    tools = body.get("tools")
    if isinstance(tools, dict) and "tools" in tools:
        merged["tools"] = tools["tools"]
    return merged
