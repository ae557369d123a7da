"""The fake's conversation edits as server events, the settings of a response, and the refusal
of ``output_audio_buffer.clear`` (OpenAI takes it only on WebRTC and SIP). Pure.

Each edit takes the client event (or the user's committed audio), the conversation and the
session's event stamper (``FakeSession.event``), changes the conversation, and returns the
``Send``s: an item created (``conversation.item.added`` and ``.done``), truncated, deleted or
retrieved, and committed input audio (``input_audio_buffer.committed``, the user item, and its
transcription when that is on). A missing or mistyped field raises ``ClientError`` before
anything changes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fakes.openai_realtime.audio import AudioFormat
from fakes.openai_realtime.config import ResponseOverrides
from fakes.openai_realtime.conversation import Conversation, Entry, parse_client_item
from fakes.openai_realtime.response import ResponseSettings
from fakes.openai_realtime.wire import (
    Action,
    ClientError,
    Event,
    Send,
    invalid_type,
    missing_parameter,
)
from transports.local.brain import utterance_transcript

__all__ = [
    "ItemEdit",
    "Stamper",
    "audio_committed",
    "input_items",
    "item_created",
    "item_deleted",
    "item_retrieved",
    "item_truncated",
    "output_audio_clear_refused",
    "response_settings",
]

Stamper = Callable[..., Event]
"""``stamp(type, **fields)``: a server event with its ``event_id`` (``FakeSession.event``)."""

ItemEdit = Callable[[dict[str, Any], Conversation, Stamper], list[Action]]
"""``item_truncated``, ``item_deleted``, ``item_retrieved``: (client event, conversation, stamp)."""


def item_created(
    raw: dict[str, Any], conversation: Conversation, input_format: AudioFormat, stamp: Stamper
) -> list[Action]:
    entry = parse_client_item(raw.get("item"), conversation, input_format)
    previous_item_id = raw.get("previous_item_id")
    if previous_item_id is not None and not isinstance(previous_item_id, str):
        raise invalid_type("previous_item_id", "a string", previous_item_id)
    previous = conversation.insert(entry, previous_item_id)
    return [
        Send(stamp(name, previous_item_id=previous, item=entry.snapshot()))
        for name in ("conversation.item.added", "conversation.item.done")
    ]


def item_truncated(raw: dict[str, Any], conversation: Conversation, stamp: Stamper) -> list[Action]:
    for name in ("item_id", "audio_end_ms"):
        if raw.get(name) is None:
            raise missing_parameter(name)
    content_index = raw.get("content_index", 0)
    entry = conversation.truncate(raw["item_id"], content_index, raw["audio_end_ms"])
    truncated = stamp(
        "conversation.item.truncated",
        item_id=entry.id,
        content_index=content_index,
        audio_end_ms=raw["audio_end_ms"],
    )
    return [Send(truncated)]


def item_deleted(raw: dict[str, Any], conversation: Conversation, stamp: Stamper) -> list[Action]:
    if raw.get("item_id") is None:
        raise missing_parameter("item_id")
    entry = conversation.delete(raw["item_id"])
    return [Send(stamp("conversation.item.deleted", item_id=entry.id))]


def item_retrieved(raw: dict[str, Any], conversation: Conversation, stamp: Stamper) -> list[Action]:
    if raw.get("item_id") is None:
        raise missing_parameter("item_id")
    entry = conversation.require(raw["item_id"])
    return [Send(stamp("conversation.item.retrieved", item=entry.with_audio()))]


def audio_committed(
    conversation: Conversation,
    stamp: Stamper,
    item_id: str,
    duration_ms: int,
    audio: bytes,
    *,
    transcribe: bool,
) -> list[Action]:
    """``committed``, the user item, and its transcription when ``transcribe``."""
    if conversation.get(item_id) is not None:  # the client took that id meanwhile
        item_id = conversation.new_item_id()
    part: dict[str, Any] = {"type": "input_audio", "transcript": None}
    item = {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": [part],
    }
    entry = Entry(item, audio=bytearray(audio), utterance_ms=duration_ms)
    previous = conversation.insert(entry)
    events = [
        stamp("input_audio_buffer.committed", previous_item_id=previous, item_id=item_id),
        stamp("conversation.item.added", previous_item_id=previous, item=entry.snapshot()),
        stamp("conversation.item.done", previous_item_id=previous, item=entry.snapshot()),
    ]
    if transcribe:
        transcript = utterance_transcript(duration_ms)
        part["transcript"] = transcript
        ids = {"item_id": item_id, "content_index": 0}
        events.append(
            stamp("conversation.item.input_audio_transcription.delta", **ids, delta=transcript)
        )
        events.append(
            stamp(
                "conversation.item.input_audio_transcription.completed",
                **ids,
                transcript=transcript,
                usage={"type": "duration", "seconds": round(duration_ms / 1000, 3)},
            )
        )
    return [Send(event) for event in events]


def output_audio_clear_refused(raw: dict[str, Any]) -> list[Action]:
    """OpenAI takes ``output_audio_buffer.clear`` only on WebRTC and SIP, never here."""
    raise ClientError(
        "invalid_value",
        "output_audio_buffer.clear is only supported for WebRTC and SIP sessions.",
        "type",
    )


def input_items(
    raw: list[Any], conversation: Conversation, input_format: AudioFormat
) -> list[Entry]:
    """``response.input``: item references and inline items (not added to the conversation)."""
    entries = []
    for index, item in enumerate(raw):
        where = f"response.input[{index}]"
        if isinstance(item, dict) and item.get("type") == "item_reference":
            entries.append(conversation.require(item.get("id")))
        else:
            entries.append(parse_client_item(item, conversation, input_format, where))
    return entries


def response_settings(
    config: dict[str, Any],
    conversation: Conversation,
    conversation_id: str,
    overrides: ResponseOverrides,
) -> ResponseSettings:
    """A response's settings: the session's, under the ``response.create`` overrides; its
    input token counts estimated from the conversation (about 4 characters a text token, one
    audio token per 100 ms of an utterance)."""
    output = config["audio"]["output"]
    text_chars = len(config.get("instructions") or "")
    audio_tokens = 0
    for entry in conversation:
        text_chars += len(str(entry.item.get("content") or entry.item.get("output") or ""))
        audio_tokens += (entry.utterance_ms or 0) // 100
    return ResponseSettings(
        modality=(overrides.output_modalities or config["output_modalities"])[0],
        audio_format=copy.deepcopy(overrides.audio_format or output["format"]),
        voice=copy.deepcopy(overrides.voice or output["voice"]),
        conversation_id=None if overrides.out_of_band else conversation_id,
        max_output_tokens=overrides.max_output_tokens or config["max_output_tokens"],
        metadata=overrides.metadata,
        input_text_tokens=text_chars // 4,
        input_audio_tokens=audio_tokens,
    )
