"""Reading a streamed completion into shown text and calls, and planning each round's calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from transports.chat.calls import plan_calls
from transports.chat.dialects import (
    Dialect,
    PlanProblem,
    final_round_note,
    inline_prompt,
    json_plan_prompt,
    parse_plan,
    results_message,
)
from transports.chat.reader import Completion, CompletionReader
from transports.events import RequestedCall

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def chunk(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    out: dict[str, Any] = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        out = {"choices": [], "usage": usage}
    return out


def read(dialect: Dialect, chunks: list[dict[str, Any]], planning: bool = False) -> Completion:
    reader = CompletionReader(dialect, planning=planning, new_id=ids())
    shown = "".join(reader.feed(c) for c in chunks)
    tail, completion = reader.finish()
    assert shown + tail == completion.shown
    return completion


def ids() -> Any:
    made: Iterator[str] = iter(f"call_new_{n}" for n in range(1, 100))
    return lambda: next(made)


def unique() -> Any:
    used: set[str] = set()
    fresh = ids()

    def make(call_id: str) -> str:
        if not call_id or call_id in used:
            call_id = fresh()
        used.add(call_id)
        return call_id

    return make


def test_native_text_and_calls_are_separated_and_usage_kept() -> None:
    completion = read(
        Dialect.NATIVE,
        [
            chunk(content="Let me "),
            chunk(content="check."),
            chunk(tool_calls=[{"index": 0, "id": "call_a", "function": {"name": "get_weather"}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"ci'}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": 'ty":"Oslo"}'}}]),
            chunk(finish="tool_calls"),
            chunk(usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
        ],
    )
    assert completion.shown == "Let me check."
    assert completion.finish_reason == "tool_calls"
    assert [(c.call_id, c.name, c.arguments) for c in completion.native_calls] == [
        ("call_a", "get_weather", '{"city":"Oslo"}')
    ]
    assert completion.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def test_other_choices_are_ignored() -> None:
    reader = CompletionReader(Dialect.NATIVE)
    assert reader.feed({"choices": [{"index": 1, "delta": {"content": "no"}}]}) == ""
    assert reader.feed({"choices": [{"index": 0, "delta": {"content": "yes"}}]}) == "yes"


def test_length_limit_marks_calls_truncated_and_they_never_run() -> None:
    completion = read(
        Dialect.NATIVE,
        [
            chunk(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "get_weather"}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"city":"Os'}}]),
            chunk(finish="length"),
        ],
    )
    planned = plan_calls(completion, Dialect.NATIVE, unique())
    assert planned.requested == ()
    assert [r.reason for r in planned.refused] == ["truncated"]
    assert planned.refused[0].envelope["error"]["type"] == "VALIDATION"
    messages = planned.messages({r.call_id: r.envelope for r in planned.refused})
    assert messages[0]["tool_calls"][0]["function"]["arguments"] == '{"city":"Os'
    assert messages[1]["tool_call_id"] == "c1"


def test_native_round_messages_pair_every_call_with_its_result_in_order() -> None:
    completion = read(
        Dialect.NATIVE,
        [
            chunk(tool_calls=[{"index": 1, "id": "b", "function": {"name": "t2"}}]),
            chunk(tool_calls=[{"index": 0, "id": "a", "function": {"name": "t1"}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": "{}"}}]),
            chunk(tool_calls=[{"index": 1, "function": {"arguments": '{"x": '}}]),
            chunk(finish="tool_calls"),
        ],
    )
    planned = plan_calls(completion, Dialect.NATIVE, unique())
    assert planned.requested == (RequestedCall("a", "t1", "{}"), RequestedCall("b", "t2", '{"x": '))
    messages = planned.messages({"a": {"ok": True}, "b": {"ok": False}})
    assert messages[0]["content"] is None
    assert [m["tool_call_id"] for m in messages[1:]] == ["a", "b"]
    assert [json.loads(m["content"]) for m in messages[1:]] == [{"ok": True}, {"ok": False}]


def test_reused_and_missing_ids_are_replaced_once() -> None:
    make = unique()
    first = read(
        Dialect.NATIVE,
        [
            chunk(tool_calls=[{"index": 0, "id": "call_0", "function": {"name": "t"}}]),
            chunk(finish="tool_calls"),
        ],
    )
    again = read(
        Dialect.NATIVE,
        [
            chunk(tool_calls=[{"index": 0, "id": "call_0", "function": {"name": "t"}}]),
            chunk(finish="tool_calls"),
        ],
    )
    a = plan_calls(first, Dialect.NATIVE, make)
    b = plan_calls(again, Dialect.NATIVE, make)
    assert a.requested[0].call_id == "call_0"
    assert b.requested[0].call_id == "call_new_1"
    assert b.order[0][0] == "call_new_1"  # the history uses the same replaced id


def test_inline_markers_are_hidden_and_planned_with_confidence_rules() -> None:
    marker_ok = (
        '[TOOL_CALL:{"id":"c1","tool":"get_weather","parameters":{"city":"Oslo"},"confidence":0.9}]'
    )
    marker_low = '[TOOL_CALL:{"id":"c2","tool":"get_weather","parameters":{},"confidence":0.5}]'
    marker_none = '[TOOL_CALL:{"id":"c3","tool":"get_weather","parameters":{}}]'
    text = f"Sure. {marker_ok} And {marker_low}{marker_none} [TOOL_CALL:{{bad]"
    pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
    completion = read(Dialect.INLINE, [chunk(content=p) for p in pieces] + [chunk(finish="stop")])
    assert "TOOL_CALL" not in completion.shown
    assert completion.shown.startswith("Sure. ")
    assert completion.text == text
    planned = plan_calls(completion, Dialect.INLINE, unique())
    assert planned.requested == (RequestedCall("c1", "get_weather", {"city": "Oslo"}),)
    reasons = {r.call_id: r.reason for r in planned.refused}
    assert reasons["c2"] == "low_confidence"
    assert reasons["c3"] == "low_confidence"
    assert sorted(reasons.values()).count("unreadable") == 1
    low = next(r for r in planned.refused if r.call_id == "c2")
    assert low.envelope["error"]["type"] == "INTENT_NOT_EXPLICIT"
    assert "0.5" in low.envelope["error"]["message"]
    envelopes = {r.call_id: r.envelope for r in planned.refused} | {"c1": {"ok": True}}
    assistant, results = planned.messages(envelopes)
    assert assistant == {"role": "assistant", "content": text}
    assert results["role"] == "user"
    lines = results["content"].splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("[TOOL_RESULT:")  # the unreadable marker, reported first
    assert '[TOOL_RESULT:c1:success] {"ok":true}' in lines
    assert any(line.startswith("[TOOL_RESULT:c2:error] ") for line in lines)


def test_a_json_planning_round_shows_nothing_and_its_plan_is_parsed() -> None:
    plan = {
        "toolCalls": [
            {"id": "p1", "tool": "get_weather", "parameters": {"city": "Rome"}, "confidence": 1},
            {"tool": "get_weather", "parameters": {"city": "?"}, "confidence": 0.2},
        ],
        "reasoning": "the user asked",
    }
    text = orjson.dumps(plan).decode()
    completion = read(Dialect.JSON, [chunk(content=text[:7]), chunk(content=text[7:])], True)
    assert completion.shown == ""
    planned = plan_calls(completion, Dialect.JSON, unique())
    assert planned.requested == (RequestedCall("p1", "get_weather", {"city": "Rome"}),)
    assert [r.reason for r in planned.refused] == ["low_confidence"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ('{"toolCalls": {}}', '"toolCalls" must be a list'),
        ('{"toolCalls": [{"parameters": {}}]}', 'has no "tool"'),
        ('{"toolCalls": [{"tool": "t", "parameters": []}]}', '"parameters" must be an object'),
        ('{"toolCalls": [{"tool": "t", "confidence": "high"}]}', '"confidence" must be a number'),
        ('{"toolCalls": [{"tool": "t", "confidence": true}]}', '"confidence" must be a number'),
    ],
)
def test_bad_plans_say_what_is_wrong(text: str, problem: str) -> None:
    parsed = parse_plan(text)
    assert isinstance(parsed, PlanProblem)
    assert problem in parsed.problem


def test_plan_in_a_code_fence_and_without_calls() -> None:
    parsed = parse_plan('```json\n{"toolCalls": [], "reasoning": "none needed"}\n```')
    assert parsed == ([], "none needed")
    completion = read(Dialect.JSON, [chunk(content="garbage")], True)
    planned = plan_calls(completion, Dialect.JSON, unique())
    assert planned.empty
    assert planned.problem is not None


def test_prompts_name_every_tool_and_the_formats() -> None:
    for prompt in (inline_prompt(TOOLS), json_plan_prompt(TOOLS)):
        assert "get_weather" in prompt
        assert '"city"' in prompt
        assert "0.7" in prompt
    assert "[TOOL_CALL:" in inline_prompt(TOOLS)
    assert '"toolCalls"' in json_plan_prompt(TOOLS)
    assert "5 rounds" in final_round_note(Dialect.NATIVE, 5)
    assert "plain text" in final_round_note(Dialect.JSON, 1)


def test_results_message_accepts_read_only_envelopes() -> None:
    from types import MappingProxyType

    envelope = MappingProxyType({"ok": False, "error": MappingProxyType({"type": "TIMEOUT"})})
    message = results_message([("c9", envelope)])
    assert message == {
        "role": "user",
        "content": '[TOOL_RESULT:c9:error] {"error":{"type":"TIMEOUT"},"ok":false}',
    }
