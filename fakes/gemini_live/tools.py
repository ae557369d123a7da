"""The function calls of the fake Gemini Live model, and the answers they get. Pure.

Behaviour. A declaration's ``behavior`` (``setup.tools[].functionDeclarations[]``) is one of
``BEHAVIORS``; ``UNSPECIFIED`` or unset is ``BLOCKING``. ``issue_calls`` gives the brain's
calls their wire ids (``function-call-<n>``, from the session's shared counter), their ``args``
objects (``routing.tool_args``) and their behaviour (by name).

``ToolLedger`` (one per connection) keeps every call of that connection:

- ``batch``: the BLOCKING calls of the newest ``toolCall`` (a ``ToolBatch``), which the turn
  waits for; answers may come in any order and over several ``toolResponse`` messages; the
  batch is done once every id has an answer, and ``results`` then hands the brain
  ``(brain_call_id, name, envelope)`` in call order. ``cancel`` ends it on a barge-in: its
  unanswered ids are cancelled (``toolCallCancellation``), and answers for them are unknown;
- ``open``: the NON_BLOCKING calls still running: each takes any number of responses with
  ``willContinue: true`` and is finished by the first without it (or with ``false``);
- finished ids (a done batch, a NON_BLOCKING call's final response): another response for
  one is ``Answer.REPEATED``; an id never issued or cancelled is ``Answer.UNKNOWN``.

``function_responses`` checks a ``toolResponse`` (see ``FunctionResponse``): every entry an
object, its ``response`` an object, ``scheduling`` one of ``SCHEDULINGS``, ``willContinue`` a
bool (either may be absent or null); anything else refuses the whole message (1007).

``forget_calls`` removes cancelled calls from the history, so a resumed or continued
conversation never shows a call that was never answered.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
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

__all__ = [
    "BEHAVIORS",
    "DEFAULT_SCHEDULING",
    "SCHEDULINGS",
    "Answer",
    "FunctionResponse",
    "PendingCall",
    "ToolBatch",
    "ToolLedger",
    "forget_calls",
    "function_responses",
    "issue_calls",
]

BEHAVIORS = ("UNSPECIFIED", "BLOCKING", "NON_BLOCKING")  # FunctionDeclaration.Behavior
SCHEDULINGS = ("SCHEDULING_UNSPECIFIED", "SILENT", "WHEN_IDLE", "INTERRUPT")
DEFAULT_SCHEDULING = "WHEN_IDLE"  # what SCHEDULING_UNSPECIFIED (or none) means


class Answer(enum.Enum):
    ACCEPTED = "accepted"
    UNKNOWN = "unknown or cancelled"  # never issued on this connection, or cancelled
    REPEATED = "answered"  # this id already has its (final) answer


@dataclass(frozen=True, slots=True)
class PendingCall:
    id: str  # the wire id, function-call-<n>
    name: str
    args: dict[str, Any]
    brain_call_id: str  # the brain's own id for the call (call_<n>)
    blocking: bool = True

    def wire(self) -> Message:
        return {"id": self.id, "name": self.name, "args": self.args}

    def result(self, response: dict[str, Any]) -> ToolResultTuple:
        """What the brain sees of an answer to this call."""
        return (self.brain_call_id, self.name, envelope_of(response))


@dataclass(frozen=True, slots=True)
class FunctionResponse:
    """One checked entry of ``toolResponse.functionResponses`` (names normalised)."""

    fields: dict[str, Any]  # the entry as sent
    scheduling: str | None = None  # as sent, one of SCHEDULINGS
    will_continue: bool = False

    @property
    def id(self) -> Any:
        return self.fields.get("id")

    @property
    def response(self) -> dict[str, Any]:
        response = self.fields.get("response")
        return response if isinstance(response, dict) else {}

    @property
    def effective_scheduling(self) -> str:
        """``SILENT``, ``WHEN_IDLE`` or ``INTERRUPT``: unset and unspecified mean WHEN_IDLE."""
        if self.scheduling in (None, "SCHEDULING_UNSPECIFIED"):
            return DEFAULT_SCHEDULING
        assert self.scheduling is not None
        return self.scheduling


def issue_calls(
    counters: SessionCounters, calls: Sequence[ToolCall], non_blocking: Collection[str] = ()
) -> tuple[PendingCall, ...]:
    """The brain's calls with wire ids, ``args`` and their declared behaviour, in order."""
    return tuple(
        PendingCall(
            counters.next_call_id(),
            call.name,
            tool_args(call.arguments),
            call.call_id,
            blocking=call.name not in non_blocking,
        )
        for call in calls
    )


class ToolBatch:
    """The BLOCKING calls of one ``toolCall``: the turn waits for an answer to each.

    ``started`` are the NON_BLOCKING calls of the same ``toolCall``: the model acknowledges
    them once the batch is answered (they run on in the ``ToolLedger`` meanwhile)."""

    def __init__(self, calls: Sequence[PendingCall], started: Sequence[PendingCall] = ()) -> None:
        self.calls = tuple(calls)
        self.started = tuple(started)
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
        return [call.wire() for call in self.calls]

    def answer(self, call_id: Any, response: dict[str, Any]) -> tuple[Answer, PendingCall | None]:
        call = self._by_id.get(call_id) if isinstance(call_id, str) else None
        if call is None:
            return Answer.UNKNOWN, None
        if call.id in self._answers:
            return Answer.REPEATED, call
        self._answers[call.id] = call.result(response)
        return Answer.ACCEPTED, call

    def results(self) -> list[ToolResultTuple]:
        """Every answer, in call order (the batch must be complete)."""
        return [self._answers[call.id] for call in self.calls]


class ToolLedger:
    """Every call of one connection: the BLOCKING batch, the open NON_BLOCKING calls, and the
    ids that are finished (see the module docstring)."""

    def __init__(self) -> None:
        self.batch: ToolBatch | None = None
        self.open: dict[str, PendingCall] = {}  # NON_BLOCKING calls without a final response
        self._finished: set[str] = set()

    def call(self, calls: Sequence[PendingCall]) -> None:
        """One ``toolCall``: its BLOCKING calls become the batch (if any), the others open."""
        blocking = [call for call in calls if call.blocking]
        started = [call for call in calls if not call.blocking]
        self.batch = ToolBatch(blocking, started) if blocking else None
        self.open.update((call.id, call) for call in started)

    def take(self, response: FunctionResponse) -> tuple[Answer, PendingCall | None]:
        """One response: to the batch, or to an open NON_BLOCKING call (closed unless
        ``willContinue``)."""
        call_id = response.id
        running = self.open.get(call_id) if isinstance(call_id, str) else None
        if running is not None:
            if not response.will_continue:
                del self.open[running.id]
                self._finished.add(running.id)
            return Answer.ACCEPTED, running
        if self.batch is None:
            answer, call = Answer.UNKNOWN, None
        else:
            answer, call = self.batch.answer(call_id, response.response)
        if answer is Answer.UNKNOWN and isinstance(call_id, str) and call_id in self._finished:
            answer = Answer.REPEATED
        return answer, call

    def done(self) -> ToolBatch | None:
        """The batch, once every id has its answer (it is then over); else ``None``."""
        batch = self.batch
        if batch is None or not batch.complete:
            return None
        self._finished.update(batch.ids)
        self.batch = None
        return batch

    def cancel(self) -> list[str]:
        """A barge-in: the batch is over; its unanswered ids are cancelled (returned).
        NON_BLOCKING calls are not cancelled: they run on."""
        cancelled = self.batch.unanswered if self.batch is not None else []
        self.batch = None
        return cancelled


def _invalid_value(where: str, kind: str, value: Any) -> ProtocolError:
    return ProtocolError(INVALID_ARGUMENT, f"Invalid value at '{where}' ({kind}), {value!r}")


def function_responses(body: dict[str, Any]) -> list[FunctionResponse]:
    """The ``functionResponses`` of a (normalised) ``toolResponse``, checked (see above)."""
    responses = []
    raw = expect_list(body.get("functionResponses"), "toolResponse.functionResponses")
    for index, item in enumerate(raw):
        fields = expect_object(item, f"toolResponse.functionResponses[{index}]")
        where = f"tool_response.function_responses[{index}]"
        if not isinstance(fields.get("response", {}), dict):
            raise ProtocolError(
                INVALID_ARGUMENT,
                f"Invalid value at '{where}.response' "
                "(type.googleapis.com/google.protobuf.Struct).",
            )
        scheduling = fields.get("scheduling")
        if scheduling is not None and scheduling not in SCHEDULINGS:
            raise _invalid_value(f"{where}.scheduling", "Scheduling", scheduling)
        will_continue = fields.get("willContinue")
        if will_continue is not None and not isinstance(will_continue, bool):
            raise _invalid_value(f"{where}.will_continue", "TYPE_BOOL", will_continue)
        responses.append(FunctionResponse(fields, scheduling, will_continue is True))
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
