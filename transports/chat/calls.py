"""From one finished completion to the calls to run, the calls refused, and the messages that
record the round once the results are in.

Whatever the dialect, every call the model wrote gets exactly one result in the history: the
session's result for a call it ran, or the transport's own refusal (``blocked_envelope``) for a
call it would not hand over:

- ``native``: arguments cut off by the length limit, or a call without a tool name →
  ``VALIDATION``;
- ``inline`` / ``json``: a marker or plan entry that cannot be read → ``VALIDATION``; a call
  whose ``confidence`` is missing or below ``MIN_CONFIDENCE`` → ``INTENT_NOT_EXPLICIT`` (the
  model is told to ask the user).

Ids come from ``unique_id``, which keeps a provider's id unless it is missing or already used
in the session, so an id is the same from the call to its result.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from transports.chat.conversation import Message
from transports.chat.dialects import (
    MIN_CONFIDENCE,
    Dialect,
    PlanProblem,
    blocked_envelope,
    compact_json,
    low_confidence_envelope,
    parse_plan,
    results_message,
)
from transports.chat.inline import InlineCall
from transports.chat.reader import Completion
from transports.events import RequestedCall

__all__ = ["PlannedCalls", "Refusal", "plan_calls"]


@dataclass(frozen=True, slots=True)
class Refusal:
    call_id: str
    name: str
    reason: str  # for the log: truncated, no_name, unreadable, low_confidence
    envelope: Mapping[str, Any]


@dataclass(slots=True)
class PlannedCalls:
    dialect: Dialect
    text: str  # the model's message, as it wrote it
    # Every call in the model's order: (call_id, name, arguments JSON text) for the history.
    order: list[tuple[str, str, str]] = field(default_factory=list)
    # In the text dialects, the id the model wrote, by call id: result lines must name the id
    # the model can find in its own message, even when it reused one and ours differs.
    written_ids: dict[str, str] = field(default_factory=dict)
    requested: tuple[RequestedCall, ...] = ()
    refused: list[Refusal] = field(default_factory=list)
    problem: str | None = None  # a json plan that could not be read

    @property
    def empty(self) -> bool:
        return not self.order

    def messages(self, envelopes: Mapping[str, Mapping[str, Any]]) -> list[Message]:
        """The model's message and one result per call (``envelopes`` by call id)."""
        if self.dialect is Dialect.NATIVE:
            assistant: Message = {
                "role": "assistant",
                "content": self.text or None,
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                    for cid, name, args in self.order
                ],
            }
            return [
                assistant,
                *(
                    {"role": "tool", "tool_call_id": cid, "content": compact_json(envelopes[cid])}
                    for cid, _, _ in self.order
                ),
            ]
        return [
            {"role": "assistant", "content": self.text},
            results_message(
                [(self.written_ids.get(cid, cid), envelopes[cid]) for cid, _, _ in self.order]
            ),
        ]


def _validation(message: str) -> dict[str, Any]:
    return blocked_envelope("VALIDATION", message)


def plan_calls(
    completion: Completion, dialect: Dialect, unique_id: Callable[[str], str]
) -> PlannedCalls:
    planned = PlannedCalls(dialect, completion.text)
    requested: list[RequestedCall] = []

    def refuse(call_id: str, name: str, args: str, reason: str, envelope: dict[str, Any]) -> None:
        planned.order.append((call_id, name, args))
        planned.refused.append(Refusal(call_id, name, reason, envelope))

    def run(call_id: str, name: str, args: str, arguments: str | dict[str, Any]) -> None:
        planned.order.append((call_id, name, args))
        requested.append(RequestedCall(call_id, name, arguments))

    if dialect is Dialect.NATIVE:
        for call in completion.native_calls:
            call_id = unique_id(call.call_id)
            if call.truncated:
                refuse(
                    call_id,
                    call.name,
                    call.arguments,
                    "truncated",
                    _validation(
                        "the arguments were cut off (the reply hit its length limit); nothing ran. "
                        "Call again with shorter arguments."
                    ),
                )
            elif not call.name:
                refuse(
                    call_id,
                    "",
                    call.arguments,
                    "no_name",
                    _validation("the call has no tool name; nothing ran"),
                )
            else:
                run(call_id, call.name, call.arguments, call.arguments)
    else:
        calls: list[InlineCall]
        if dialect is Dialect.JSON:
            parsed = parse_plan(completion.text)
            if isinstance(parsed, PlanProblem):
                planned.problem = parsed.problem
                calls = []
            else:
                calls = parsed[0]
        else:
            calls = completion.inline_calls
            for problem in completion.problems:
                refuse(
                    unique_id(""),
                    "",
                    "{}",
                    "unreadable",
                    _validation(
                        f"a tool call marker could not be read ({problem.problem}); nothing ran. "
                        "Write it again as [TOOL_CALL:{...}]."
                    ),
                )
        for written in calls:
            call_id = unique_id(written.call_id)
            if written.call_id:
                planned.written_ids[call_id] = written.call_id
            args = compact_json(written.parameters)
            if written.confidence is None or written.confidence < MIN_CONFIDENCE:
                envelope = low_confidence_envelope(written.confidence)
                refuse(call_id, written.tool, args, "low_confidence", envelope)
            else:
                run(call_id, written.tool, args, dict(written.parameters))
    planned.requested = tuple(requested)
    return planned
