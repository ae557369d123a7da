"""The fake chat-completions model's decisions and wire format, without sockets or a loop."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from fakes.chat.brain import (
    Calls,
    Cut,
    FakeCall,
    HttpError,
    Text,
    decide,
    request_style,
    validate,
)
from fakes.chat.server import (
    Envelope,
    FakeChatOptions,
    completion_object,
    error_body,
    stream_chunks,
    text_pieces,
    tool_call_deltas,
)
from transports.chat.inline import InlineCall, InlineMarkerFilter, MarkerProblem, result_marker

CALL_ID = re.compile(r"call_[0-9a-f]{24}")
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
INLINE_SYSTEM = {"role": "system", "content": 'Call a tool by writing [TOOL_CALL:{"tool": …}].'}
JSON_SYSTEM = {"role": "system", "content": "Answer with a JSON plan."}
CONFIRM = '{"ok": false, "error": {"type": "CONFIRMATION_REQUIRED", "confirmationId": "cf_1"}}'


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def calling(*calls: tuple[str, str, str]) -> dict[str, Any]:
    """An assistant message with native calls ``(id, name, arguments)``."""
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
    ]
    return {"role": "assistant", "content": None, "tool_calls": tool_calls}


def tool(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def native(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-fake", "messages": list(messages), "tools": TOOLS, **extra}


def plain(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-fake", "messages": list(messages), **extra}


def as_json(*messages: dict[str, Any]) -> dict[str, Any]:
    return plain(JSON_SYSTEM, *messages, response_format={"type": "json_object"})


def inline(*messages: dict[str, Any]) -> dict[str, Any]:
    return plain(INLINE_SYSTEM, *messages)


def decided(body: dict[str, Any], counters: dict[str, int] | None = None) -> Any:
    return decide(body, {} if counters is None else counters)


def markers(text: str) -> list[InlineCall | MarkerProblem]:
    """What the gateway's own inline filter reads in a reply."""
    marker_filter = InlineMarkerFilter()
    return marker_filter.feed(text)[1] + marker_filter.finish()[1]


# Styles ---------------------------------------------------------------------------------------


def test_the_style_follows_what_the_request_allows() -> None:
    assert request_style(native(user("hi"))) == "native"
    assert request_style(native(user("hi"), tool_choice="required")) == "native"
    assert request_style(native(user("hi"), tool_choice="none")) == "none"
    assert request_style(as_json(user("hi"))) == "json"
    assert request_style(inline(user("hi"))) == "inline"
    developer = {"role": "developer", "content": [{"type": "text", "text": "[TOOL_CALL:{…}]"}]}
    assert request_style(plain(developer, user("hi"))) == "inline"
    assert request_style(plain(user("[TOOL_CALL: in a user message does not count"))) == "none"


def test_native_calls_have_fresh_ids_and_verbatim_arguments() -> None:
    reply = decided(native(user('/tools f {"a": 1} ;; g {"b": [2]}')))
    assert isinstance(reply, Calls)
    assert [(c.name, c.arguments_text) for c in reply.calls] == [
        ("f", '{"a": 1}'),
        ("g", '{"b": [2]}'),
    ]
    again = decided(native(user("/tool f {}")))
    ids = [c.call_id for c in reply.calls + again.calls]
    assert all(CALL_ID.fullmatch(i) for i in ids)
    assert len(set(ids)) == 3


def test_badjson_keeps_its_invalid_arguments() -> None:
    reply = decided(native(user("/badjson f")))
    assert isinstance(reply, Calls)
    assert reply.calls[0].arguments_text == '{"x": '


def test_the_json_style_answers_a_plan() -> None:
    reply = decided(as_json(user('/tool f {"city": "Paris"}')))
    assert isinstance(reply, Text)
    plan = json.loads(reply.text)
    (entry,) = plan["toolCalls"]
    assert CALL_ID.fullmatch(entry.pop("id"))
    assert entry == {"tool": "f", "parameters": {"city": "Paris"}, "confidence": 1.0}
    assert isinstance(plan["reasoning"], str)
    assert json.loads(decided(as_json(user("hello"))).text) == {
        "toolCalls": [],
        "reasoning": "You said: hello",
    }


def test_the_inline_style_writes_markers_the_gateway_can_read() -> None:
    reply = decided(inline(user('/tools f {"a": 1} ;; g {}')))
    assert isinstance(reply, Text)
    assert reply.text.startswith("Let me check that. [TOOL_CALL:")
    found = markers(reply.text)
    assert [(c.tool, c.parameters, c.confidence) for c in found if isinstance(c, InlineCall)] == [
        ("f", {"a": 1}, 1.0),
        ("g", {}, 1.0),
    ]
    assert all(isinstance(c, InlineCall) and CALL_ID.fullmatch(c.call_id) for c in found)


def test_badjson_inline_is_a_marker_the_gateway_cannot_read() -> None:
    (problem,) = markers(decided(inline(user("/badjson f"))).text)
    assert isinstance(problem, MarkerProblem)


@pytest.mark.parametrize(
    "body",
    [plain(user("/tool f {}")), native(user("/tool f {}"), tool_choice="none")],
    ids=["no-tools", "tool-choice-none"],
)
def test_without_a_way_to_call_tools_the_fake_only_talks(body: dict[str, Any]) -> None:
    assert decided(body) == Text("You said: /tool f {}")


def test_unsure_lowers_the_confidence_where_there_is_one() -> None:
    (entry,) = json.loads(decided(as_json(user("/unsure f {}"))).text)["toolCalls"]
    assert entry["confidence"] == 0.4
    (call,) = markers(decided(inline(user('/unsure f {"q": 1}'))).text)
    assert isinstance(call, InlineCall)
    assert (call.tool, call.parameters, call.confidence) == ("f", {"q": 1}, 0.4)
    reply = decided(native(user("/unsure f")))
    assert isinstance(reply, Calls)
    assert reply.calls[0].arguments_text == "{}"


def test_json_directive_answers_its_text_verbatim_in_the_json_style_only() -> None:
    assert decided(as_json(user("/json {not a plan"))) == Text("{not a plan")
    assert decided(plain(user("/json {not a plan"))) == Text("You said: /json {not a plan")


# The turn and its results -----------------------------------------------------------------------


def test_the_user_text_may_come_in_parts() -> None:
    parts = [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}]
    assert decided(plain({"role": "user", "content": parts})) == Text("You said: hello there")


def test_native_results_are_answered_in_result_order_as_compact_json() -> None:
    body = native(
        user('/tools f {"a": 1} ;; g {}'),
        calling(("call_1", "f", '{"a": 1}'), ("call_2", "g", "{}")),
        tool("call_2", "plain text, not JSON"),
        tool("call_1", '{"z": 1, "a": {"y": 2, "b": 3}}'),
    )
    assert decided(body) == Text(
        'Tool results: g=plain text, not JSON; f={"a":{"b":3,"y":2},"z":1}'
    )


def test_inline_results_take_names_from_the_markers() -> None:
    asked = decided(inline(user("/tools f {} ;; g {}"))).text
    first, second = (c.call_id for c in markers(asked) if isinstance(c, InlineCall))
    results = "\n".join(
        [
            result_marker(second, False, '{"ok": false, "b": 1}'),
            result_marker(first, True, "done"),
            result_marker("call_unknown", True, "{}"),
        ]
    )
    body = inline(
        user("/tools f {} ;; g {}"), {"role": "assistant", "content": asked}, user(results)
    )
    assert decided(body) == Text('Tool results: g={"b":1,"ok":false}; f=done; call_unknown={}')


def test_results_with_the_json_format_are_answered_as_text() -> None:
    body = plain(
        JSON_SYSTEM,
        user("/tool f {}"),
        calling(("call_1", "f", "{}")),
        tool("call_1", '{"ok": true}'),
        tools=TOOLS,
        tool_choice="none",
        response_format={"type": "json_object"},
    )
    assert request_style(body) == "json"
    assert decided(body) == Text('Tool results: f={"ok":true}')


def test_a_new_user_message_after_results_is_a_new_turn() -> None:
    body = native(
        user("/tool f {}"), calling(("call_1", "f", "{}")), tool("call_1", "{}"), user("hello")
    )
    assert decided(body) == Text("You said: hello")


def test_context_after_the_last_reply_is_acknowledged_not_a_new_turn() -> None:
    late = {"role": "system", "content": "The result of call_1 has arrived."}
    body = native(user("/tool f {}"), {"role": "assistant", "content": "Done."}, late)
    assert decided(body) == Text("Noted: The result of call_1 has arrived.")
    # A note before any reply to the user text is not context to acknowledge.
    note_first = native(user("hello"), {"role": "system", "content": "answer now"})
    assert decided(note_first) == Text("You said: hello")


# /chain ---------------------------------------------------------------------------------------


def test_chain_calls_again_until_n_rounds() -> None:
    ask = user('/chain 3 f {"n": 1}')
    first = decided(native(ask))
    assert isinstance(first, Calls)
    assert (first.calls[0].name, first.calls[0].arguments_text) == ("f", '{"n": 1}')
    history = [ask, calling(("call_1", "f", '{"n": 1}')), tool("call_1", "1")]
    second = decided(native(*history))
    assert isinstance(second, Calls)
    assert second.calls[0].call_id != first.calls[0].call_id
    history += [calling(("call_2", "f", '{"n": 1}')), tool("call_2", "2")]
    assert isinstance(decided(native(*history)), Calls)
    history += [calling(("call_3", "f", '{"n": 1}')), tool("call_3", "3")]
    assert decided(native(*history)) == Text("Tool results: f=3")


def test_chain_in_the_inline_style_and_without_tools() -> None:
    ask = user("/chain 2 f {}")
    asked = decided(inline(ask)).text
    (call,) = markers(asked)
    assert isinstance(call, InlineCall)
    results = user(result_marker(call.call_id, True, "ok"))
    again = decided(inline(ask, {"role": "assistant", "content": asked}, results))
    assert isinstance(again, Text)
    assert [c.tool for c in markers(again.text) if isinstance(c, InlineCall)] == ["f"]
    assert decided(plain(ask)) == Text("You said: /chain 2 f {}")


# /http, /cut ----------------------------------------------------------------------------------


def test_http_fails_with_the_status() -> None:
    assert decided(plain(user("/http 503"))) == HttpError(
        503, "fake HTTP 503 error", "server_error"
    )
    assert decided(plain(user("/http 401 go away"))) == HttpError(401, "go away", "invalid_api_key")
    assert decided(plain(user("/http 200"))) == Text("You said: /http 200")


def test_http_times_counts_requests_per_exact_text() -> None:
    counters: dict[str, int] = {}
    slow = plain(user("/http 429 2 slow down"))
    failed = HttpError(429, "slow down", "rate_limit_exceeded")
    assert decided(slow, counters) == failed
    assert decided(plain(user("/http 429 1")), counters).status == 429  # counted apart
    assert decided(slow, counters) == failed
    assert decided(slow, counters) == Text("You said: /http 429 2 slow down")
    assert decided(plain(user("/http 429 1")), counters) == Text("You said: /http 429 1")


def test_cut_streams_its_text_then_breaks() -> None:
    assert decided(native(user("/cut half an answer"))) == Cut("half an answer")


# The local model's rules ------------------------------------------------------------------------


def test_local_model_replies_map_to_fake_replies() -> None:
    assert decided(plain(user("/say Hi there."))) == Text("Hi there.")
    assert decided(plain(user("/slow 40 late"))) == Text("late", delay_ms=40)
    assert decided(plain(user("/error boom"))) == HttpError(500, "boom", "server_error")
    failed = HttpError(500, "local model asked to fail", "server_error")
    assert decided(plain(user("/fail"))) == failed
    assert decided(plain(user("  hello  "))) == Text("You said: hello")


def test_yes_after_a_confirmation_calls_again_with_its_id() -> None:
    history = [
        user('/tool book {"at": "10:00"}'),
        calling(("call_1", "book", '{"at": "10:00"}')),
        tool("call_1", CONFIRM),
        {"role": "assistant", "content": "Shall I book it?"},
    ]
    reply = decided(native(*history, user("Yes!")))
    assert isinstance(reply, Calls)
    (call,) = reply.calls
    assert call.name == "book"
    assert json.loads(call.arguments_text) == {"at": "10:00", "confirmation_id": "cf_1"}
    assert decided(native(*history, user("no"))) == Text("You said: no")
    assert decided(native(*history[:2], tool("call_1", "{}"), user("yes"))) == Text("You said: yes")


def test_yes_in_the_inline_style_and_without_tools() -> None:
    asked = decided(inline(user("/tool book {}"))).text
    (call,) = markers(asked)
    assert isinstance(call, InlineCall)
    history = [
        user("/tool book {}"),
        {"role": "assistant", "content": asked},
        user(result_marker(call.call_id, False, CONFIRM)),
        {"role": "assistant", "content": "Shall I?"},
        user("confirm"),
    ]
    (again,) = markers(decided(inline(*history)).text)
    assert isinstance(again, InlineCall)
    assert (again.tool, again.parameters) == ("book", {"confirmation_id": "cf_1"})
    answer = decided(plain(*history))  # no way to call: the latest results instead
    assert answer == Text(
        'Tool results: book={"error":{"confirmationId":"cf_1","type":"CONFIRMATION_REQUIRED"},'
        '"ok":false}'
    )


# Validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"messages": [user("hi")]}, "model"),
        ({"model": "m"}, "'messages'"),
        ({"model": "m", "messages": "hi"}, "'messages'"),
        ({"model": "m", "messages": []}, "empty array"),
        (plain({"role": "robot", "content": "hi"}), "messages[0].role"),
        (plain({"content": "hi"}), "messages[0].role"),
        (plain({"role": "user", "content": None}), "messages[0].content"),
        (plain(user("hi"), tool("call_1", "{}")), "role 'tool'"),
        (
            plain(user("hi"), calling(("call_1", "f", "{}")), tool("call_9", "{}")),
            "'call_9'",
        ),
        (plain(user("hi"), calling(("call_1", "f", "{}"))), "call_1"),
        (
            plain(
                user("hi"), calling(("a", "f", "{}"), ("b", "f", "{}")), tool("a", "1"), user("x")
            ),
            "did not have response messages: b",
        ),
        (
            plain(user("hi"), calling(("a", "f", "{}")), tool("a", "1"), tool("a", "2")),
            "twice",
        ),
        (
            plain(user("hi"), calling(("a", "f", "{}")), user("x"), tool("a", "1")),
            "did not have response messages: a",
        ),
        (plain(user("hi"), {"role": "tool", "content": "{}"}), "tool_call_id"),
        (plain(user("hi"), tool_choice="auto"), "tool_choice"),
        (plain(user("hi"), tools=[]), "'tools'"),
        (plain(user("hi"), stream_options={"include_usage": True}), "stream_options"),
        (plain(user("hi"), response_format={"type": "json_object"}), "word 'json'"),
        (plain(user("hi"), response_format={"type": "yaml"}), "response_format.type"),
    ],
)
def test_invalid_bodies_are_rejected_like_the_real_api(body: dict[str, Any], words: str) -> None:
    problem = validate(body)
    assert problem is not None
    assert words in problem
    assert decided(body) == HttpError(400, problem, "invalid_request_error")


def test_a_whole_valid_history_passes() -> None:
    body = native(
        {"role": "developer", "content": "Be brief."},
        user("/tools f {} ;; f {}"),
        calling(("a", "f", "{}"), ("b", "f", "{}")),
        tool("b", "1"),
        tool("a", "2"),
        {"role": "assistant", "content": "Tool results: …"},
        user("thanks"),
        stream=True,
        stream_options={"include_usage": True},
        tool_choice={"type": "function", "function": {"name": "f"}},
    )
    assert validate(body) is None


# The wire format --------------------------------------------------------------------------------


ENVELOPE = Envelope("chatcmpl-1", 1700000000, "gpt-fake", include_usage=True, prompt_tokens=7)


def test_text_pieces_are_words_or_fixed_sizes() -> None:
    assert text_pieces("You said:  hi there") == ["You ", "said:  ", "hi ", "there"]
    assert text_pieces("  ") == ["  "]
    assert text_pieces("") == []
    assert text_pieces("abcdefg", 3) == ["abc", "def", "g"]


def test_parallel_calls_interleave_after_all_first_pieces() -> None:
    calls = [FakeCall("call_a", "alpha", '{"x":12}'), FakeCall("call_b", "beta", "{}")]
    pieces = tool_call_deltas(calls, FakeChatOptions(fragment_size=3, split_names=True))
    assert [p["index"] for p in pieces] == [0, 1, 0, 1, 0, 1, 0, 0]
    assert pieces[0] == {
        "index": 0,
        "id": "call_a",
        "type": "function",
        "function": {"name": "al", "arguments": ""},
    }
    assert pieces[2] == {"index": 0, "function": {"name": "pha"}}
    assert [p["function"]["arguments"] for p in pieces[4:]] == ['{"x', "{}", '":1', "2}"]


def test_calls_one_after_the_other_without_ids() -> None:
    calls = [FakeCall("call_a", "a", "{}"), FakeCall("call_b", "b", "{}")]
    pieces = tool_call_deltas(calls, FakeChatOptions(interleave=False, omit_ids=True))
    assert [p["index"] for p in pieces] == [0, 0, 1, 1]
    assert not any("id" in p for p in pieces)


def test_a_stream_ends_with_its_finish_reason_and_usage() -> None:
    frames = stream_chunks(Text("hi there"), ENVELOPE, FakeChatOptions(word_delay_s=0.5))
    deltas = [f[1]["choices"][0]["delta"] if f[1]["choices"] else None for f in frames]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {},
        {"content": "hi "},
        {"content": "there"},
        {},
        {},
        None,
    ]
    assert [f[0] for f in frames] == [0, 0, 0, 0.5, 0, 0, 0]
    assert frames[-2][1]["choices"][0]["finish_reason"] == "stop"
    assert frames[-1][1]["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    assert all(f[1]["usage"] is None for f in frames[:-1])


def test_a_cut_stream_has_no_finish_reason() -> None:
    frames = stream_chunks(Cut("a b"), ENVELOPE, FakeChatOptions(empty_deltas=False))
    assert [f[1]["choices"][0]["delta"] for f in frames] == [
        {"role": "assistant", "content": ""},
        {"content": "a "},
        {"content": "b"},
    ]
    assert all(f[1]["choices"][0]["finish_reason"] is None for f in frames)


def test_a_completion_and_an_error_body() -> None:
    completion = completion_object(Calls((FakeCall("call_a", "f", "{}"),)), ENVELOPE)
    (choice,) = completion["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}
    assert error_body(429, "slow", "rate_limit_exceeded") == {
        "error": {
            "message": "slow",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
