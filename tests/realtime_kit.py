"""Shared helpers for tests of the OpenAI Realtime codec and transport: server events as dicts.

Importable from any test module (``tests/`` is on ``sys.path`` through the root conftest).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from transports import events as ev
from transports.base import ToolDeclaration, ToolResult, UpstreamConfig
from transports.openai_realtime.codec import RealtimeCodec

WEATHER = ToolDeclaration(
    "get_weather",
    "Weather for a city.",
    {
        "openaiRealtime": {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    },
)


def config(mode: str = "voice", **extra: Any) -> UpstreamConfig:
    return UpstreamConfig(mode=mode, instructions="Be brief.", tools=[WEATHER], **extra)  # type: ignore[arg-type]


def updated(*, interrupt: bool = True) -> dict[str, Any]:
    detection = {"type": "server_vad", "interrupt_response": interrupt, "create_response": True}
    return {
        "type": "session.updated",
        "session": {"audio": {"input": {"turn_detection": detection}}},
    }


def online(mode: str = "voice", **extra: Any) -> RealtimeCodec:
    """A codec connected and configured, with nothing queued."""
    codec = RealtimeCodec(config(mode, **extra))
    codec.receive({"type": "session.created", "session": {"id": "sess_1", "expires_at": 99}})
    codec.session_update()
    codec.receive(updated())
    codec.outbox.extend(codec.resume())
    codec.outbox.clear()
    return codec


def sent(codec: RealtimeCodec, *, keep_ids: bool = False) -> list[dict[str, Any]]:
    """The frames queued so far; response.create's event id is dropped unless ``keep_ids``."""
    frames = [orjson.loads(f) for f in codec.outbox]
    codec.outbox.clear()
    if not keep_ids:
        for frame in frames:
            if frame["type"] == "response.create":
                assert frame.pop("event_id").startswith("gw_response_")
    return frames


def types(frames: list[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in frames]


def feed(codec: RealtimeCodec, *events: dict[str, Any]) -> list[ev.UpstreamEvent]:
    out: list[ev.UpstreamEvent] = []
    for event in events:
        out.extend(codec.receive(event))
    return out


def created(rid: str) -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": rid, "status": "in_progress"}}


def done(
    rid: str, status: str = "completed", reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    details = {"type": status, "reason": reason} if reason else None
    response = {"id": rid, "status": status, "status_details": details, "output": [], **extra}
    return {"type": "response.done", "response": response}


def audio(rid: str, item: str, ms: int) -> dict[str, Any]:
    pcm = b"\x01\x00" * (24 * ms)
    delta = base64.b64encode(pcm).decode()
    return {
        "type": "response.output_audio.delta",
        "response_id": rid,
        "item_id": item,
        "delta": delta,
    }


def transcript(rid: str, item: str, delta: str) -> dict[str, Any]:
    kind = "response.output_audio_transcript.delta"
    return {"type": kind, "response_id": rid, "item_id": item, "delta": delta}


def text(rid: str, item: str, delta: str) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "response_id": rid,
        "item_id": item,
        "delta": delta,
    }


def call_events(
    rid: str, call_id: str, arguments: str = '{"city":"Paris"}'
) -> list[dict[str, Any]]:
    """Both events that name one call (the codec must run it once)."""
    item = {"type": "function_call", "call_id": call_id, "name": "get_weather"}
    return [
        {
            "type": "response.function_call_arguments.done",
            "response_id": rid,
            "call_id": call_id,
            "name": "get_weather",
            "arguments": arguments,
        },
        {
            "type": "response.output_item.done",
            "response_id": rid,
            "item": {**item, "arguments": arguments, "status": "completed"},
        },
    ]


def result(call_id: str, ok: bool = True) -> ToolResult:
    return ToolResult(call_id, "get_weather", {"ok": ok, "data": {"temp_c": 21}})


def replayed(codec: RealtimeCodec) -> list[dict[str, Any]]:
    """The frames a new connection would get, after the current one is lost."""
    codec.connection_lost()
    return [orjson.loads(f) for f in codec.resume()]


def replayed_items(codec: RealtimeCodec) -> list[dict[str, Any]]:
    return [f["item"] for f in replayed(codec) if f["type"] == "conversation.item.create"]
