"""Wire pieces of the fake Gemini Live server: names, base64, closes, actions, server messages.

Pure. The fake is split the way the style guide asks: pure modules decide (``setup``,
``audio_input``, ``speech``, ``routing``, ``tools``, ``memory``,
``messages``, ``session``) and return *actions*; the aiohttp shell
(``connection``, ``server``) carries them out:

- ``Send(message)``: send one server message (a dict, serialised compactly by the shell);
- ``SendRaw(frame)``: send bytes already serialised (the echo mode builds its frames by hand);
- ``Close(code, reason)``: close the socket after everything queued before it;
- ``CloseAfter(delay_s, code, reason)``: close that many seconds from now (after a ``goAway``);
- ``Begin(generation)`` / ``Halt(generation)``: start / stop delivering a generation step by step
  (``FakeGeminiSession.next_step``); a ``Step`` says how long the shell waits after it.

Names. The server is a proto3-JSON endpoint: it accepts lowerCamelCase and snake_case field names
and the official SDK sends a mix of both. ``normalise`` rewrites every *field name* to
lowerCamelCase, except where the keys are data: the values of ``args``, ``response``,
``parametersJsonSchema``, ``responseJsonSchema`` and a schema's ``default``, ``example`` and
``additionalProperties`` are copied untouched, and the keys of a schema's ``properties`` and
``defs`` (property names) are kept while their values are normalised as schemas.

Errors. Live has no JSON error message: the server closes the socket with a code and a short
reason (at most 123 bytes), which the SDK raises as ``APIError(code, reason)``. A
``ProtocolError`` raised while handling a message is turned into such a close.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from fakes.close import CLOSE_REASON_MAX_BYTES, Close

__all__ = [
    "AUDIO_OUT_MIME",
    "CLIENT_MESSAGE_KEYS",
    "CLOSE_REASON_MAX_BYTES",
    "GOING_AWAY",
    "INTERNAL",
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "Action",
    "Begin",
    "Close",
    "CloseAfter",
    "Halt",
    "Message",
    "ProtocolError",
    "Send",
    "SendRaw",
    "Step",
    "camel_case",
    "client_message",
    "decode_base64",
    "duration_text",
    "expect_list",
    "expect_object",
    "fit_reason",
    "is_base64_text",
    "normalise",
    "parse_int",
]

Message = dict[str, Any]

AUDIO_OUT_MIME = "audio/pcm;rate=24000"

# Close codes and the reasons the real service gives for them, as public bug reports show them
# (the service sends no error message: it closes the socket with a reason).
INVALID_ARGUMENT = 1007  # "Request contains an invalid argument." and friends
NOT_FOUND = 1008  # "Requested entity was not found"
INTERNAL = 1011  # "Internal error occurred"
GOING_AWAY = 1001  # the fake's choice for the close that follows a goAway

CLIENT_MESSAGE_KEYS = ("setup", "clientContent", "realtimeInput", "toolResponse", "contextUpdate")

_DATA_VALUES = frozenset(
    {
        "args",
        "response",
        "parametersJsonSchema",
        "responseJsonSchema",
        "default",
        "example",
        "additionalProperties",
    }
)
_NAME_MAPS = frozenset({"properties", "defs"})
_SNAKE = re.compile(r"_([a-z0-9])")
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/_=-]*")


class ProtocolError(Exception):
    """A client message the service refuses: the socket closes with ``code`` and ``reason``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = fit_reason(reason)


def expect_object(value: Any, where: str, *, optional: bool = False) -> dict[str, Any]:
    """``value`` when it is a JSON object (``{}`` for a missing optional one); else 1007."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(
            INVALID_ARGUMENT, f"Invalid JSON payload received. Expected an object at '{where}'."
        )
    return value


def expect_list(value: Any, where: str) -> list[Any]:
    """A repeated field: a list, a lone object taken as a list of one, ``[]`` when missing."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, list):
        raise ProtocolError(
            INVALID_ARGUMENT, f"Invalid JSON payload received. Expected a list at '{where}'."
        )
    return value


def fit_reason(reason: str) -> str:
    """``reason`` cut to what a close frame holds (123 bytes of UTF-8)."""
    data = reason.encode()
    if len(data) <= CLOSE_REASON_MAX_BYTES:
        return reason
    return data[: CLOSE_REASON_MAX_BYTES - 3].decode(errors="ignore") + "..."


def camel_case(name: str) -> str:
    """``prebuilt_voice_config`` → ``prebuiltVoiceConfig``; camelCase names are kept."""
    if "_" not in name.strip("_"):
        return name
    return _SNAKE.sub(lambda match: match.group(1).upper(), name)


def normalise(value: Any) -> Any:
    """A copy of a client message with every field name in lowerCamelCase (see above)."""
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for key, item in value.items():
            name = camel_case(key) if isinstance(key, str) else key
            if name in _DATA_VALUES:
                result[name] = item
            elif name in _NAME_MAPS and isinstance(item, dict):
                result[name] = {prop: normalise(schema) for prop, schema in item.items()}
            else:
                result[name] = normalise(item)
        return result
    if isinstance(value, list):
        return [normalise(item) for item in value]
    return value


def client_message(raw: Any) -> tuple[str, Any]:
    """The one field of a client message (normalised), as ``(name, value)``; else 1007."""
    message = normalise(expect_object(raw, "(message)"))
    unknown = [key for key in message if key not in CLIENT_MESSAGE_KEYS]
    if unknown:
        raise ProtocolError(
            INVALID_ARGUMENT, f'Invalid JSON payload received. Unknown name "{unknown[0]}".'
        )
    if len(message) != 1:
        raise ProtocolError(
            INVALID_ARGUMENT,
            "Invalid JSON payload received. A message has exactly one of setup, "
            "clientContent, realtimeInput, toolResponse, contextUpdate.",
        )
    ((key, value),) = message.items()
    return key, value


def decode_base64(text: Any) -> bytes | None:
    """Standard or URL-safe base64, padded or not; ``None`` when it does not decode."""
    if not isinstance(text, str) or _BASE64_TEXT.fullmatch(text) is None:
        return None
    body = text.rstrip("=").replace("-", "+").replace("_", "/")
    if len(body) % 4 == 1:
        return None
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def is_base64_text(text: str) -> bool:
    """True when ``text`` holds only base64 characters (either alphabet), so it is JSON-safe."""
    return _BASE64_TEXT.fullmatch(text) is not None


def parse_int(value: Any) -> int | None:
    """An int64 field: a JSON number or a decimal string (proto3 JSON allows both)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def duration_text(seconds: float) -> str:
    """A ``google.protobuf.Duration`` in JSON: ``1.5`` → ``"1.5s"``."""
    return f"{max(0.0, seconds):g}s"


# Actions -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    message: Message


@dataclass(frozen=True, slots=True)
class SendRaw:
    frame: bytes  # one compact JSON server message, already serialised


@dataclass(frozen=True, slots=True)
class CloseAfter:
    delay_s: float
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Begin:
    generation: int


@dataclass(frozen=True, slots=True)
class Halt:
    generation: int


Action = Send | SendRaw | Close | CloseAfter | Begin | Halt


@dataclass(frozen=True, slots=True)
class Step:
    """One piece of a generation: actions to carry out, then how long to wait."""

    actions: tuple[Action, ...] = ()
    audio_s: float = 0.0  # audio carried by this step; the shell paces by it
    wait_s: float = 0.0  # "thinking" time after the step (wall clock, not scaled by pace)
    hang: bool = False  # wait until the generation is halted
