"""How tools are offered to, and results given back to, a chat model: the three dialects.

- ``native``: the provider's function calling (``tools`` in the request, ``tool_calls`` in the
  stream, results as ``tool`` messages).
- ``inline``: the model writes ``[TOOL_CALL:{…}]`` markers in its text (``inline.py`` cuts them
  out); results go back as ``[TOOL_RESULT:id:success] message`` lines in a user message.
- ``json``: the model first answers a structured plan ``{"toolCalls": […], "reasoning": …}``
  (``response_format`` ``json_object``); the calls run, then a second request asks for the final
  answer with the results given back as in ``inline``.

In the two text dialects the model states a ``confidence``; a call below ``MIN_CONFIDENCE`` is
not made and the model is told to ask the user instead.

Pure: prompt text, plan parsing and result rendering. No I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from transports.chat.inline import InlineCall, result_marker

__all__ = [
    "MIN_CONFIDENCE",
    "Dialect",
    "PlanProblem",
    "blocked_envelope",
    "compact_json",
    "final_round_note",
    "inline_prompt",
    "json_plan_prompt",
    "low_confidence_envelope",
    "parse_plan",
    "results_message",
]

MIN_CONFIDENCE = 0.7


class Dialect(StrEnum):
    NATIVE = "native"
    INLINE = "inline"
    JSON = "json"


@dataclass(frozen=True, slots=True)
class PlanProblem:
    """The plan of a ``json`` round could not be read; the model answers without tools."""

    problem: str


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def compact_json(value: Any) -> str:
    """Compact JSON with sorted keys; read-only mappings (result envelopes) are accepted."""
    return orjson.dumps(value, default=_plain, option=orjson.OPT_SORT_KEYS).decode()


def _tool_lines(tools: Sequence[Mapping[str, Any]]) -> str:
    """One line per tool from its ``openaiChat`` declaration: name, description, schema."""
    lines = []
    for tool in tools:
        function = tool.get("function", tool)
        lines.append(
            f"- {function.get('name')}: {function.get('description', '')}\n"
            f"  parameters (JSON Schema): {compact_json(function.get('parameters', {}))}"
        )
    return "\n".join(lines)


def inline_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    return (
        "You can use these tools:\n"
        f"{_tool_lines(tools)}\n\n"
        "To call a tool, write exactly one marker per call in your reply, on its own:\n"
        '[TOOL_CALL:{"id":"call-1","tool":"TOOL_NAME","parameters":{...},"confidence":0.9}]\n'
        "Use a new id for every call. confidence (0 to 1) is how sure you are that the user "
        f"asked for this; below {MIN_CONFIDENCE} the call is not made, so ask the user instead. "
        "Results come back as lines [TOOL_RESULT:id:success] message or "
        "[TOOL_RESULT:id:error] message. Never write a [TOOL_RESULT:…] line yourself."
    )


def json_plan_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    return (
        "Before answering, decide which tools to call. You can use these tools:\n"
        f"{_tool_lines(tools)}\n\n"
        "Answer ONLY with a JSON object of this form, nothing else:\n"
        '{"toolCalls":[{"id":"call-1","tool":"TOOL_NAME","parameters":{...},"confidence":0.9}],'
        '"reasoning":"why these tools"}\n'
        'Use "toolCalls":[] when no tool is needed. confidence (0 to 1) is how sure you are that '
        f"the user asked for this; below {MIN_CONFIDENCE} the call is not made and you will be "
        "asked to check with the user."
    )


def final_round_note(dialect: Dialect, rounds: int) -> str:
    """The system note of the last request of a turn, which must answer without tools."""
    if dialect is Dialect.JSON:
        return (
            "Now answer the user in plain text, using the tool results above. Do not write JSON "
            "and do not call tools."
        )
    return (
        f"Tool use for this message has reached its limit ({rounds} rounds). Answer the user "
        "now with what you have, without calling any tool."
    )


def parse_plan(
    text: str, new_id: Callable[[], str] | None = None
) -> tuple[list[InlineCall], str] | PlanProblem:
    """The calls of a ``json`` plan and its reasoning, or why it could not be read."""
    make_id = new_id or (lambda: f"call_{uuid.uuid4().hex}")
    try:
        value = orjson.loads(_strip_fence(text))
    except orjson.JSONDecodeError as exc:
        return PlanProblem(f"the plan is not valid JSON ({exc})")
    if not isinstance(value, dict):
        return PlanProblem("the plan must be a JSON object")
    raw_calls = value.get("toolCalls", [])
    if not isinstance(raw_calls, list):
        return PlanProblem('"toolCalls" must be a list')
    calls: list[InlineCall] = []
    for position, raw in enumerate(raw_calls, start=1):
        if not isinstance(raw, dict):
            return PlanProblem(f"toolCalls[{position}] must be an object")
        tool = raw.get("tool")
        if not isinstance(tool, str) or not tool:
            return PlanProblem(f'toolCalls[{position}] has no "tool"')
        parameters = raw.get("parameters", raw.get("params", {}))
        if not isinstance(parameters, dict):
            return PlanProblem(f'toolCalls[{position}]: "parameters" must be an object')
        confidence = raw.get("confidence")
        if confidence is not None and (
            isinstance(confidence, bool) or not isinstance(confidence, int | float)
        ):
            return PlanProblem(f'toolCalls[{position}]: "confidence" must be a number')
        call_id = raw.get("id")
        calls.append(
            InlineCall(
                call_id=str(call_id) if call_id else make_id(),
                tool=tool,
                parameters=parameters,
                confidence=None if confidence is None else float(confidence),
            )
        )
    reasoning = value.get("reasoning")
    return calls, reasoning if isinstance(reasoning, str) else ""


def _strip_fence(text: str) -> str:
    """Models asked for JSON sometimes wrap it in a Markdown code fence anyway."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```"):
        body = stripped[3:-3]
        return body[4:] if body.startswith("json") else body
    return stripped


def blocked_envelope(error_type: str, message: str) -> dict[str, Any]:
    """The result of a call the transport did not let through (never ran: no side effects)."""
    return {
        "ok": False,
        "error": {
            "type": error_type,
            "message": message,
            "retryable": False,
            "partialSideEffects": False,
        },
    }


def low_confidence_envelope(confidence: float | None) -> dict[str, Any]:
    stated = "no confidence" if confidence is None else f"confidence {confidence:g}"
    return blocked_envelope(
        "INTENT_NOT_EXPLICIT",
        f"not called: {stated} is below {MIN_CONFIDENCE}. Ask the user to say clearly what "
        "they want before calling this tool.",
    )


def results_message(results: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Results for the text dialects: one ``[TOOL_RESULT:…]`` line per call, in a user message
    (these models know no ``tool`` role)."""
    lines = [
        result_marker(call_id, bool(envelope.get("ok")), compact_json(envelope))
        for call_id, envelope in results
    ]
    return {"role": "user", "content": "\n".join(lines)}
