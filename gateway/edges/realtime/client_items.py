"""The items a GA client may create (``conversation.item.create``), decoded and validated.

Decoded (docs/protocol.md 10.15 says which of these the bridge then refuses): ``message`` with role
``user`` (``input_text`` and ``input_audio`` parts) or ``system`` (``input_text``), and
``function_call_output`` (``call_id`` matching ``^[a-zA-Z0-9_-]+$``, ``output`` a string). Other
item types (assistant messages, ``function_call``, MCP items) and parts (``input_image``) are
``invalid_value`` naming the supported ones; this gateway cannot put them in its upstream's memory.
An item's ``status`` and ``object`` are ignored. ``to_wire`` is the item as the server echoes it in
``conversation.item.added`` / ``.done`` (audio bytes are never echoed).
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from .errors import CompatError, invalid_type, missing_parameter
from .json_fields import choice, optional_string, require_object, required_string

__all__ = [
    "CALL_ID_PATTERN",
    "FunctionCallOutput",
    "InputAudio",
    "InputText",
    "Item",
    "SystemMessage",
    "UserMessage",
    "decode_audio",
    "decode_item",
]

CALL_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")


@dataclass(frozen=True, slots=True)
class InputText:
    TYPE: ClassVar[str] = "input_text"

    text: str


@dataclass(frozen=True, slots=True)
class InputAudio:
    TYPE: ClassVar[str] = "input_audio"

    audio: bytes  # PCM16 at 24 kHz (may be empty)
    transcript: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    id: str | None
    content: tuple[InputText | InputAudio, ...]

    @property
    def text(self) -> str:
        """The text parts joined by a space (what a ``text.send`` would carry)."""
        return " ".join(part.text for part in self.content if isinstance(part, InputText))

    def to_wire(self, item_id: str) -> dict[str, Any]:
        """The item as the server shows it (audio bytes are never echoed)."""
        parts: list[dict[str, Any]] = [
            {"type": "input_text", "text": part.text}
            if isinstance(part, InputText)
            else {"type": "input_audio", "transcript": part.transcript}
            for part in self.content
        ]
        return _message(item_id, "user", parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    id: str | None
    content: tuple[InputText, ...]

    @property
    def text(self) -> str:
        return " ".join(part.text for part in self.content)

    def to_wire(self, item_id: str) -> dict[str, Any]:
        parts = [{"type": "input_text", "text": part.text} for part in self.content]
        return _message(item_id, "system", parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCallOutput:
    id: str | None
    call_id: str
    output: str

    def to_wire(self, item_id: str) -> dict[str, Any]:
        return {
            "id": item_id,
            "object": "realtime.item",
            "type": "function_call_output",
            "status": "completed",
            "call_id": self.call_id,
            "output": self.output,
        }


def _message(item_id: str, role: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": "completed",
        "role": role,
        "content": parts,
    }


Item: TypeAlias = UserMessage | SystemMessage | FunctionCallOutput


def decode_audio(value: Any, param: str) -> bytes:
    if not isinstance(value, str):
        raise invalid_type(param, "a string", value)
    try:  # strict: what b64decode(validate=True) accepts, without its Python wrapper
        audio = binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        raise CompatError(
            "invalid_value",
            "Invalid 'audio'. Expected base64-encoded audio bytes (mono PCM16 at 24kHz) but got "
            "a value that could not be decoded.",
            param=param,
        ) from None
    if len(audio) % 2:
        raise CompatError(
            "invalid_value",
            f"Invalid 'audio'. Expected mono PCM16 audio (whole 16-bit samples), but got "
            f"{len(audio)} bytes.",
            param=param,
        )
    return audio


def _parts(item: dict[str, Any], role: str, where: str) -> tuple[InputText | InputAudio, ...]:
    content = item.get("content")
    if content is None:
        raise missing_parameter(f"{where}.content")
    if not isinstance(content, list):
        raise invalid_type(f"{where}.content", "an array", content)
    supported = ("input_text", "input_audio") if role == "user" else ("input_text",)
    parts: list[InputText | InputAudio] = []
    for index, raw in enumerate(content):
        at = f"{where}.content[{index}]"
        part = require_object(raw, at)
        if part.get("type") is None:
            raise missing_parameter(f"{at}.type")
        if choice(part["type"], f"{at}.type", supported) == "input_text":
            parts.append(InputText(required_string(part, "text", f"{at}.text")))
        else:
            audio = b"" if part.get("audio") is None else decode_audio(part["audio"], f"{at}.audio")
            parts.append(InputAudio(audio, optional_string(part, "transcript", f"{at}.transcript")))
    return tuple(parts)


def decode_item(value: Any, where: str = "item") -> Item:
    item = require_object(value, where)
    if item.get("type") is None:
        raise missing_parameter(f"{where}.type")
    kind = choice(item["type"], f"{where}.type", ("message", "function_call_output"))
    item_id = optional_string(item, "id", f"{where}.id")
    if kind == "function_call_output":
        call_id = required_string(item, "call_id", f"{where}.call_id")
        if not CALL_ID_PATTERN.match(call_id):
            raise CompatError(
                "invalid_value",
                f"Invalid 'call_id': '{call_id}'. Expected a string that matches the pattern "
                "'^[a-zA-Z0-9_-]+$'.",
                param=f"{where}.call_id",
            )
        if "output" not in item:
            raise missing_parameter(f"{where}.output")
        output = item["output"]
        if not isinstance(output, str):
            raise invalid_type(f"{where}.output", "a string", output)
        return FunctionCallOutput(id=item_id, call_id=call_id, output=output)
    if item.get("role") is None:
        raise missing_parameter(f"{where}.role")
    role = choice(item["role"], f"{where}.role", ("user", "system"))
    parts = _parts(item, role, where)
    if role == "user":
        return UserMessage(id=item_id, content=parts)
    return SystemMessage(id=item_id, content=tuple(p for p in parts if isinstance(p, InputText)))
