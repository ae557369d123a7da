"""The client's answer to a confirmation (docs/protocol.md section 5): ``confirmation.respond``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from ._field_checks import choice, invalid_field, require_non_empty, with_event_id
from .json_types import JsonObject

__all__ = ["ConfirmationRespond", "Decision"]


class Decision(StrEnum):
    """The user's answer in ``confirmation.respond``."""

    APPROVE = "approve"
    REJECT = "reject"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmationRespond:
    """``confirmation.respond``: approve (optionally with new arguments) or reject."""

    TYPE: ClassVar[str] = "confirmation.respond"

    confirmation_id: str
    decision: Decision
    parameters: JsonObject | None = None  # approve with modified arguments (validated again)
    event_id: str | None = None

    def __post_init__(self) -> None:
        require_non_empty(
            self.confirmation_id,
            event_type=self.TYPE,
            field_name="confirmation_id",
            event_id=self.event_id,
        )
        decision = choice(
            Decision,
            self.decision,
            event_type=self.TYPE,
            field_name="decision",
            event_id=self.event_id,
        )
        object.__setattr__(self, "decision", decision)
        if self.parameters is not None and not isinstance(self.parameters, dict):
            raise invalid_field(self.TYPE, "parameters", "must be an object", self.event_id)

    def to_dict(self) -> JsonObject:
        body: JsonObject = {
            "type": self.TYPE,
            "confirmation_id": self.confirmation_id,
            "decision": self.decision.value,
        }
        if self.parameters is not None:
            body["parameters"] = self.parameters
        return with_event_id(body, self.event_id)
