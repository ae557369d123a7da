"""Every rule of the pure local brain, without an event loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from transports.local import (
    BAD_JSON_ARGUMENTS,
    EXAMPLE_SCENARIOS,
    CallTools,
    Fail,
    LocalBrain,
    Say,
    Scenario,
    ScenarioError,
    ToolCall,
    merge_confirmation_id,
)


def confirmation_required(confirmation_id: str) -> dict[str, Any]:
    return {
        "ok": False,
        "error": {
            "type": "CONFIRMATION_REQUIRED",
            "message": "Ask the user first.",
            "retryable": False,
            "partialSideEffects": False,
            "confirmationId": confirmation_id,
            "prompt": "Book it?",
            "expiresAt": "2026-01-01T00:00:00Z",
        },
    }


def calls_of(reply: object) -> tuple[ToolCall, ...]:
    assert isinstance(reply, CallTools), reply
    return reply.calls


# Free mode ---------------------------------------------------------------------------------


def test_plain_message_is_echoed_trimmed() -> None:
    assert LocalBrain().reply_to_text("  hello there ") == Say("You said: hello there")


def test_unknown_slash_word_is_a_plain_message() -> None:
    assert LocalBrain().reply_to_text("/dance now") == Say("You said: /dance now")


def test_say_silence_and_fail() -> None:
    brain = LocalBrain()
    assert brain.reply_to_text("/say Hello,  world") == Say("Hello,  world")
    assert brain.reply_to_text("/silence") == Say("")
    assert brain.reply_to_text("/fail") == Fail("local model asked to fail")


def test_slow_says_after_a_delay() -> None:
    brain = LocalBrain()
    assert brain.reply_to_text("/slow 250 take your time") == Say("take your time", delay_ms=250)
    assert brain.reply_to_text("/slow soon text") == Say("Usage: /slow MS TEXT")


def test_tool_call_passes_json_text_verbatim() -> None:
    calls = calls_of(LocalBrain().reply_to_text('/tool kb_search  {"query": "tea"}  '))
    assert calls == (ToolCall("call_1", "kb_search", '{"query": "tea"}'),)


def test_tool_call_without_arguments_gets_an_empty_object() -> None:
    assert calls_of(LocalBrain().reply_to_text("/tool get_current_time")) == (
        ToolCall("call_1", "get_current_time", "{}"),
    )


def test_tools_makes_one_batch_in_order() -> None:
    calls = calls_of(LocalBrain().reply_to_text('/tools a {"x": 1} ;; b ;; c {"y": [1, 2]}'))
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        ("call_1", "a", '{"x": 1}'),
        ("call_2", "b", "{}"),
        ("call_3", "c", '{"y": [1, 2]}'),
    ]


def test_badjson_sends_invalid_arguments() -> None:
    (call,) = calls_of(LocalBrain().reply_to_text("/badjson kb_search"))
    assert call.arguments == BAD_JSON_ARGUMENTS == '{"x": '
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(call.arguments)


def test_call_ids_count_per_brain() -> None:
    first, second = LocalBrain(), LocalBrain()
    assert calls_of(first.reply_to_text("/tool a"))[0].call_id == "call_1"
    assert calls_of(first.reply_to_text("/tools b ;; c"))[1].call_id == "call_3"
    assert calls_of(second.reply_to_text("/tool a"))[0].call_id == "call_1"


def test_utterance_transcript_reply() -> None:
    assert LocalBrain().reply_to_utterance(480) == Say("You said: audio:480ms")


# Tool results ------------------------------------------------------------------------------


def test_results_answer_in_call_order_with_sorted_compact_json() -> None:
    brain = LocalBrain()
    brain.reply_to_text("/tools first ;; second")
    assert (
        brain.reply_to_tool_results([("call_2", "second", {"ok": True, "data": {"b": 2}})]) is None
    )
    assert brain.open_call_ids == ("call_1",)
    reply = brain.reply_to_tool_results(
        [("call_1", "first", {"ok": True, "data": {"z": 1, "a": 0}})]
    )
    assert reply == Say(
        'Tool results: first={"data":{"a":0,"z":1},"ok":true}; second={"data":{"b":2},"ok":true}'
    )
    assert not brain.open_call_ids


def test_unknown_previous_and_repeated_results_are_ignored() -> None:
    brain = LocalBrain()
    brain.reply_to_text("/tool first")
    assert brain.reply_to_tool_results([("call_1", "first", {"ok": True})]) is not None
    brain.reply_to_text("/tools a ;; b")
    assert brain.reply_to_tool_results([("call_1", "first", {"ok": True})]) is None
    assert brain.reply_to_tool_results([("nope", "a", {"ok": True})]) is None
    assert brain.reply_to_tool_results([("call_2", "a", {"ok": True, "n": 1})]) is None
    assert brain.reply_to_tool_results([("call_2", "a", {"ok": False})]) is None
    reply = brain.reply_to_tool_results([("call_3", "b", {"ok": True})])
    assert reply == Say('Tool results: a={"n":1,"ok":true}; b={"ok":true}')


def test_results_without_an_open_batch_are_ignored() -> None:
    assert LocalBrain().reply_to_tool_results([("call_1", "a", {"ok": True})]) is None


# Confirmations -----------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["yes", " YES ", "Yes!", "confirm.", "Confirm?!"])
def test_yes_recalls_the_tool_with_the_confirmation_id(answer: str) -> None:
    brain = LocalBrain()
    brain.reply_to_text('/tool calendar_create_event {"title": "Dentist", "start": "x"}')
    brain.reply_to_tool_results(
        [("call_1", "calendar_create_event", confirmation_required("cf_9"))]
    )
    (call,) = calls_of(brain.reply_to_text(answer))
    assert call.call_id == "call_2"
    assert call.name == "calendar_create_event"
    assert orjson.loads(call.arguments) == {
        "title": "Dentist",
        "start": "x",
        "confirmation_id": "cf_9",
    }
    assert brain.pending_confirmations == ()


def test_any_other_message_forgets_the_pending_confirmation() -> None:
    brain = LocalBrain()
    brain.reply_to_text("/tool delete_all {}")
    brain.reply_to_tool_results([("call_1", "delete_all", confirmation_required("cf_1"))])
    assert brain.reply_to_text("yes please") == Say("You said: yes please")
    assert brain.reply_to_text("yes") == Say("You said: yes")


def test_an_utterance_forgets_the_pending_confirmation() -> None:
    brain = LocalBrain()
    brain.reply_to_text("/tool delete_all {}")
    brain.reply_to_tool_results([("call_1", "delete_all", confirmation_required("cf_1"))])
    brain.reply_to_utterance(300)
    assert brain.reply_to_text("yes") == Say("You said: yes")


def test_yes_recalls_every_pending_call_of_the_batch() -> None:
    brain = LocalBrain()
    brain.reply_to_text('/tools a {"n": 1} ;; b {} ;; c {"n": 3}')
    brain.reply_to_tool_results(
        [
            ("call_1", "a", confirmation_required("cf_a")),
            ("call_2", "b", {"ok": True}),
            ("call_3", "c", confirmation_required("cf_c")),
        ]
    )
    calls = calls_of(brain.reply_to_text("confirm"))
    assert [(c.call_id, c.name, orjson.loads(c.arguments)) for c in calls] == [
        ("call_4", "a", {"n": 1, "confirmation_id": "cf_a"}),
        ("call_5", "c", {"n": 3, "confirmation_id": "cf_c"}),
    ]


def test_other_errors_are_not_confirmations() -> None:
    brain = LocalBrain()
    brain.reply_to_text("/tool a")
    error = {"ok": False, "error": {"type": "VALIDATION", "confirmationId": "cf"}}
    brain.reply_to_tool_results([("call_1", "a", error)])
    assert brain.pending_confirmations == ()


def test_a_late_result_is_answered_at_once_and_settles_the_confirmation() -> None:
    brain = LocalBrain()
    brain.reply_to_text('/tool calendar_create_event {"title": "Dentist"}')
    brain.reply_to_tool_results([("call_1", "calendar_create_event", confirmation_required("cf"))])
    approved = {"ok": True, "data": {"event_id": "ev_1"}}
    assert brain.reply_to_late_result("call_1", "calendar_create_event", approved) == Say(
        'Tool results: calendar_create_event={"data":{"event_id":"ev_1"},"ok":true}'
    )
    assert brain.pending_confirmations == ()
    assert brain.reply_to_text("yes") == Say("You said: yes")


def test_a_late_result_leaves_the_open_batch_waiting() -> None:
    brain = LocalBrain()
    brain.reply_to_text("/tools a ;; b")
    brain.reply_to_late_result("call_0", "old", {"ok": False})
    assert brain.open_call_ids == ("call_1", "call_2")


def test_merge_confirmation_id_replaces_non_objects() -> None:
    assert orjson.loads(merge_confirmation_id('{"a": 1}', "cf")) == {
        "a": 1,
        "confirmation_id": "cf",
    }
    assert orjson.loads(merge_confirmation_id('{"x": ', "cf")) == {"confirmation_id": "cf"}
    assert orjson.loads(merge_confirmation_id("[1]", "cf")) == {"confirmation_id": "cf"}


# Scenarios ---------------------------------------------------------------------------------


def scenario(*steps: dict[str, Any]) -> LocalBrain:
    return LocalBrain(Scenario.from_dict({"name": "test", "steps": list(steps)}))


def test_scenario_steps_match_in_order() -> None:
    brain = scenario(
        {"expect": {"text": "hi"}, "reply": {"say": "Hello!"}},
        {"expect": {"utterance": True}, "reply": {"tools": [{"name": "t", "arguments": {"k": 1}}]}},
        {"expect": {"tool_results": ["t"]}, "reply": {"say": "Done.", "delay_ms": 40}},
    )
    assert brain.reply_to_text("hi") == Say("Hello!")
    assert calls_of(brain.reply_to_utterance(120)) == (ToolCall("call_1", "t", '{"k":1}'),)
    assert brain.reply_to_tool_results([("call_1", "t", {"ok": True})]) == Say("Done.", 40)
    assert brain.scenario_finished
    assert brain.scenario_mismatches == 0


def test_a_late_result_is_tool_results_input_in_a_scenario() -> None:
    brain = scenario({"expect": {"tool_results": ["t"]}, "reply": {"say": "late"}})
    assert brain.reply_to_late_result("call_9", "t", {"ok": True}) == Say("late")


def test_scenario_text_regex_is_searched() -> None:
    brain = scenario({"expect": {"text_regex": "(?i)dentist"}, "reply": {"say": "ok"}})
    assert brain.reply_to_text("Book the DENTIST tomorrow") == Say("ok")


def test_scenario_mismatch_does_not_advance() -> None:
    brain = scenario(
        {"expect": {"text": "hi"}, "reply": {"say": "Hello!"}},
        {"expect": {"text_regex": "^bye$"}, "reply": {"say": "Bye!"}},
    )
    assert brain.reply_to_text("hello") == Say(
        "Scenario mismatch at step 1: expected text 'hi', got text 'hello'"
    )
    assert brain.reply_to_text("hi") == Say("Hello!")
    assert brain.reply_to_utterance(90) == Say(
        "Scenario mismatch at step 2: expected text matching '^bye$', got an utterance (audio:90ms)"
    )
    assert brain.reply_to_text("bye") == Say("Bye!")
    assert brain.reply_to_text("again") == Say(
        "Scenario mismatch at step 3: expected the end of scenario 'test', got text 'again'"
    )
    assert brain.scenario_mismatches == 3


def test_scenario_tool_results_must_name_the_batch_in_order() -> None:
    brain = scenario(
        {"expect": {"text": "go"}, "reply": {"tools": [{"name": "a"}, {"name": "b"}]}},
        {"expect": {"tool_results": ["b", "a"]}, "reply": {"say": "never"}},
    )
    brain.reply_to_text("go")
    reply = brain.reply_to_tool_results([("call_2", "b", {"ok": True}), ("call_1", "a", {})])
    assert reply == Say(
        "Scenario mismatch at step 2: expected tool results [b, a], got tool results [a, b]"
    )
    assert brain.scenario_mismatches == 1


def test_slash_commands_are_plain_text_in_a_scenario() -> None:
    brain = scenario({"expect": {"text": "/fail"}, "reply": {"say": "not failing"}})
    assert brain.reply_to_text("/fail") == Say("not failing")


def test_booking_example_scenario_books_with_the_confirmation_id() -> None:
    brain = LocalBrain.from_scenario(EXAMPLE_SCENARIOS / "booking.json")
    (call,) = calls_of(brain.reply_to_text("Please book the dentist"))
    arguments = {"title": "Dentist", "start": "2026-12-01T10:00:00+01:00"}
    assert (call.name, orjson.loads(call.arguments)) == ("calendar_create_event", arguments)
    question = brain.reply_to_tool_results(
        [(call.call_id, call.name, confirmation_required("cf_42"))]
    )
    assert isinstance(question, Say)
    (again,) = calls_of(brain.reply_to_text("Yes, go ahead"))
    assert orjson.loads(again.arguments) == {**arguments, "confirmation_id": "cf_42"}
    done = brain.reply_to_tool_results([(again.call_id, again.name, {"ok": True, "data": {}})])
    assert isinstance(done, Say)
    assert done.text.startswith("Done")
    assert brain.scenario_finished
    assert brain.scenario_mismatches == 0


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"steps": []}, "'steps' must be a non-empty list"),
        ({"steps": [{"expect": {"text": "a"}}]}, "steps[0].reply: expected a JSON object"),
        ({"steps": [{"expect": {}, "reply": {"say": "x"}}]}, "steps[0].expect: expected exactly"),
        ({"steps": [{"expect": {"text_regex": "("}, "reply": {"say": "x"}}]}, "invalid regular"),
        ({"steps": [{"expect": {"utterance": 1}, "reply": {"say": "x"}}]}, "utterance"),
        ({"steps": [{"expect": {"text": "a"}, "reply": {"say": "x", "tools": []}}]}, "exactly one"),
        ({"steps": [{"expect": {"text": "a"}, "reply": {"tools": [{"name": ""}]}}]}, "name"),
        (
            {
                "steps": [
                    {"expect": {"text": "a"}, "reply": {"tools": [{"name": "t"}], "delay_ms": 5}}
                ]
            },
            "only a 'say' reply",
        ),
    ],
)
def test_malformed_scenarios_fail_at_load(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        Scenario.from_dict(data)
    assert fragment in str(raised.value)


def test_scenario_load_reports_unreadable_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ScenarioError, match=r"broken\.json"):
        LocalBrain.from_scenario(broken)
