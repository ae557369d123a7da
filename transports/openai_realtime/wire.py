"""Wire models of the OpenAI Realtime GA protocol: the client events we send, as typed dicts.

Facts from OpenAI's Realtime API reference
(https://platform.openai.com/docs/api-reference/realtime-client-events and
https://platform.openai.com/docs/api-reference/realtime-server-events): GA event names, a
``session.update`` that must carry ``type: "realtime"``, flat function tools, audio formats as
objects, tool results as string ``output``s. Builders return the JSON text of one client event
(compact, orjson) so the transport sends it as one text frame without another encoding step.
Server events are read as plain mappings by the codec: the SDK's pydantic parse is too costly for
fifty audio deltas a second per session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from transports.base import ForcedTool, Mode, ToolChoice, UpstreamConfig
from transports.base import TurnDetection as Turns

__all__ = [
    "AUDIO_BYTES_PER_MS",
    "AUDIO_RATE",
    "DEFAULT_MODEL",
    "DEFAULT_TRANSCRIPTION_MODEL",
    "G711_BYTES_PER_MS",
    "G711_ENCODINGS",
    "G711_RATE",
    "SERVER_VAD_PREFIX_PADDING_MS",
    "AudioFormat",
    "FunctionTool",
    "SessionConfig",
    "TurnDetection",
    "assistant_text_item",
    "audio_append",
    "audio_clear",
    "audio_commit",
    "audio_format",
    "bytes_per_ms",
    "function_call_item",
    "function_call_output_item",
    "function_tools",
    "item_create",
    "response_cancel",
    "response_create",
    "session_config",
    "session_update",
    "system_text_item",
    "tool_choice",
    "truncate",
    "turn_detection",
    "user_text_item",
]

DEFAULT_MODEL = "gpt-realtime"
DEFAULT_TRANSCRIPTION_MODEL = "gpt-4o-mini-transcribe"
# PCM16 mono at 24 kHz is the only PCM rate the API takes (and the one it produces).
AUDIO_RATE = 24000
AUDIO_BYTES_PER_MS = AUDIO_RATE * 2 // 1000
# G.711, µ-law (``audio/pcmu``) or A-law (``audio/pcma``): the GA formats a phone call's audio
# passes through untouched in: 8 kHz, one byte a sample, both ways.
G711_ENCODINGS: frozenset[str] = frozenset({"pcmu", "pcma"})
G711_RATE = 8000
G711_BYTES_PER_MS = G711_RATE // 1000
# server_vad's default (https://platform.openai.com/docs/guides/realtime-vad), when session.updated
# leaves it out.
SERVER_VAD_PREFIX_PADDING_MS = 300


def bytes_per_ms(config: UpstreamConfig) -> int:
    """Audio bytes a millisecond, both ways, in the format ``session_config`` asks for."""
    return G711_BYTES_PER_MS if config.client_encoding in G711_ENCODINGS else AUDIO_BYTES_PER_MS


class AudioFormat(TypedDict):
    type: Literal["audio/pcm", "audio/pcmu", "audio/pcma"]
    rate: NotRequired[int]


class TurnDetection(TypedDict):
    type: Literal["server_vad", "semantic_vad"]
    create_response: bool
    interrupt_response: bool
    threshold: NotRequired[float]
    prefix_padding_ms: NotRequired[int]
    silence_duration_ms: NotRequired[int]
    idle_timeout_ms: NotRequired[int | None]
    eagerness: NotRequired[str]


class Transcription(TypedDict):
    model: str
    language: NotRequired[str]


class AudioInput(TypedDict):
    format: AudioFormat
    turn_detection: TurnDetection | None
    transcription: Transcription | None


class AudioOutput(TypedDict):
    format: AudioFormat
    voice: NotRequired[str]


class Audio(TypedDict):
    input: AudioInput
    output: AudioOutput


class FunctionTool(TypedDict):
    type: Literal["function"]
    name: str
    description: str
    parameters: dict[str, Any]


class NamedFunction(TypedDict):
    type: Literal["function"]
    name: str


WireToolChoice = Literal["auto", "none", "required"] | NamedFunction


class SessionConfig(TypedDict):
    type: Literal["realtime"]
    instructions: str
    output_modalities: list[Literal["audio", "text"]]
    audio: Audio
    tools: list[FunctionTool]
    tool_choice: WireToolChoice
    model: NotRequired[str]


class ContentPart(TypedDict):
    type: Literal["input_text", "output_text"]
    text: str


class MessageItem(TypedDict):
    type: Literal["message"]
    role: Literal["user", "assistant", "system"]
    content: list[ContentPart]


class FunctionCallItem(TypedDict):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(TypedDict):
    type: Literal["function_call_output"]
    call_id: str
    output: str


Item = MessageItem | FunctionCallItem | FunctionCallOutputItem


def _json(event: Mapping[str, Any]) -> str:
    return orjson.dumps(event).decode()


# -- items -------------------------------------------------------------------------------------


def user_text_item(text: str) -> MessageItem:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def system_text_item(text: str) -> MessageItem:
    return {"type": "message", "role": "system", "content": [{"type": "input_text", "text": text}]}


def assistant_text_item(text: str) -> MessageItem:
    # Assistant items created by a client carry text only; audio cannot be replayed.
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def function_call_item(call_id: str, name: str, arguments: str) -> FunctionCallItem:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def function_call_output_item(call_id: str, output: str) -> FunctionCallOutputItem:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


# -- client events -----------------------------------------------------------------------------


def session_update(session: SessionConfig) -> str:
    return _json({"type": "session.update", "session": session})


def item_create(item: Item) -> str:
    return _json({"type": "conversation.item.create", "item": item})


def response_create(event_id: str | None = None, choice: WireToolChoice | None = None) -> str:
    # The session's tools; its tool_choice unless ``choice`` overrides it for this response
    # (a reply to tool results is never forced to call again: it would loop).
    # The event id comes back in error.event_id if the server refuses this response.
    event: dict[str, Any] = {"type": "response.create"}
    if event_id is not None:
        event["event_id"] = event_id
    if choice is not None:
        event["response"] = {"tool_choice": choice}
    return _json(event)


def tool_choice(choice: ToolChoice) -> WireToolChoice:
    if isinstance(choice, ForcedTool):
        return {"type": "function", "name": choice.name}
    return choice


def turn_detection(turns: Turns) -> TurnDetection | None:
    """The session's ``turn_detection``: None for manual turns; else the client's own
    detector settings (whatever the gateway does not set itself), else server VAD."""
    if turns.manual:
        return None
    detection: dict[str, Any] = {"type": "server_vad", **(turns.settings or {})}
    # The gateway answers every turn and lets speech cut a reply (it cancels itself).
    detection.update(create_response=True, interrupt_response=True)
    return detection  # type: ignore[return-value]


def holding_line(event_id: str, instructions: str, modalities: list[str]) -> str:
    """An out-of-band response: spoken (or written) from ``instructions`` alone, outside the
    conversation (``conversation: "none"``, no input), so the model's memory is unchanged."""
    return _json(
        {
            "type": "response.create",
            "event_id": event_id,
            "response": {
                "conversation": "none",
                "input": [],
                "instructions": instructions,
                "output_modalities": modalities,
                "tool_choice": "none",
                "metadata": {"gateway": "holding_line"},
            },
        }
    )


def response_cancel(response_id: str | None = None) -> str:
    if response_id is None:
        return '{"type":"response.cancel"}'
    return _json({"type": "response.cancel", "response_id": response_id})


def truncate(item_id: str, audio_end_ms: int) -> str:
    return _json(
        {
            "type": "conversation.item.truncate",
            "item_id": item_id,
            "content_index": 0,
            "audio_end_ms": audio_end_ms,
        }
    )


def audio_append(b64_audio: str) -> str:
    # The hot path: base64 needs no JSON escaping, so the frame is assembled directly.
    return '{"type":"input_audio_buffer.append","audio":"' + b64_audio + '"}'


def audio_commit() -> str:
    return '{"type":"input_audio_buffer.commit"}'


def audio_clear() -> str:
    return '{"type":"input_audio_buffer.clear"}'


def function_tools(declarations: Sequence[Mapping[str, Any]]) -> list[FunctionTool]:
    """The registry's ``openaiRealtime`` declarations, checked to be flat function tools."""
    tools: list[FunctionTool] = []
    for declaration in declarations:
        if declaration.get("type") != "function" or "function" in declaration:
            raise ValueError(f"not a flat Realtime function tool: {declaration.get('name')!r}")
        tools.append(
            {
                "type": "function",
                "name": str(declaration["name"]),
                "description": str(declaration.get("description", "")),
                "parameters": dict(declaration.get("parameters") or {"type": "object"}),
            }
        )
    return tools


def audio_format(config: UpstreamConfig) -> AudioFormat:
    """The GA format of the session's audio, both ways: the client's G.711 law as it is (a
    phone call), else PCM16 at 24 kHz."""
    if config.client_encoding == "pcmu":
        return {"type": "audio/pcmu"}
    if config.client_encoding == "pcma":
        return {"type": "audio/pcma"}
    return {"type": "audio/pcm", "rate": AUDIO_RATE}


def session_config(
    config: UpstreamConfig,
    mode: Mode,
    instructions: str,
    *,
    transcription_model: str = DEFAULT_TRANSCRIPTION_MODEL,
) -> SessionConfig:
    """The GA ``session.update`` body for this session in ``mode`` (and its turn detection and
    tool choice: ``config``'s, which ``update`` replaces)."""
    choice = config.tool_choice
    voice = mode == "voice"
    pcm = audio_format(config)
    transcription: Transcription | None = None
    if voice:
        transcription = {"model": transcription_model}
        if config.locale:
            transcription["language"] = config.locale.split("-")[0].lower()
    output: AudioOutput = {"format": pcm}
    if config.voice:
        output["voice"] = config.voice
    return {
        "type": "realtime",
        "instructions": instructions,
        "output_modalities": ["audio"] if voice else ["text"],
        "audio": {
            "input": {
                "format": pcm,
                "turn_detection": turn_detection(config.turn_detection) if voice else None,
                "transcription": transcription,
            },
            "output": output,
        },
        "tools": function_tools([t.provider_schemas["openaiRealtime"] for t in config.tools]),
        "tool_choice": tool_choice(choice),
    }
