"""Wire models of Gemini Live (BidiGenerateContent): the setup config and the client messages.

Facts from the Live API reference (https://ai.google.dev/api/live). The SDK builds the ``setup``
message from a ``LiveConnectConfig`` (``live_config``); after that the transport sends client
messages as raw JSON text frames built here (camelCase, which the server accepts). Audio in is PCM16
16 kHz, audio out PCM16 24 kHz. Bytes are base64; the server may send either alphabet, padded or
not.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from google.genai import types

from transports.base import ForcedTool, Mode, ToolChoice, ToolDeclaration

__all__ = [
    "ACTIVITY_END",
    "ACTIVITY_START",
    "ANSWER_NOW",
    "INPUT_RATE",
    "OUTPUT_RATE",
    "audio_input",
    "audio_stream_end",
    "decode_bytes",
    "is_audio_input",
    "live_config",
    "text_turn",
    "tool_response",
]

INPUT_RATE = 16000
OUTPUT_RATE = 24000
_AUDIO_PREFIX = '{"realtimeInput":{"audio":{"mimeType":"audio/pcm;rate=16000","data":"'
# Push-to-talk with automatic activity detection off: the client marks the user's turn.
ACTIVITY_START = '{"realtimeInput":{"activityStart":{}}}'
ACTIVITY_END = '{"realtimeInput":{"activityEnd":{}}}'
# An empty turn, complete: the model answers from the conversation as it is.
ANSWER_NOW = '{"clientContent":{"turns":[],"turnComplete":true}}'


def live_config(
    *,
    mode: Mode,
    instructions: str,
    tools: Sequence[ToolDeclaration],
    handle: str | None,
    voice: str | None = None,
    language: str | None = None,
    manual_turns: bool = False,
    tool_choice: ToolChoice = "auto",
) -> types.LiveConnectConfig:
    """The session's setup: modality by mode, tools, transcription in voice mode, resumption
    always (``{}`` for a new session, the handle to resume), and compression so that sessions
    are not capped at 15 minutes.

    ``manual_turns``: automatic activity detection off (the client sends ``activityStart`` /
    ``activityEnd``), and no barge-in by activity (the client cancels, as with push-to-talk).
    ``tool_choice``: Live's setup has no ``toolConfig``, so the choice is made with what it
    has: ``none`` declares no function, a forced tool only that one, and ``required`` or a
    forced tool asks for the call in the instructions (the model is not bound by them)."""
    voice_mode = mode == "voice"
    if tool_choice == "none":
        tools = ()
    elif isinstance(tool_choice, ForcedTool):
        tools = [t for t in tools if t.provider_schemas["gemini"]["name"] == tool_choice.name]
        instructions += _CALL_ASKED.format(f"calling the function {tool_choice.name}")
    elif tool_choice == "required":
        instructions += _CALL_ASKED.format("calling one of your functions")
    declarations = [
        types.FunctionDeclaration(
            name=str(t.provider_schemas["gemini"]["name"]),
            description=str(t.provider_schemas["gemini"].get("description", "")),
            parameters_json_schema=t.provider_schemas["gemini"].get("parametersJsonSchema"),
            # The model does not wait for a background tool (docs/tools.md 7.6; Gemini's tool guide:
            # https://ai.google.dev/gemini-api/docs/live-api/tools).
            behavior=types.Behavior.NON_BLOCKING if t.background else None,
        )
        for t in tools
    ]
    speech = None
    if voice_mode and (voice or language):
        speech = types.SpeechConfig(
            voice_config=(
                types.VoiceConfig(prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name=voice))
                if voice
                else None
            ),
            language_code=language,
        )
    realtime_input = None
    if manual_turns:
        realtime_input = types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(disabled=True),
            activity_handling=types.ActivityHandling.NO_INTERRUPTION,
        )
    return types.LiveConnectConfig(
        realtime_input_config=realtime_input,
        response_modalities=[types.Modality.AUDIO if voice_mode else types.Modality.TEXT],
        system_instruction=instructions,
        tools=[types.Tool(function_declarations=declarations)] if declarations else None,
        input_audio_transcription=types.AudioTranscriptionConfig() if voice_mode else None,
        output_audio_transcription=types.AudioTranscriptionConfig() if voice_mode else None,
        session_resumption=types.SessionResumptionConfig(handle=handle),
        context_window_compression=types.ContextWindowCompressionConfig(
            sliding_window=types.SlidingWindow()
        ),
        speech_config=speech,
    )


_CALL_ASKED = "\n\nAnswer each user turn by {}."


def audio_input(b64_pcm16k: str) -> str:
    # The hot path: base64 needs no escaping, so the frame is assembled directly.
    return _AUDIO_PREFIX + b64_pcm16k + '"}}}'


def is_audio_input(frame: str) -> bool:
    return frame.startswith(_AUDIO_PREFIX)


def audio_stream_end() -> str:
    return '{"realtimeInput":{"audioStreamEnd":true}}'


def text_turn(text: str, *, turn_complete: bool = True, role: str = "user") -> str:
    """An ordered user turn (``clientContent``); without ``turn_complete`` it is only context."""
    return orjson.dumps(
        {
            "clientContent": {
                "turns": [{"role": role, "parts": [{"text": text}]}],
                "turnComplete": turn_complete,
            }
        }
    ).decode()


def history_turns(turns: Sequence[tuple[str, str]]) -> str:
    """Earlier conversation for a new session that could not be resumed (``model``/``user``)."""
    return orjson.dumps(
        {
            "clientContent": {
                "turns": [{"role": role, "parts": [{"text": text}]} for role, text in turns],
                "turnComplete": False,
            }
        }
    ).decode()


def tool_response(
    responses: Sequence[tuple[str, str, Mapping[str, Any]]], *, scheduling: str | None = None
) -> str:
    """One ``toolResponse`` answering every ``(id, name, response object)`` of a batch;
    ``scheduling`` for the results of non-blocking calls (``INTERRUPT``, ``WHEN_IDLE``,
    ``SILENT``)."""
    extra = {} if scheduling is None else {"scheduling": scheduling}
    return orjson.dumps(
        {
            "toolResponse": {
                "functionResponses": [
                    {"id": call_id, "name": name, "response": dict(response), **extra}
                    for call_id, name, response in responses
                ]
            }
        },
        default=dict,
    ).decode()


def decode_bytes(data: str) -> bytes:
    """Base64 in the standard or URL-safe alphabet, padded or not.

    The server may send either; the ``google-genai`` SDK decodes both (``_common.py`` of
    https://github.com/googleapis/python-genai).
    """
    if "-" in data or "_" in data:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return base64.b64decode(data + "=" * (-len(data) % 4))


def duration_s(value: Any) -> float | None:
    """A ``google.protobuf.Duration`` such as ``"9.5s"`` (or a number) in seconds."""
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.endswith("s"):
        try:
            return float(value[:-1])
        except ValueError:
            return None
    return None
