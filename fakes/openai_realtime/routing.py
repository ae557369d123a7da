"""What a response of the fake says: routing new items to the ``LocalBrain``, and directives.

Pure. ``route`` looks at the items added since the previous response started:

1. ``function_call_output``s not answered yet (no assistant message after them: a conversation
   replayed on a new connection has them answered) → the brain's ``reply_to_tool_results`` with
   ``(call_id, name, envelope)``, the envelope being the output's JSON object (other JSON or
   non-JSON text → ``{"output": ...}``); ``None`` (not every call answered) → "Waiting for the
   other tool results."; results of calls this brain never made (replayed ones) are answered
   as they are, in the brain's format;
2. else the newest user or system message: a user's text → ``reply_to_text``, its audio →
   ``reply_to_utterance(duration_ms)``; a system message's text → ``reply_to_text``; but a
   user message followed by outputs of calls (a conversation replayed after a drop cut the
   answer to them) is answered from those results, as a model would: it does not call its
   tools again;
3. else "I'm listening.".

``decide`` turns that into a ``Plan`` (``response``), the brain following the response's tools
and ``tool_choice`` (``config.tool_offer``: the response's own, else the session's; ``none``
calls nothing, ``required`` calls a tool, a named function is the call, as the API does, the
reply to results included); fake-only directives in user text come before the brain:
``/drop TEXT`` (speak TEXT, close 1011 after two deltas), ``/expire`` (the session expires now),
``/hang`` (``response.created`` and nothing else until cancelled), ``/hangcall NAME {json}`` (the
call in full, as ``/tool`` would make it, then no ``response.done`` until cancelled),
``/unknown TEXT`` (speak TEXT, with an event type and fields the API reference does not list: what
the API may add without notice). A brain ``Fail`` is returned as is: the socket
closes with 1011 at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from fakes.openai_realtime.conversation import TEXT_PARTS, Conversation, Entry
from fakes.openai_realtime.response import (
    CallsPlan,
    FailPlan,
    HangPlan,
    Plan,
    SpeechPlan,
)
from transports.local.brain import (
    CallTools,
    Fail,
    LocalBrain,
    Reply,
    ResponseError,
    Say,
    ToolOffer,
    compact_json,
)

__all__ = [
    "DROP_AFTER_DELTAS",
    "LISTENING",
    "WAITING_FOR_RESULTS",
    "AnswerAudio",
    "AnswerNothing",
    "AnswerText",
    "AnswerToolResults",
    "Answerable",
    "Expire",
    "decide",
    "parse_tool_output",
    "results_text",
    "route",
]

WAITING_FOR_RESULTS = "Waiting for the other tool results."
LISTENING = "I'm listening."
DROP_AFTER_DELTAS = 2


@dataclass(frozen=True, slots=True)
class AnswerToolResults:
    results: tuple[tuple[str, str, dict[str, Any]], ...]  # (call_id, name, envelope)


@dataclass(frozen=True, slots=True)
class AnswerText:
    text: str
    role: str  # "user" | "system"


@dataclass(frozen=True, slots=True)
class AnswerAudio:
    duration_ms: int


@dataclass(frozen=True, slots=True)
class AnswerNothing:
    pass


Answerable = AnswerToolResults | AnswerText | AnswerAudio | AnswerNothing


@dataclass(frozen=True, slots=True)
class Expire:
    """The ``/expire`` directive: the session expires instead of answering."""


def parse_tool_output(output: str) -> dict[str, Any]:
    """The envelope the brain gets: the output's JSON object, else ``{"output": ...}``."""
    try:
        parsed = orjson.loads(output)
    except orjson.JSONDecodeError:
        return {"output": output}
    return parsed if isinstance(parsed, dict) else {"output": parsed}


def _text_of(item: dict[str, Any]) -> str | None:
    texts = [
        part["text"]
        for part in item.get("content", [])
        if part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str)
    ]
    return " ".join(texts) if texts else None


def _transcripts_of(item: dict[str, Any]) -> str:
    return " ".join(
        part["transcript"]
        for part in item.get("content", [])
        if part.get("type") == "input_audio" and isinstance(part.get("transcript"), str)
    )


def _is_assistant(entry: Entry) -> bool:
    return entry.item.get("role") == "assistant"


def _outputs(
    entries: Sequence[Entry], conversation: Conversation
) -> list[tuple[str, str, dict[str, Any]]]:
    """``(call_id, name, envelope)`` of every function output among ``entries``."""
    results = []
    for entry in entries:
        item = entry.item
        if item.get("type") == "function_call_output":
            call = conversation.find_call(item["call_id"])
            name = call.item.get("name", "") if call is not None else ""
            results.append((item["call_id"], name, parse_tool_output(item["output"])))
    return results


def route(new: Sequence[Entry], conversation: Conversation) -> Answerable:
    """What a response answers, from the entries added since the previous one started."""
    answered = max(
        (i for i, e in enumerate(new) if e.item.get("type") == "message" and _is_assistant(e)),
        default=-1,
    )
    results = _outputs(new[answered + 1 :], conversation)
    if results:
        return AnswerToolResults(tuple(results))
    # The newest input is what the model answers (a replayed conversation's last user message
    # may have been answered elsewhere, or given up: a later system message is the news).
    for index in range(len(new) - 1, -1, -1):
        entry = new[index]
        item = entry.item
        role = item.get("role")
        if item.get("type") != "message" or role not in ("user", "system"):
            continue
        if role == "user" and (led_to := _outputs(new[index + 1 :], conversation)):
            return AnswerToolResults(tuple(led_to))
        text = _text_of(item)
        if text is not None or role == "system":
            return AnswerText(text or "", role)
        if entry.utterance_ms is not None:
            return AnswerAudio(entry.utterance_ms)
        return AnswerText(_transcripts_of(item), role)  # replayed audio: its transcript
    return AnswerNothing()


def results_text(results: Sequence[tuple[str, str, dict[str, Any]]]) -> str:
    """Results answered as the brain answers a batch: ``Tool results: NAME=<JSON>; …``."""
    return "Tool results: " + "; ".join(
        f"{name}={compact_json(envelope)}" for _, name, envelope in results
    )


def _plan_of(reply: Reply) -> Plan | Fail:
    if isinstance(reply, Say):
        return SpeechPlan(reply.text, delay_ms=reply.delay_ms)
    if isinstance(reply, CallTools):
        return CallsPlan(reply.calls)
    if isinstance(reply, ResponseError):
        return FailPlan(reply.message)
    return reply


def _directive(text: str) -> Plan | Expire | None:
    command, *rest = text.strip().split(None, 1) or [""]
    argument = rest[0].strip() if rest else ""
    if command == "/drop":
        return SpeechPlan(argument, drop_after=DROP_AFTER_DELTAS)
    if command == "/expire":
        return Expire()
    if command == "/hang":
        return HangPlan()
    if command == "/unknown":
        return SpeechPlan(argument, unannounced=True)
    return None


def decide(
    answer: Answerable, brain: LocalBrain, offer: ToolOffer | None = None
) -> Plan | Fail | Expire:
    """``offer``: the tools and ``tool_choice`` of this response, which the brain follows."""
    if isinstance(answer, AnswerToolResults):
        if not set(brain.open_call_ids) & {call_id for call_id, _, _ in answer.results}:
            # Calls this brain never made (a conversation replayed after a reconnect).
            return SpeechPlan(results_text(answer.results))
        reply = brain.reply_to_tool_results(answer.results, offer)
        return SpeechPlan(WAITING_FOR_RESULTS) if reply is None else _plan_of(reply)
    if isinstance(answer, AnswerText):
        if answer.role != "user":
            return _plan_of(brain.reply_to_text(answer.text, offer))
        if (directive := _directive(answer.text)) is not None:
            return directive
        command, *rest = answer.text.strip().split(None, 1) or [""]
        if command == "/hangcall" and rest:
            reply = brain.reply_to_text(f"/tool {rest[0]}")  # the brain numbers the call
            if isinstance(reply, CallTools):
                return CallsPlan(reply.calls, hang=True)
        return _plan_of(brain.reply_to_text(answer.text, offer))
    if isinstance(answer, AnswerAudio):
        return _plan_of(brain.reply_to_utterance(answer.duration_ms, offer))
    return _plan_of(brain.reply_to_nothing(offer))
