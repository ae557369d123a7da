"""The protocols ``scripts/bench relay`` speaks, one codec per target and provider: no sockets.

A provider fixes the audio the bench sends: 20 ms frames of PCM16 at its input rate (OpenAI
Realtime 24 kHz in and out: 960 bytes; Gemini Live 16 kHz in, 24 kHz out: 640 bytes). Each fake
echoes the frame's bytes unchanged (Gemini's under a 24 kHz label), so every frame comes back
byte-identical with its stamp (``bench.relay.stats``) whatever the path:

- ``direct`` to the OpenAI fake: ``input_audio_buffer.append`` with base64 audio, back in
  ``response.output_audio.delta``;
- ``direct`` to the Gemini fake (TLS): a ``setup`` answered by ``setupComplete``, then
  ``realtimeInput.audio`` with base64 audio, back in ``serverContent.modelTurn.parts[].inlineData``
  (server JSON arrives in binary frames; other messages are ignored);
- ``gateway``: the gateway's client protocol, ``session.start`` at the provider's rates (so the
  gateway resamples neither way), then binary PCM16 frames both ways.
"""

from __future__ import annotations

import base64
import binascii
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

from bench.relay.stats import FrameReassembler

__all__ = [
    "GEMINI_MODEL",
    "GEMINI_PATH",
    "PROVIDERS",
    "Codec",
    "GatewayCodec",
    "GeminiDirectCodec",
    "OpenAIDirectCodec",
    "Provider",
    "ProviderSpec",
    "Target",
    "direct_url",
    "gemini_setup",
    "is_setup_complete",
    "make_codec",
]

Provider = Literal["openai", "gemini"]
Target = Literal["direct", "gateway"]

FRAME_MS = 20
GEMINI_MODEL = "gemini-2.5-flash-native-audio-preview-09-2025"
GEMINI_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
_OPENAI_MODEL = "gpt-realtime"


@dataclass(frozen=True)
class ProviderSpec:
    name: Provider
    title: str  # what the upstream is, for the table's title
    input_rate: int  # Hz, what the bench sends
    output_rate: int  # Hz, the label on what comes back (the bytes are the same)

    @property
    def frame_bytes(self) -> int:
        """20 ms of mono PCM16 at the input rate."""
        return self.input_rate * 2 * FRAME_MS // 1000

    def gateway_start(self) -> str:
        """``session.start`` at the provider's own rates: the gateway resamples neither way."""
        audio = {"input_rate": self.input_rate, "output_rate": self.output_rate}
        return orjson.dumps({"type": "session.start", "mode": "voice", "audio": audio}).decode()


PROVIDERS: dict[Provider, ProviderSpec] = {
    "openai": ProviderSpec("openai", "OpenAI Realtime fake (echo)", 24000, 24000),
    "gemini": ProviderSpec("gemini", "Gemini Live fake (echo, TLS)", 16000, 24000),
}


def direct_url(provider: Provider, upstream_url: str) -> str:
    """Where ``direct`` connects, from the fake's base URL (``ws://…/v1`` or ``https://…``)."""
    base = upstream_url.rstrip("/")
    if provider == "openai":
        return f"{base}/realtime?model={_OPENAI_MODEL}"
    if base.startswith("https://"):
        base = "wss://" + base.removeprefix("https://")
    return base + GEMINI_PATH


def gemini_setup(model: str = GEMINI_MODEL) -> str:
    """The first client message of a Gemini Live session: audio out, nothing else."""
    setup = {"model": f"models/{model}", "generationConfig": {"responseModalities": ["AUDIO"]}}
    return orjson.dumps({"setup": setup}).decode()


def is_setup_complete(message: str | bytes) -> bool:
    return "setupComplete" in _object(message)


def _object(message: str | bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(message)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


_URL_SAFE = str.maketrans("-_", "+/")


def _b64decode(data: str) -> bytes:
    """Standard or URL-safe alphabet, padded or not (the Gemini wire allows each); strict."""
    padded = data.translate(_URL_SAFE) + "=" * (-len(data) % 4)
    return base64.b64decode(padded, validate=True)


class Codec(Protocol):
    def encode(self, frame: bytes) -> str | bytes: ...

    def decode(self, message: str | bytes) -> list[bytes]: ...


class OpenAIDirectCodec:
    def __init__(self, events: Counter[str]) -> None:
        self._events = events

    def encode(self, frame: bytes) -> str:
        audio = base64.b64encode(frame).decode("ascii")
        return orjson.dumps({"type": "input_audio_buffer.append", "audio": audio}).decode()

    def decode(self, message: str | bytes) -> list[bytes]:
        event = orjson.loads(message)
        kind = event.get("type")
        if kind == "response.output_audio.delta":
            return [base64.b64decode(event["delta"])]
        if kind == "error":
            self._events[f"error:{event.get('error', {}).get('code')}"] += 1
        return []


class GeminiDirectCodec:
    """``realtimeInput`` audio out; the audio parts of ``serverContent.modelTurn`` back."""

    _PREFIX = '{"realtimeInput":{"audio":{"mimeType":"audio/pcm;rate=16000","data":"'

    def __init__(self, events: Counter[str]) -> None:
        self._events = events

    def encode(self, frame: bytes) -> str:
        # base64 needs no JSON escaping: the message is assembled directly
        return self._PREFIX + base64.b64encode(frame).decode("ascii") + '"}}}'

    def decode(self, message: str | bytes) -> list[bytes]:
        event = _object(message)
        content = event.get("serverContent")
        if not isinstance(content, dict):
            for kind in ("goAway", "toolCall", "toolCallCancellation", "setupComplete"):
                if kind in event:
                    self._events[f"gemini:{kind}"] += 1
            return []
        frames: list[bytes] = []
        turn = content.get("modelTurn")
        parts = turn.get("parts") if isinstance(turn, dict) else None
        for part in parts if isinstance(parts, list) else ():
            inline = part.get("inlineData") if isinstance(part, dict) else None
            if not isinstance(inline, dict):
                continue
            if not str(inline.get("mimeType", "")).startswith("audio/"):
                self._events["gemini:not_audio"] += 1
                continue
            try:
                frames.append(_b64decode(str(inline.get("data", ""))))
            except (binascii.Error, ValueError):
                self._events["gemini:bad_base64"] += 1
        for flag in ("interrupted", "turnComplete"):
            if content.get(flag):
                self._events[f"gemini:{flag}"] += 1
        return frames


class GatewayCodec:
    def __init__(self, events: Counter[str], frame_bytes: int) -> None:
        self._events = events
        self.reassembler = FrameReassembler(frame_bytes)

    def encode(self, frame: bytes) -> bytes:
        return frame

    def decode(self, message: str | bytes) -> list[bytes]:
        if isinstance(message, bytes):
            return self.reassembler.feed(message)
        event = orjson.loads(message)
        kind = event.get("type")
        if kind == "error":
            self._events[f"error:{event.get('code')}"] += 1
        elif kind == "session.ended":
            self._events[f"session.ended:{event.get('reason')}"] += 1
        return []


def make_codec(target: Target, provider: ProviderSpec, events: Counter[str]) -> Codec:
    if target == "gateway":
        return GatewayCodec(events, provider.frame_bytes)
    if provider.name == "gemini":
        return GeminiDirectCodec(events)
    return OpenAIDirectCodec(events)
