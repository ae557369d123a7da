"""Who ends the user's turns and when the model answers (extensions of the protocol, 10.18):
``turn_detection`` and ``tool_choice`` of ``session.start`` / ``session.update``, and the
``response.create`` event.

The values are the neutral ones every upstream takes (``transports.base.TurnDetection``,
``ToolChoice``); these functions read them from their wire form (or take them as they are, as
the enum fields take their members) and check them, raising ``invalid_event`` naming the field:

- ``turn_detection``: ``"server"`` (the provider's voice activity detection ends each turn and
  the model answers it: the default), ``"manual"`` (push-to-talk: only ``audio.commit`` ends a
  turn), or an OpenAI Realtime ``turn_detection`` object (``type`` ``server_vad`` or
  ``semantic_vad`` and its tuning), which is server turns with that detector's settings for an
  OpenAI upstream. ``create_response`` and ``interrupt_response`` may be given only as
  ``true``: the gateway answers every server turn and lets speech cut a reply;
- ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "function", "name"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from transports.base import ForcedTool, ToolChoice, TurnDetection

from ._field_checks import describe_choices, invalid_field, with_event_id
from .json_types import JsonObject

__all__ = [
    "ResponseCreate",
    "ToolChoice",
    "TurnDetection",
    "add_turn_options",
    "checked_turn_options",
    "tool_choice_of",
    "tool_choice_wire",
    "turn_detection_of",
    "turn_detection_wire",
]

_TURNS = {"server": TurnDetection(), "manual": TurnDetection(manual=True)}
_DETECTORS = ("server_vad", "semantic_vad")
_EAGERNESS = ("low", "medium", "high", "auto")
_CHOICES = ("auto", "none", "required")
_MS_FIELDS = ("prefix_padding_ms", "silence_duration_ms")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseCreate:
    """``response.create``: the model answers now (what the user committed since its last
    reply; with nothing new, from the conversation as it is)."""

    TYPE: ClassVar[str] = "response.create"

    event_id: str | None = None

    def to_dict(self) -> JsonObject:
        return with_event_id({"type": self.TYPE}, self.event_id)


def checked_turn_options(
    turn_detection: Any, tool_choice: Any, *, event_type: str, event_id: str | None
) -> tuple[TurnDetection | None, ToolChoice | None]:
    """Both options of an event (None: not given), checked."""
    turns = None
    if turn_detection is not None:
        turns = turn_detection_of(turn_detection, event_type=event_type, event_id=event_id)
    choice = None
    if tool_choice is not None:
        choice = tool_choice_of(tool_choice, event_type=event_type, event_id=event_id)
    return turns, choice


def add_turn_options(
    body: JsonObject, turn_detection: TurnDetection | None, tool_choice: ToolChoice | None
) -> None:
    """The options given, in an event's wire form."""
    if turn_detection is not None:
        body["turn_detection"] = turn_detection_wire(turn_detection)
    if tool_choice is not None:
        body["tool_choice"] = tool_choice_wire(tool_choice)


def turn_detection_of(
    value: Any, *, event_type: str, event_id: str | None = None, field: str = "turn_detection"
) -> TurnDetection:
    if isinstance(value, TurnDetection):
        if value.settings is not None:
            _check_detector(value.settings, event_type, event_id, field)
        return value
    if isinstance(value, str) and value in _TURNS:
        return _TURNS[value]
    if isinstance(value, Mapping):
        _check_detector(value, event_type, event_id, field)
        return TurnDetection(settings=dict(value))
    allowed = describe_choices(_TURNS)
    raise invalid_field(event_type, field, f"must be {allowed} or an object", event_id)


def turn_detection_wire(turns: TurnDetection) -> str | JsonObject:
    if turns.manual:
        return "manual"
    return "server" if turns.settings is None else dict(turns.settings)


def _check_detector(
    given: Mapping[str, Any], event_type: str, event_id: str | None, field: str
) -> None:
    def bad(key: str, problem: str) -> Exception:
        return invalid_field(event_type, f"{field}.{key}", problem, event_id)

    if given.get("type") not in _DETECTORS:
        raise bad("type", f"must be {describe_choices(_DETECTORS)}")
    for key, value in given.items():
        if key == "type":
            continue
        if key == "threshold":
            if not _number(value) or not 0 <= value <= 1:
                raise bad(key, "must be a number from 0 to 1")
        elif key in _MS_FIELDS or key == "idle_timeout_ms":
            if not (value is None and key == "idle_timeout_ms") and not _count(value):
                raise bad(key, "must be an integer >= 0")
        elif key == "eagerness":
            if value not in _EAGERNESS:
                raise bad(key, f"must be {describe_choices(_EAGERNESS)}")
        elif key in ("create_response", "interrupt_response"):
            if value is not True:
                raise bad(
                    key,
                    "must be true: the gateway answers every turn the detector ends and lets "
                    "speech cut a reply (for turns the client ends and answers, use 'manual')",
                )
        else:
            raise bad(key, "is not a setting of turn detection")


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def tool_choice_of(
    value: Any, *, event_type: str, event_id: str | None = None, field: str = "tool_choice"
) -> ToolChoice:
    if isinstance(value, str) and value in _CHOICES:
        return value  # type: ignore[return-value]  # one of the literal's values
    name: Any = None
    if isinstance(value, ForcedTool):
        name = value.name
    elif isinstance(value, Mapping) and value.get("type") == "function":
        name = value.get("name")
    elif isinstance(value, Mapping):
        raise invalid_field(event_type, f"{field}.type", "must be 'function'", event_id)
    else:
        allowed = describe_choices(_CHOICES)
        raise invalid_field(event_type, field, f"must be {allowed} or an object", event_id)
    if not isinstance(name, str) or not name:
        raise invalid_field(event_type, f"{field}.name", "must be a non-empty string", event_id)
    return value if isinstance(value, ForcedTool) else ForcedTool(name)


def tool_choice_wire(choice: ToolChoice) -> str | JsonObject:
    if isinstance(choice, ForcedTool):
        return {"type": "function", "name": choice.name}
    return choice
