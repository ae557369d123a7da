"""The fake chat-completions model follows ``tool_choice`` as the API does (``none``: words,
``required``: a call, a named function: that call, after results too), and refuses a named
function that is not one of ``tools`` with a 400. Pure (``brain.decide``)."""

from __future__ import annotations

from typing import Any

from fakes.chat.brain import Calls, HttpError, Text, decide

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_weather", "lookup_order")
]
NAMED = {"type": "function", "function": {"name": "lookup_order"}}


def asked(text: str, choice: Any, *after: dict[str, Any]) -> Any:
    messages = [{"role": "user", "content": text}, *after]
    return decide({"model": "m", "messages": messages, "tools": TOOLS, "tool_choice": choice}, {})


def called(reply: Any) -> list[tuple[str, str]]:
    assert isinstance(reply, Calls), reply
    return [(call.name, call.arguments_text) for call in reply.calls]


def test_none_answers_the_words_of_a_prompt_that_would_call() -> None:
    assert asked("/tool get_weather {}", "none") == Text("You said: /tool get_weather {}")


def test_required_and_a_named_function_call_for_a_prompt_that_would_not() -> None:
    assert called(asked("hello", "required")) == [("get_weather", "{}")]
    assert called(asked("hello", NAMED)) == [("lookup_order", "{}")]
    assert called(asked('/tool lookup_order {"order": "A1"}', NAMED)) == [
        ("lookup_order", '{"order": "A1"}')
    ]


def test_after_results_a_forced_choice_forces_a_call_again() -> None:
    function = {"name": "get_weather", "arguments": "{}"}
    results = (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": function}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
    )
    assert called(asked("hello", NAMED, *results)) == [("lookup_order", "{}")]
    assert asked("hello", "auto", *results) == Text("Tool results: get_weather={}")


def test_a_named_function_that_is_not_a_tool_is_a_400() -> None:
    reply = asked("hello", {"type": "function", "function": {"name": "nope"}})
    assert isinstance(reply, HttpError)
    assert reply.status == 400
    assert "no function named 'nope'" in reply.message
