"""The conversation of the fake: ordered items, client item validation, truncation.

Pure. An ``Entry`` is one item (the JSON the API shows) plus what the fake needs on the side:
the order it was added in (``seq``), its audio bytes and length, the start of each spoken word
(for truncation) and, for user audio, the utterance length the local brain answers to.

Items the client creates (``parse_client_item``) are checked the way the API checks them:
missing fields → ``missing_required_parameter``, a non-string ``function_call_output.output`` →
``invalid_type`` (``param: "item.output"``), a ``call_id`` with no ``function_call`` in the
conversation → ``invalid_tool_call_id``. Unknown item ids (truncate, delete, retrieve, a bad
``previous_item_id``) → ``invalid_value`` on ``item_id`` (wording inferred, no public capture).
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fakes.openai_realtime.audio import AudioFormat, decode_base64_audio
from fakes.openai_realtime.wire import (
    ClientError,
    IdSource,
    invalid_type,
    invalid_value,
    missing_parameter,
)

__all__ = [
    "CALL_ID_PATTERN",
    "TEXT_PARTS",
    "Conversation",
    "Entry",
    "parse_client_item",
]

CALL_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
ROOT = "root"

_PART_TYPES = {
    "user": ("input_text", "input_audio", "input_image"),
    "system": ("input_text",),
    "assistant": ("output_text", "output_audio"),
}
TEXT_PARTS = ("input_text", "output_text")


@dataclass(eq=False, slots=True)
class Entry:
    item: dict[str, Any]
    seq: int = 0
    audio: bytearray = field(default_factory=bytearray)  # wire bytes (input or output audio)
    audio_ms: int = 0  # assistant output audio length
    word_starts: list[tuple[str, int]] = field(default_factory=list)  # (delta, start ms)
    utterance_ms: int | None = None  # user audio: what the brain hears

    @property
    def id(self) -> str:
        item_id: str = self.item["id"]
        return item_id

    def snapshot(self) -> dict[str, Any]:
        """A copy for an event, so later changes do not leak into frames already queued."""
        return copy.deepcopy(self.item)

    def with_audio(self) -> dict[str, Any]:
        """The full item for ``conversation.item.retrieved``: audio included as base64."""
        item = self.snapshot()
        if self.audio and item.get("type") == "message":
            for part in item["content"]:
                if part.get("type") in ("input_audio", "output_audio"):
                    part["audio"] = base64.b64encode(self.audio).decode()
                    break
        return item


def _not_found(item_id: Any, param: str = "item_id") -> ClientError:
    return ClientError(
        "invalid_value", f"Item with item_id '{item_id}' not found in the conversation.", param
    )


class Conversation:
    def __init__(self, ids: IdSource) -> None:
        self._ids = ids
        self._entries: list[Entry] = []
        self._by_id: dict[str, Entry] = {}
        self._seq = 0

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def items(self) -> list[dict[str, Any]]:
        return [entry.item for entry in self._entries]

    @property
    def seq(self) -> int:
        """The ``seq`` of the newest entry (0 when none was ever added)."""
        return self._seq

    def get(self, item_id: str) -> Entry | None:
        return self._by_id.get(item_id)

    def require(self, item_id: Any) -> Entry:
        entry = self._by_id.get(item_id) if isinstance(item_id, str) else None
        if entry is None:
            raise _not_found(item_id)
        return entry

    def new_item_id(self) -> str:
        while (item_id := self._ids.next("item")) in self._by_id:
            pass
        return item_id

    def check_insert(self, item_id: str, previous_item_id: Any) -> None:
        """Raise what ``insert`` would, without changing anything."""
        if item_id in self._by_id:
            raise ClientError(
                "invalid_value", f"Item with item_id '{item_id}' already exists.", "item.id"
            )
        if previous_item_id not in (None, ROOT) and previous_item_id not in self._by_id:
            raise ClientError(
                "invalid_value",
                f"Previous item with item_id '{previous_item_id}' not found in the conversation.",
                "previous_item_id",
            )

    def insert(self, entry: Entry, previous_item_id: str | None = None) -> str | None:
        """Add after ``previous_item_id`` (``None``: at the end; ``"root"``: first).

        Returns the id of the item now before it (the events' ``previous_item_id``).
        """
        self.check_insert(entry.id, previous_item_id)
        if previous_item_id is None:
            index = len(self._entries)
        elif previous_item_id == ROOT:
            index = 0
        else:
            index = self._entries.index(self._by_id[previous_item_id]) + 1
        self._seq += 1
        entry.seq = self._seq
        self._entries.insert(index, entry)
        self._by_id[entry.id] = entry
        return self._entries[index - 1].id if index > 0 else None

    def previous_id(self, entry: Entry) -> str | None:
        index = self._entries.index(entry)
        return self._entries[index - 1].id if index > 0 else None

    def delete(self, item_id: Any) -> Entry:
        entry = self.require(item_id)
        self._entries.remove(entry)
        del self._by_id[entry.id]
        return entry

    def find_call(self, call_id: str) -> Entry | None:
        for entry in reversed(self._entries):
            if entry.item.get("type") == "function_call" and entry.item.get("call_id") == call_id:
                return entry
        return None

    def since(self, seq: int) -> list[Entry]:
        """Entries added after ``seq``, oldest first."""
        return sorted((e for e in self._entries if e.seq > seq), key=lambda e: e.seq)

    def truncate(self, item_id: Any, content_index: Any, audio_end_ms: Any) -> Entry:
        """Cut an assistant audio item at ``audio_end_ms`` (audio and transcript)."""
        entry = self.require(item_id)
        if isinstance(content_index, bool) or not isinstance(content_index, int):
            raise invalid_type("content_index", "an integer", content_index)
        if isinstance(audio_end_ms, bool) or not isinstance(audio_end_ms, int):
            raise invalid_type("audio_end_ms", "an integer", audio_end_ms)
        if audio_end_ms < 0:
            raise invalid_value("audio_end_ms", str(audio_end_ms))
        item = entry.item
        content = item.get("content") if item.get("type") == "message" else None
        part = (
            content[content_index]
            if isinstance(content, list) and 0 <= content_index < len(content)
            else None
        )
        if (
            item.get("role") != "assistant"
            or not isinstance(part, dict)
            or part.get("type") != "output_audio"
            or entry.audio_ms <= 0
        ):
            raise ClientError(
                "unsupported_content_type", "Only model output audio messages can be truncated"
            )
        if audio_end_ms > entry.audio_ms:
            raise ClientError(
                "invalid_value",
                f"Audio content of {entry.audio_ms}ms is already shorter than {audio_end_ms}ms",
                "audio_end_ms",
            )
        bytes_per_ms = len(entry.audio) // entry.audio_ms if entry.audio_ms else 0
        del entry.audio[audio_end_ms * bytes_per_ms :]
        entry.audio_ms = audio_end_ms
        entry.word_starts = [(w, start) for w, start in entry.word_starts if start < audio_end_ms]
        part["transcript"] = "".join(word for word, _ in entry.word_starts)
        return entry


# Client items --------------------------------------------------------------------------------


def _string(raw: dict[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    if key not in raw or raw[key] is None:
        if required:
            raise missing_parameter(f"{where}.{key}")
        return None
    value = raw[key]
    if not isinstance(value, str):
        raise invalid_type(f"{where}.{key}", "a string", value)
    return value


def _call_id(raw: dict[str, Any], where: str) -> str:
    call_id = _string(raw, "call_id", where)
    assert call_id is not None
    if not CALL_ID_PATTERN.match(call_id):
        raise ClientError(
            "invalid_value",
            f"Invalid 'call_id': '{call_id}'. Expected a string that matches the pattern "
            "'^[a-zA-Z0-9_-]+$'.",
            f"{where}.call_id",
        )
    return call_id


def _message_content(
    raw: dict[str, Any], role: str, where: str
) -> tuple[list[dict[str, Any]], bytes]:
    content = raw.get("content")
    if content is None:
        raise missing_parameter(f"{where}.content")
    if not isinstance(content, list):
        raise invalid_type(f"{where}.content", "an array", content)
    parts: list[dict[str, Any]] = []
    audio = b""
    for index, part in enumerate(content):
        at = f"{where}.content[{index}]"
        if not isinstance(part, dict):
            raise invalid_type(at, "an object", part)
        kind = part.get("type")
        if kind is None:
            raise missing_parameter(f"{at}.type")
        if kind not in _PART_TYPES[role]:
            raise invalid_value(f"{at}.type", str(kind), _PART_TYPES[role])
        if kind in TEXT_PARTS:
            parts.append({"type": kind, "text": _string(part, "text", at)})
        elif kind == "input_audio":
            transcript = _string(part, "transcript", at, required=False)
            if part.get("audio") is not None:
                decoded = decode_base64_audio(part["audio"])
                if decoded is None:
                    raise ClientError(
                        "invalid_value",
                        "Invalid 'audio'. Expected base64-encoded audio bytes.",
                        f"{at}.audio",
                    )
                audio += decoded
            parts.append({"type": "input_audio", "transcript": transcript})
        elif kind == "output_audio":
            if part.get("audio") is not None:
                raise ClientError(
                    "invalid_value",
                    "Assistant messages created by the client cannot contain audio.",
                    f"{at}.audio",
                )
            transcript = _string(part, "transcript", at)
            parts.append({"type": "output_audio", "transcript": transcript})
        else:  # input_image
            parts.append(dict(part))
    return parts, audio


def parse_client_item(
    raw: Any, conversation: Conversation, input_format: AudioFormat, where: str = "item"
) -> Entry:
    """Validate an item of ``conversation.item.create``; the entry is not added yet."""
    if raw is None:
        raise missing_parameter(where)
    if not isinstance(raw, dict):
        raise invalid_type(where, "an object", raw)
    kind = raw.get("type")
    if kind is None:
        raise missing_parameter(f"{where}.type")
    item_id = _string(raw, "id", where, required=False) or conversation.new_item_id()
    status = raw.get("status", "completed")
    if status not in ("completed", "incomplete", "in_progress"):
        raise invalid_value(f"{where}.status", str(status), ["completed", "incomplete"])
    base: dict[str, Any] = {"id": item_id, "object": "realtime.item", "type": kind}
    if kind == "message":
        role = raw.get("role")
        if role is None:
            raise missing_parameter(f"{where}.role")
        if role not in _PART_TYPES:
            raise invalid_value(f"{where}.role", str(role), list(_PART_TYPES))
        parts, audio = _message_content(raw, role, where)
        item = {**base, "status": status, "role": role, "content": parts}
        entry = Entry(item, audio=bytearray(audio))
        if audio:
            entry.utterance_ms = round(input_format.duration_ms(len(audio)))
        return entry
    if kind == "function_call":
        call_id = _call_id(raw, where)
        name = _string(raw, "name", where)
        arguments = _string(raw, "arguments", where, required=False) or ""
        item = {**base, "status": status, "name": name, "call_id": call_id}
        item["arguments"] = arguments
        return Entry(item)
    if kind == "function_call_output":
        call_id = _call_id(raw, where)
        if "output" not in raw:
            raise missing_parameter(f"{where}.output")
        if not isinstance(raw["output"], str):
            raise invalid_type(f"{where}.output", "a string", raw["output"])
        if conversation.find_call(call_id) is None:
            raise ClientError(
                "invalid_tool_call_id",
                f"Tool call ID '{call_id}' not found in conversation.",
                f"{where}.call_id",
            )
        item = {**base, "status": status, "call_id": call_id, "output": raw["output"]}
        return Entry(item)
    raise invalid_value(
        f"{where}.type", str(kind), ["message", "function_call", "function_call_output"]
    )
