"""One batch of BLOCKING function calls of the fake Gemini Live model, and its answers.

Pure. A ``ToolBatch`` is what one ``toolCall`` message carries: the brain's calls with their wire
ids (``function-call-<n>``, from the session's shared counter), their ``args`` objects
(``routing.tool_args``), and the answers collected so far. ``answer`` takes one
``functionResponse`` and says what became of it; the batch is ``complete`` once every id has an
answer, and ``results`` then hands the brain ``(brain_call_id, name, envelope)`` in call order.
Answers may come in any order and over several ``toolResponse`` messages.

``forget_calls`` removes cancelled calls from the history, so a resumed or continued
conversation never shows a call that was never answered.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fakes.gemini_live.memory import SessionCounters
from fakes.gemini_live.routing import envelope_of, tool_args
from fakes.gemini_live.wire import (
    INVALID_ARGUMENT,
    Message,
    ProtocolError,
    expect_list,
    expect_object,
)
from transports.local.brain import ToolCall, ToolResultTuple

__all__ = ["Answer", "PendingCall", "ToolBatch", "forget_calls", "function_responses"]


class Answer(enum.Enum):
    ACCEPTED = "accepted"
    UNKNOWN = "unknown or cancelled"  # not an id of this batch
    REPEATED = "answered"  # this id already has its answer


@dataclass(frozen=True, slots=True)
class PendingCall:
    id: str  # the wire id, function-call-<n>
    name: str
    args: dict[str, Any]
    brain_call_id: str  # the brain's own id for the call (call_<n>)

    def wire(self) -> Message:
        return {"id": self.id, "name": self.name, "args": self.args}


class ToolBatch:
    def __init__(self, counters: SessionCounters, calls: Sequence[ToolCall]) -> None:
        self.calls = tuple(
            PendingCall(counters.next_call_id(), call.name, tool_args(call.arguments), call.call_id)
            for call in calls
        )
        self._by_id = {call.id: call for call in self.calls}
        self._answers: dict[str, ToolResultTuple] = {}

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(call.id for call in self.calls)

    @property
    def unanswered(self) -> list[str]:
        return [call.id for call in self.calls if call.id not in self._answers]

    @property
    def complete(self) -> bool:
        return len(self._answers) == len(self.calls)

    def wire(self) -> list[Message]:
        """The ``functionCalls`` of the ``toolCall`` message."""
        return [call.wire() for call in self.calls]

    def answer(self, call_id: Any, response: dict[str, Any]) -> tuple[Answer, PendingCall | None]:
        call = self._by_id.get(call_id) if isinstance(call_id, str) else None
        if call is None:
            return Answer.UNKNOWN, None
        if call.id in self._answers:
            return Answer.REPEATED, call
        self._answers[call.id] = (call.brain_call_id, call.name, envelope_of(response))
        return Answer.ACCEPTED, call

    def results(self) -> list[ToolResultTuple]:
        """Every answer, in call order (the batch must be complete)."""
        return [self._answers[call.id] for call in self.calls]


def function_responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``functionResponses`` of a (normalised) ``toolResponse``, checked: each an object
    whose ``response``, when present, is an object too; else 1007."""
    responses = []
    raw = expect_list(body.get("functionResponses"), "toolResponse.functionResponses")
    for index, item in enumerate(raw):
        response = expect_object(item, f"toolResponse.functionResponses[{index}]")
        if not isinstance(response.get("response", {}), dict):
            raise ProtocolError(
                INVALID_ARGUMENT,
                f"Invalid value at 'tool_response.function_responses[{index}].response' "
                "(type.googleapis.com/google.protobuf.Struct).",
            )
        responses.append(response)
    return responses


def _is_call(part: Any, ids: set[str]) -> bool:
    if not isinstance(part, dict):
        return False
    call = part.get("functionCall")
    return isinstance(call, dict) and call.get("id") in ids


def forget_calls(history: list[dict[str, Any]], ids: set[str]) -> None:
    """Drop the ``functionCall`` parts with those ids (and a model turn left empty)."""
    for turn in list(history):
        if turn.get("role") != "model" or not any(_is_call(p, ids) for p in turn["parts"]):
            continue
        turn["parts"] = [part for part in turn["parts"] if not _is_call(part, ids)]
        if not turn["parts"]:
            history.remove(turn)
