"""The server messages of the fake Gemini Live server, built as the service writes them.

Pure. Every top-level key is one of the camelCase names the SDK maps (``setupComplete``,
``serverContent``, ``toolCall``, ``toolCallCancellation``, ``goAway``,
``sessionResumptionUpdate``, plus ``usageMetadata`` riding on ``turnComplete``); inner keys are
camelCase too. ``echo_frame`` writes its JSON by hand: it is the benchmark's hot path, and the
client's base64 text is spliced in unchanged (it is checked to hold only base64 characters, so it
needs no escaping).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fakes.gemini_live.wire import AUDIO_OUT_MIME, Message, duration_text

__all__ = [
    "AUDIO_TOKENS_PER_S",
    "ECHO_PIECE_CHARS",
    "echo_frame",
    "echo_frames",
    "generation_complete",
    "go_away",
    "history_text_tokens",
    "input_transcription",
    "interrupted",
    "model_audio",
    "model_text",
    "output_transcription",
    "resumption_update",
    "setup_complete",
    "text_tokens",
    "tool_call",
    "tool_call_cancellation",
    "turn_complete",
    "unannounced_field",
    "unannounced_message",
    "usage_metadata",
]

AUDIO_TOKENS_PER_S = 32  # Gemini counts 32 tokens per second of audio
ECHO_PIECE_CHARS = 960_000  # a multiple of 4, so each piece of base64 decodes on its own

_ECHO_HEAD = (
    b'{"serverContent":{"modelTurn":{"role":"model","parts":[{"inlineData":{"mimeType":"'
    + AUDIO_OUT_MIME.encode()
    + b'","data":"'
)
_ECHO_TAIL = b'"}}]}}}'


def setup_complete() -> Message:
    return {"setupComplete": {}}


def _content(**fields: Any) -> Message:
    return {"serverContent": fields}


def model_audio(data_b64: str) -> Message:
    part = {"inlineData": {"mimeType": AUDIO_OUT_MIME, "data": data_b64}}
    return _content(modelTurn={"role": "model", "parts": [part]})


def model_text(text: str) -> Message:
    return _content(modelTurn={"role": "model", "parts": [{"text": text}]})


def echo_frame(data_b64: str) -> bytes:
    """``model_audio(data_b64)`` serialised; ``data_b64`` must hold only base64 characters."""
    return _ECHO_HEAD + data_b64.encode("ascii") + _ECHO_TAIL


def echo_frames(data_b64: str) -> list[bytes]:
    """The echo of one audio input: one frame, or ~960 kB pieces when it would not fit the
    client's 1 MiB frame limit."""
    if len(data_b64) <= ECHO_PIECE_CHARS:
        return [echo_frame(data_b64)]
    return [
        echo_frame(data_b64[start : start + ECHO_PIECE_CHARS])
        for start in range(0, len(data_b64), ECHO_PIECE_CHARS)
    ]


def output_transcription(text: str) -> Message:
    return _content(outputTranscription={"text": text})


def input_transcription(text: str) -> Message:
    return _content(inputTranscription={"text": text})


def generation_complete() -> Message:
    return _content(generationComplete=True)


def interrupted() -> Message:
    return _content(interrupted=True)


def turn_complete(usage: Message) -> Message:
    return {"serverContent": {"turnComplete": True}, "usageMetadata": usage}


def tool_call(calls: Sequence[Message]) -> Message:
    return {"toolCall": {"functionCalls": [dict(call) for call in calls]}}


def tool_call_cancellation(ids: Sequence[str]) -> Message:
    return {"toolCallCancellation": {"ids": list(ids)}}


def go_away(time_left_s: float) -> Message:
    return {"goAway": {"timeLeft": duration_text(time_left_s)}}


def unannounced_message() -> Message:
    """A server message whose top-level key the API reference does not list: the service adds
    messages without notice, and a client must ignore what it does not know."""
    return {"unannouncedFeature": {"kind": "a feature this fake made up", "version": 2}}


def unannounced_field(message: Message) -> Message:
    """``message`` with a ``serverContent`` field the API reference does not list."""
    content = message.get("serverContent")
    if not isinstance(content, dict):
        return message
    return {**message, "serverContent": {**content, "unannouncedField": {"version": 2}}}


def resumption_update(handle: str, *, resumable: bool) -> Message:
    return {"sessionResumptionUpdate": {"newHandle": handle, "resumable": resumable}}


def text_tokens(text: str) -> int:
    """About four characters a token, at least one for any text."""
    return (len(text) + 3) // 4


def history_text_tokens(history: Sequence[Message]) -> int:
    """Tokens of the text parts of a conversation."""
    return sum(
        text_tokens(part["text"])
        for turn in history
        for part in turn.get("parts", ())
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    )


def usage_metadata(
    *, prompt_text: int, prompt_audio: int, response: int, response_modality: str
) -> Message:
    """``usageMetadata`` as Live reports it (``responseTokenCount``, per-modality details)."""
    prompt_details = [{"modality": "TEXT", "tokenCount": prompt_text}]
    if prompt_audio:
        prompt_details.append({"modality": "AUDIO", "tokenCount": prompt_audio})
    prompt = prompt_text + prompt_audio
    return {
        "promptTokenCount": prompt,
        "responseTokenCount": response,
        "totalTokenCount": prompt + response,
        "promptTokensDetails": prompt_details,
        "responseTokensDetails": [{"modality": response_modality, "tokenCount": response}],
    }
