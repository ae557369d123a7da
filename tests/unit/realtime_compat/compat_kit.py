"""Helpers of the realtime_compat tests: a translator with counting ids, the gateway's events
as dicts, and the check that the official ``openai`` SDK's own models accept what we build.

``sdk_parse`` validates an event with pydantic against ``RealtimeServerEvent`` (strictly, as
the Agents SDK does: ``TypeAdapter.validate_python``), then walks the parsed models and fails on
any field the SDK's model does not declare (a misspelt name would otherwise slip through as an
"extra"). The only extras allowed are the session object's ``id``, ``object`` and
``expires_at``, which OpenAI sends but the SDK types as ``RealtimeSessionCreateRequest``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import pydantic
from openai.types.realtime import RealtimeServerEvent
from openai.types.realtime.realtime_client_event_param import RealtimeClientEventParam

from gateway.edges.realtime.server_wire import CountingIds, ServerEvent
from gateway.edges.realtime.session_config import SessionView
from gateway.edges.realtime.translate import Translator
from gateway.protocol import (
    ClientToolCancelled,
    ClientToolRequested,
    EndReason,
    ErrorCode,
    ErrorEvent,
    ResponseDone,
    ResponseStarted,
    ResponseStatus,
    SessionEnded,
    SpeechStarted,
    TextDelta,
    ToolErrorInfo,
    ToolFinished,
    ToolSlow,
    ToolStarted,
    TranscriptDelta,
    TranscriptDone,
    TranscriptRole,
)
from gateway.protocol import ServerEvent as GatewayEvent

SERVER_EVENTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(RealtimeServerEvent)
CLIENT_PARAMS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(RealtimeClientEventParam)
_SESSION_EXTRAS = frozenset({"id", "object", "expires_at"})


def view(**changes: Any) -> SessionView:
    base: dict[str, Any] = {"id": "sess_1", "model": "gpt-realtime", "expires_at": 1_700_003_600}
    return SessionView(**{**base, **changes})


def translator(*, show_tools: bool = False, **view_changes: Any) -> Translator:
    """A translator whose ``session.created`` was already sent (and checked by the SDK)."""
    compat = Translator(ids=CountingIds(), show_tools=show_tools)
    sdk_parse_all(compat.session_created(view(**view_changes)))
    return compat


def pcm(ms: int, value: int = 1000) -> bytes:
    """``ms`` of PCM16 at 24 kHz (48 bytes a millisecond), one repeated sample."""
    return value.to_bytes(2, "little", signed=True) * (24 * ms)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def frame(event: Mapping[str, Any]) -> bytes:
    return orjson.dumps(event)


def _extras(model: pydantic.BaseModel, path: str) -> Iterable[str]:
    extra = model.model_extra or {}
    allowed = _SESSION_EXTRAS if type(model).__name__ == "RealtimeSessionCreateRequest" else ()
    for key in extra:
        if key not in allowed:
            yield f"{path}.{key}"
    for name in type(model).model_fields:
        yield from _walk(getattr(model, name), f"{path}.{name}")


def _walk(value: Any, path: str) -> Iterable[str]:
    if isinstance(value, pydantic.BaseModel):
        yield from _extras(value, path)
    elif isinstance(value, list | tuple):
        for index, entry in enumerate(value):
            yield from _walk(entry, f"{path}[{index}]")


def sdk_parse(event: ServerEvent) -> pydantic.BaseModel:
    """The SDK's model of ``event``; fails on a shape or a field name the SDK does not know."""
    parsed = SERVER_EVENTS.validate_python(orjson.loads(orjson.dumps(event)))
    assert isinstance(parsed, pydantic.BaseModel)
    assert parsed.type == event["type"]  # type: ignore[attr-defined]
    unknown = list(_extras(parsed, event["type"]))
    assert not unknown, f"fields the SDK does not declare: {unknown}"
    return parsed


def sdk_parse_all(events: Iterable[ServerEvent]) -> list[pydantic.BaseModel]:
    return [sdk_parse(event) for event in events]


def types(events: Iterable[ServerEvent]) -> list[str]:
    return [event["type"] for event in events]


# The gateway's events (docs/protocol.md section 6), typed, as the bridge receives them -------

_TYPED: dict[str, type[Any]] = {
    cls.TYPE: cls
    for cls in (
        ResponseStarted,
        TextDelta,
        TranscriptDelta,
        TranscriptDone,
        ResponseDone,
        SpeechStarted,
        ToolStarted,
        ToolFinished,
        ToolSlow,
        ClientToolRequested,
        ClientToolCancelled,
        ErrorEvent,
        SessionEnded,
    )
}


def typed(event: Mapping[str, Any] | GatewayEvent) -> GatewayEvent:
    """A session event written as its wire JSON (easier to read in a test), as the typed event
    the session hands the bridge; a typed event is returned as it is."""
    if not isinstance(event, Mapping):
        return event
    fields = {key: value for key, value in event.items() if key != "type"}
    cls = _TYPED[str(event["type"])]
    if cls is ResponseDone:
        fields["status"] = ResponseStatus(fields["status"])
    elif cls is SessionEnded:
        fields["reason"] = EndReason(fields["reason"])
    elif cls is ErrorEvent:
        fields["code"] = ErrorCode(fields["code"])
    elif cls in (TranscriptDelta, TranscriptDone):
        fields["role"] = TranscriptRole(fields["role"])
    elif cls is ToolFinished and fields.get("error") is not None:
        fields["error"] = ToolErrorInfo(**fields["error"])
    event_of_cls: GatewayEvent = cls(**fields)
    return event_of_cls


def started(response_id: str = "r1") -> GatewayEvent:
    return ResponseStarted(response_id=response_id)


def transcript_delta(delta: str, response_id: str = "r1") -> GatewayEvent:
    return TranscriptDelta(role=TranscriptRole.ASSISTANT, response_id=response_id, delta=delta)


def transcript_done(text: str, response_id: str = "r1") -> GatewayEvent:
    return TranscriptDone(role=TranscriptRole.ASSISTANT, response_id=response_id, text=text)


def user_transcript_done(text: str) -> GatewayEvent:
    return TranscriptDone(role=TranscriptRole.USER, text=text)


def text_delta(delta: str, response_id: str = "r1") -> GatewayEvent:
    return TextDelta(response_id=response_id, delta=delta)


def done(
    status: str = "completed", text: str = "", response_id: str = "r1", **extra: Any
) -> GatewayEvent:
    return ResponseDone(
        response_id=response_id, status=ResponseStatus(status), text=text, usage=extra.get("usage")
    )


SPEECH_STARTED: GatewayEvent = SpeechStarted()
