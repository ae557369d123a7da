"""GA Realtime client events (the JSON text messages an OpenAI Realtime client sends) decoded
into frozen dataclasses: a tagged union (``TYPE``) with an ``UnknownEvent`` case.

``decode_client_event(frame)`` returns one event or raises ``CompatError`` with OpenAI's code,
message and ``param``, and the client's ``event_id`` when it was readable:

- not JSON → ``invalid_json``; not an object → ``invalid_type``; no ``type`` →
  ``missing_required_parameter`` (``param: "type"``);
- a field of the wrong JSON type → ``invalid_type``; a value outside what this endpoint takes
  → ``invalid_value``; a required field missing → ``missing_required_parameter``;
- ``session.update`` follows ``session_config`` (undocumented keys → ``unknown_parameter``);
  ``response.create``'s ``response`` is checked the same way.

A ``type`` string this module does not know decodes to ``UnknownEvent`` rather than raising:
the bridge decides, and ``UnknownEvent.error()`` is what OpenAI answers (``invalid_value`` on
``type``, listing the supported types; for ``output_audio_buffer.clear``, OpenAI's WebSocket
refusal). Unknown keys at the top level of an event are ignored.

Audio (``input_audio_buffer.append``, ``input_audio`` parts) is strict base64 of PCM16 at
24 kHz: what does not decode is ``invalid_value`` (``param: "audio"``), an odd byte count too
(half a sample). An empty ``audio`` decodes to ``b""`` (nothing to forward). The 15 MiB limit
of one append is the socket's frame limit, not checked here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias, cast

import orjson

from .client_items import (
    FunctionCallOutput,
    InputAudio,
    InputText,
    Item,
    SystemMessage,
    UserMessage,
    decode_audio,
    decode_item,
)
from .errors import CompatError, invalid_type, invalid_value, missing_parameter
from .json_fields import (
    check_keys,
    choice,
    optional_string,
    require_object,
    required_int,
    required_string,
)
from .session_config import Modality, SessionPatch, decode_session_patch, modality_of

__all__ = [
    "CLIENT_EVENT_TYPES",
    "ClientEvent",
    "CompatError",
    "FunctionCallOutput",
    "InputAudio",
    "InputAudioAppend",
    "InputAudioClear",
    "InputAudioCommit",
    "InputText",
    "Item",
    "ItemCreate",
    "ItemDelete",
    "ItemRetrieve",
    "ItemTruncate",
    "ResponseCancel",
    "ResponseCreate",
    "ResponseParams",
    "SessionUpdate",
    "SystemMessage",
    "UnknownEvent",
    "UserMessage",
    "append_audio",
    "decode_client_event",
]

# OpenAI's own list (SDK ``RealtimeClientEvent``), in the order its error message gives it.
CLIENT_EVENT_TYPES = (
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.truncate",
    "conversation.item.delete",
    "conversation.item.retrieve",
    "response.create",
    "response.cancel",
    "output_audio_buffer.clear",
)
MAX_METADATA_PAIRS = 16
_RESPONSE_APPLIED = frozenset({"instructions", "output_modalities", "conversation", "metadata"})
_RESPONSE_IGNORED = frozenset(
    {
        "tools",
        "tool_choice",
        "max_output_tokens",
        "audio",
        "input",
        "prompt",
        "reasoning",
        "parallel_tool_calls",
    }
)


# Events --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionUpdate:
    TYPE: ClassVar[str] = "session.update"

    session: SessionPatch
    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputAudioAppend:
    TYPE: ClassVar[str] = "input_audio_buffer.append"

    audio: bytes  # PCM16 at 24 kHz, whole samples
    encoded: str = ""  # ``audio`` as the client sent it: valid standard base64
    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputAudioCommit:
    TYPE: ClassVar[str] = "input_audio_buffer.commit"

    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputAudioClear:
    TYPE: ClassVar[str] = "input_audio_buffer.clear"

    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemCreate:
    TYPE: ClassVar[str] = "conversation.item.create"

    item: Item
    previous_item_id: str | None = None  # None: at the end; "root": first
    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemDelete:
    TYPE: ClassVar[str] = "conversation.item.delete"

    item_id: str
    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemTruncate:
    TYPE: ClassVar[str] = "conversation.item.truncate"

    item_id: str
    content_index: int
    audio_end_ms: int
    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRetrieve:
    """Sent by the Agents SDK after a transcription or a truncation."""

    TYPE: ClassVar[str] = "conversation.item.retrieve"

    item_id: str
    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseParams:
    """``response.create``'s ``response``: ``None`` fields keep the session's values."""

    instructions: str | None = None
    modality: Modality | None = None
    out_of_band: bool = False  # conversation: "none"
    metadata: Mapping[str, str] | None = None
    ignored: tuple[str, ...] = ()  # documented fields given but not applied (param paths)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseCreate:
    TYPE: ClassVar[str] = "response.create"

    response: ResponseParams = field(default_factory=ResponseParams)
    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseCancel:
    TYPE: ClassVar[str] = "response.cancel"

    response_id: str | None = None
    event_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownEvent:
    """A ``type`` this endpoint does not handle (OpenAI may add client events without notice)."""

    type: str
    raw: Mapping[str, Any]
    event_id: str | None = None

    def error(self) -> CompatError:
        """What OpenAI's server answers to it over a WebSocket."""
        if self.type == "output_audio_buffer.clear":
            error = CompatError(
                "invalid_value",
                "output_audio_buffer.clear is only supported for WebRTC and SIP sessions.",
                param="type",
            )
        else:
            error = invalid_value("type", self.type, CLIENT_EVENT_TYPES)
        return error.for_event(self.event_id)


ClientEvent: TypeAlias = (
    SessionUpdate
    | InputAudioAppend
    | InputAudioCommit
    | InputAudioClear
    | ItemCreate
    | ItemDelete
    | ItemTruncate
    | ItemRetrieve
    | ResponseCreate
    | ResponseCancel
    | UnknownEvent
)


# Decoding ------------------------------------------------------------------------------------


def decode_client_event(frame: str | bytes) -> ClientEvent:
    """One client text message → its event; ``CompatError`` for what OpenAI would refuse."""
    try:
        raw = orjson.loads(frame)
    except orjson.JSONDecodeError as error:
        raise CompatError("invalid_json", f"Invalid JSON in client event: {error}") from None
    if not isinstance(raw, dict):
        raise CompatError("invalid_type", "Invalid client event: expected a JSON object.")
    event_id = raw.get("event_id")
    if not isinstance(event_id, str):
        event_id = None
    try:
        kind = raw.get("type")
        if kind is None:
            raise missing_parameter("type")
        if not isinstance(kind, str):
            raise invalid_type("type", "a string", kind)
        decoder = _DECODERS.get(kind)
        if decoder is None:
            return UnknownEvent(type=kind, raw=raw, event_id=event_id)
        return decoder(raw, event_id)
    except CompatError as error:
        raise error.for_event(event_id) from None


def append_audio(frame: str | bytes) -> tuple[bytes, str] | None:
    """The relay's decoder for the one event sent 50 times a second: a well-formed
    ``input_audio_buffer.append`` with audio → ``(pcm, base64 as sent)``, without building the
    event; None for any other frame, which ``decode_client_event`` then decodes or refuses.
    It accepts only what that decodes to an ``InputAudioAppend`` with the same audio (a test
    holds the two to it): the same parse and the same ``decode_audio``."""
    try:
        raw = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return None
    if type(raw) is not dict or raw.get("type") != InputAudioAppend.TYPE:
        return None
    encoded = raw.get("audio")
    try:
        pcm = decode_audio(encoded, "audio")
    except CompatError:
        return None
    return (pcm, cast(str, encoded)) if pcm else None  # decode_audio took only a string


def _session_update(raw: dict[str, Any], event_id: str | None) -> SessionUpdate:
    return SessionUpdate(session=decode_session_patch(raw.get("session")), event_id=event_id)


def _append(raw: dict[str, Any], event_id: str | None) -> InputAudioAppend:
    if raw.get("audio") is None:
        raise missing_parameter("audio")
    encoded = raw["audio"]
    return InputAudioAppend(
        audio=decode_audio(encoded, "audio"), encoded=encoded, event_id=event_id
    )


def _commit(raw: dict[str, Any], event_id: str | None) -> InputAudioCommit:
    return InputAudioCommit(event_id=event_id)


def _clear(raw: dict[str, Any], event_id: str | None) -> InputAudioClear:
    return InputAudioClear(event_id=event_id)


def _item_create(raw: dict[str, Any], event_id: str | None) -> ItemCreate:
    return ItemCreate(
        item=decode_item(raw.get("item")),
        previous_item_id=optional_string(raw, "previous_item_id", "previous_item_id"),
        event_id=event_id,
    )


def _item_delete(raw: dict[str, Any], event_id: str | None) -> ItemDelete:
    return ItemDelete(item_id=required_string(raw, "item_id", "item_id"), event_id=event_id)


def _item_retrieve(raw: dict[str, Any], event_id: str | None) -> ItemRetrieve:
    return ItemRetrieve(item_id=required_string(raw, "item_id", "item_id"), event_id=event_id)


def _item_truncate(raw: dict[str, Any], event_id: str | None) -> ItemTruncate:
    return ItemTruncate(
        item_id=required_string(raw, "item_id", "item_id"),
        content_index=required_int(raw, "content_index", "content_index"),
        audio_end_ms=required_int(raw, "audio_end_ms", "audio_end_ms"),
        event_id=event_id,
    )


def _metadata(value: Any, param: str) -> dict[str, str]:
    metadata = require_object(value, param)
    if len(metadata) > MAX_METADATA_PAIRS:
        raise CompatError(
            "invalid_value",
            f"Invalid '{param}': expected an object with at most {MAX_METADATA_PAIRS} "
            f"properties, but got {len(metadata)}.",
            param=param,
        )
    for key, entry in metadata.items():
        if not isinstance(entry, str):
            raise invalid_type(f"{param}.{key}", "a string", entry)
    return dict(metadata)


def _response_params(value: Any) -> ResponseParams:
    params = require_object(value, "response")
    check_keys(params, _RESPONSE_APPLIED | _RESPONSE_IGNORED, "response")
    modality = None
    if params.get("output_modalities") is not None:
        modality = modality_of(params["output_modalities"], "response.output_modalities")
    conversation = "auto"
    if params.get("conversation") is not None:
        conversation = choice(params["conversation"], "response.conversation", ("auto", "none"))
    metadata = None
    if params.get("metadata") is not None:
        metadata = _metadata(params["metadata"], "response.metadata")
    return ResponseParams(
        instructions=optional_string(params, "instructions", "response.instructions"),
        modality=modality,
        out_of_band=conversation == "none",
        metadata=metadata,
        ignored=tuple(f"response.{key}" for key in params if key in _RESPONSE_IGNORED),
    )


def _response_create(raw: dict[str, Any], event_id: str | None) -> ResponseCreate:
    if raw.get("response") is None:
        return ResponseCreate(event_id=event_id)
    return ResponseCreate(response=_response_params(raw["response"]), event_id=event_id)


def _response_cancel(raw: dict[str, Any], event_id: str | None) -> ResponseCancel:
    response_id = optional_string(raw, "response_id", "response_id")
    return ResponseCancel(response_id=response_id, event_id=event_id)


_DECODERS: Mapping[str, Callable[[dict[str, Any], str | None], ClientEvent]] = {
    SessionUpdate.TYPE: _session_update,
    InputAudioAppend.TYPE: _append,
    InputAudioCommit.TYPE: _commit,
    InputAudioClear.TYPE: _clear,
    ItemCreate.TYPE: _item_create,
    ItemDelete.TYPE: _item_delete,
    ItemRetrieve.TYPE: _item_retrieve,
    ItemTruncate.TYPE: _item_truncate,
    ResponseCreate.TYPE: _response_create,
    ResponseCancel.TYPE: _response_cancel,
}
