"""What the fake Gemini Live model answers: directives, the ``LocalBrain``, tool arguments.

Pure. An input is the newest user text (``clientContent`` with ``turnComplete``, or
``realtimeInput.text``), an utterance the server VAD heard (its duration), or nothing (a
``turnComplete`` with no user text: "I'm listening."). ``decide`` turns it into a ``Plan``;
fake-only directives in user text come before the brain:

- ``/drop TEXT``: speak TEXT, close 1011 "Internal error occurred" after two model messages;
- ``/goaway``: ``goAway`` with 1 s left now (the socket closes 1001 after it), and an empty turn
  so the client's receive loop ends and it gets a fresh resumption handle;
- ``/hang``: no reply; the turn never completes until the user barges in;
- ``/unknown TEXT``: speak TEXT, with a message and fields the API reference does not list (what the
  service may add without notice).

Then the brain (``transports.local.brain``), which calls only the functions the setup declared
(a model cannot call one it was not given: a directive for another one is answered in words,
and with none declared nothing is called): ``Say`` → ``SpeechPlan``; ``CallTools`` →
``CallsPlan``; ``Fail`` → close 1011 "Internal error occurred"; ``ResponseError`` → close 1011
with its message (Live has no JSON error message).

Tool results (``decide_results``, ``decide_late``):

- the answers to a toolCall of BLOCKING calls only go to ``brain.reply_to_tool_results`` (one
  reply for the batch: ``Tool results: a=…; b=…``);
- a toolCall of NON_BLOCKING calls only is acknowledged at once, in the same turn:
  ``acknowledgement(names)`` = "I've started NAME; I'll tell you when it's done." (several:
  "I've started a and b; I'll tell you when they're done.");
- a toolCall mixing both: once its BLOCKING calls are answered, the reply is the answer to
  those results followed by the acknowledgement of the NON_BLOCKING ones, in one speech;
- NON_BLOCKING results (``ResultsInput``), and the BLOCKING results of a mixed toolCall, are
  each answered by ``brain.reply_to_late_result`` ("Tool results: NAME=…", as a batch of one);
  several in one turn are said one after the other, in the order they came, joined by a space.

Arguments. A function call's ``args`` must be a JSON object on the wire, so the brain's argument
text is parsed: an object is sent as is; other valid JSON becomes ``{"value": …}``; text that is
not JSON (``/badjson``) becomes ``{"x": null}`` — the real service cannot send invalid JSON
arguments, and this is the closest thing it could send (a broken argument value).

Envelopes. A ``functionResponse.response`` is an object; when it is exactly ``{"output": X}``
with an object X, the brain gets X, otherwise the whole response (``{"error": …}`` included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from fakes.gemini_live.speech import INTERNAL_ERROR, HangPlan, SpeechPlan
from fakes.gemini_live.wire import INTERNAL, fit_reason
from transports.local.brain import (
    CallTools,
    Fail,
    LocalBrain,
    Reply,
    ResponseError,
    Say,
    ToolCall,
    ToolOffer,
    ToolResultTuple,
)

__all__ = [
    "DROP_AFTER_MESSAGES",
    "GO_AWAY_DIRECTIVE_S",
    "LISTENING",
    "CallsPlan",
    "FailPlan",
    "GoAwayPlan",
    "Input",
    "NothingInput",
    "Plan",
    "ResultsInput",
    "TextInput",
    "UtteranceInput",
    "acknowledgement",
    "decide",
    "decide_late",
    "decide_results",
    "envelope_of",
    "tool_args",
]

LISTENING = "I'm listening."
DROP_AFTER_MESSAGES = 2
GO_AWAY_DIRECTIVE_S = 1.0


@dataclass(frozen=True, slots=True)
class TextInput:
    text: str


@dataclass(frozen=True, slots=True)
class UtteranceInput:
    duration_ms: int


@dataclass(frozen=True, slots=True)
class NothingInput:
    pass


@dataclass(frozen=True, slots=True)
class ResultsInput:
    """NON_BLOCKING results the model answers in a turn of their own."""

    results: tuple[ToolResultTuple, ...]


Input = TextInput | UtteranceInput | NothingInput | ResultsInput


@dataclass(frozen=True, slots=True)
class CallsPlan:
    calls: tuple[ToolCall, ...]  # the brain's calls; the session gives them wire ids


@dataclass(frozen=True, slots=True)
class GoAwayPlan:
    time_left_s: float = GO_AWAY_DIRECTIVE_S
    then_say: str = ""  # the turn that follows the goAway


@dataclass(frozen=True, slots=True)
class FailPlan:
    code: int
    reason: str


Plan = SpeechPlan | HangPlan | CallsPlan | GoAwayPlan | FailPlan


def tool_args(arguments: str) -> dict[str, Any]:
    """The wire ``args`` object for the brain's argument text (see above)."""
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"x": None}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def envelope_of(response: dict[str, Any]) -> dict[str, Any]:
    """What the brain sees of a ``functionResponse.response`` (see above)."""
    output = response.get("output")
    if len(response) == 1 and isinstance(output, dict):
        return output
    return response


def _plan_of(reply: Reply) -> Plan:
    if isinstance(reply, Say):
        return SpeechPlan(reply.text, delay_ms=reply.delay_ms)
    if isinstance(reply, CallTools):
        return CallsPlan(reply.calls)
    if isinstance(reply, ResponseError):
        return FailPlan(INTERNAL, fit_reason(reply.message or INTERNAL_ERROR))
    assert isinstance(reply, Fail)
    return FailPlan(INTERNAL, INTERNAL_ERROR)


def _directive(text: str) -> Plan | None:
    command, *rest = text.strip().split(None, 1) or [""]
    argument = rest[0].strip() if rest else ""
    if command == "/drop":
        return SpeechPlan(argument, drop_after=DROP_AFTER_MESSAGES)
    if command == "/goaway":
        return GoAwayPlan()
    if command == "/hang":
        return HangPlan()
    if command == "/unknown":
        return SpeechPlan(argument, unannounced=True)
    return None


def acknowledgement(names: Sequence[str]) -> str:
    """What the model says after starting NON_BLOCKING calls (see above)."""
    if len(names) == 1:
        return f"I've started {names[0]}; I'll tell you when it's done."
    listed = ", ".join(names[:-1]) + f" and {names[-1]}"
    return f"I've started {listed}; I'll tell you when they're done."


def decide(given: Input, brain: LocalBrain, functions: Sequence[str] | None = None) -> Plan:
    """``functions``: the names the setup declared; the model calls no other (None: any)."""
    offer = None if functions is None else ToolOffer(tuple(functions), only_offered=True)
    if isinstance(given, ResultsInput):
        return decide_late(given.results, brain)
    if isinstance(given, TextInput):
        directive = _directive(given.text)
        if directive is not None:
            return directive
        return _plan_of(brain.reply_to_text(given.text, offer))
    if isinstance(given, UtteranceInput):
        return _plan_of(brain.reply_to_utterance(given.duration_ms, offer))
    return SpeechPlan(LISTENING)


def decide_late(results: Sequence[ToolResultTuple], brain: LocalBrain) -> Plan:
    """The reply to results the model did not wait for (see above)."""
    texts = []
    for call_id, name, envelope in results:
        plan = _plan_of(brain.reply_to_late_result(call_id, name, envelope))
        if not isinstance(plan, SpeechPlan):
            return plan
        texts.append(plan.text)
    return SpeechPlan(" ".join(texts))


def decide_results(
    results: list[ToolResultTuple], brain: LocalBrain, started: Sequence[str] = ()
) -> Plan:
    """The reply once every BLOCKING call of a toolCall is answered (the session waits until
    then); ``started`` names its NON_BLOCKING calls, acknowledged after the answer."""
    if started:
        plan = decide_late(results, brain)
        if not isinstance(plan, SpeechPlan):
            return plan
        return SpeechPlan(f"{plan.text} {acknowledgement(started)}")
    reply = brain.reply_to_tool_results(results)
    if reply is None:  # the brain's batch is not the one answered (an older snapshot): say so
        return SpeechPlan("Tool results: " + "; ".join(name for _, name, _ in results))
    return _plan_of(reply)
