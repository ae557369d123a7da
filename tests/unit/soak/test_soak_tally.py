"""The soak's tally of what the upstream fakes saw of tool results: given per upstream session,
answered by completed replies only, replays and the model's own words not counted."""

from __future__ import annotations

import json
from typing import Any

from soak.upstream_tally import RUN_KEY, Tally, answers_results, tag_in

RUN = "soakrun:sess_1:function-call-1~ab12cd"
OTHER = "soakrun:sess_1:call_7"


def output(run: str) -> dict[str, Any]:
    envelope = json.dumps({"ok": True, "data": {"label": "x", "run": run}})
    item = {"type": "function_call_output", "call_id": "call_1", "output": envelope}
    return {"type": "conversation.item.create", "item": item}


def message(role: str, text: str) -> dict[str, Any]:
    item = {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}
    return {"type": "conversation.item.create", "item": item}


def done(status: str, text: str) -> dict[str, Any]:
    content = [{"type": "output_audio", "transcript": text}]
    return {
        "type": "response.done",
        "response": {"status": status, "output": [{"content": content}]},
    }


def test_a_run_key_is_read_whole_however_deep_the_json() -> None:
    twice_encoded = json.dumps({"output": json.dumps({"run": RUN})})
    assert RUN_KEY.findall(twice_encoded) == [RUN]
    assert tag_in('{"instructions": "soak-tag:s12 A soak"}') == "s12"
    assert answers_results(f"You said: hello {RUN}") == set()
    assert answers_results(f"Tool results: soak_count={{{RUN}}}") == {RUN}


def test_openai_a_result_given_twice_to_one_connection_is_a_duplicate() -> None:
    tally = Tally()
    tally.frame(
        1, "openai", "in", {"type": "session.update", "session": {"instructions": "soak-tag:s3"}}
    )
    tally.frame(1, "openai", "in", output(RUN))
    tally.frame(2, "openai", "in", output(RUN))  # a replay on a new connection
    assert tally.duplicates == []
    assert tally.given[RUN] == 2
    tally.frame(1, "openai", "in", message("system", f"Result of the earlier call: {RUN}"))
    (duplicate,) = tally.duplicates
    assert (duplicate["run"], duplicate["tag"]) == (RUN, "s3")


def test_openai_the_models_own_words_quoting_a_result_are_not_given() -> None:
    tally = Tally()
    tally.frame(1, "openai", "in", output(RUN))
    tally.frame(1, "openai", "in", message("assistant", f"Tool results: soak_count={RUN}"))
    assert tally.duplicates == []


def test_openai_only_completed_replies_answer() -> None:
    tally = Tally()
    tally.frame(1, "openai", "out", done("cancelled", f"Tool results: x={RUN}"))
    tally.frame(1, "openai", "out", done("completed", f"Tool results: x={RUN}"))
    tally.frame(1, "openai", "out", done("completed", f"You said: {OTHER}"))
    assert tally.answered == {RUN: 1}


def test_gemini_tool_responses_and_user_turns_are_given_turns_are_answered_at_their_end() -> None:
    tally = Tally()
    tally.frame(1, "gemini", "in", {"setup": {"systemInstruction": "soak-tag:s9"}})
    tally.frame(
        1, "gemini", "in", {"toolResponse": {"functionResponses": [{"response": {"run": RUN}}]}}
    )
    model_turn = {"role": "model", "parts": [{"text": f"Tool results: {RUN}"}]}
    tally.frame(1, "gemini", "in", {"clientContent": {"turns": [model_turn]}})
    assert tally.given == {RUN: 1}
    assert tally.duplicates == []
    parts = {"serverContent": {"modelTurn": {"parts": [{"text": f"Tool results: {RUN}"}]}}}
    tally.frame(1, "gemini", "out", parts)
    tally.frame(1, "gemini", "out", {"serverContent": {"interrupted": True}})
    tally.frame(1, "gemini", "out", {"serverContent": {"turnComplete": True}})
    assert tally.answered == {}
    tally.frame(1, "gemini", "out", {"serverContent": {"outputTranscription": {"text": "Tool "}}})
    tally.frame(
        1, "gemini", "out", {"serverContent": {"outputTranscription": {"text": f"results: {RUN}"}}}
    )
    tally.frame(1, "gemini", "out", {"serverContent": {"turnComplete": True}})
    assert tally.answered == {RUN: 1}
    assert tally.tag_of(1) == "s9"


def test_chat_a_result_counts_in_the_request_that_brings_it_not_in_later_ones() -> None:
    tally = Tally()
    system = {"role": "system", "content": "soak-tag:s4"}
    asked = {"role": "assistant", "tool_calls": [{"id": "call_7"}]}
    result = {"role": "tool", "tool_call_id": "call_7", "content": json.dumps({"run": OTHER})}
    tally.chat_exchange({"messages": [system, asked, result]}, f"Tool results: x={OTHER}")
    answer = {"role": "assistant", "content": f"Tool results: x={OTHER}"}
    later = [system, asked, result, answer, {"role": "user", "content": "hi"}]
    tally.chat_exchange({"messages": later}, "You said: hi")
    assert tally.given == {OTHER: 1}
    assert tally.answered == {OTHER: 1}
    tally.chat_exchange({"messages": [system, asked, result]}, None)  # the same result again
    assert [d["tag"] for d in tally.duplicates] == ["s4"]


def test_the_tallies_of_the_fakes_processes_add_up_to_one() -> None:
    from soak.fleet import merge_tallies

    openai = {
        "given": {"run-1": 1},
        "answered": {"run-1": 1},
        "duplicates": [],
        "connections": {"openai": 3},
        "completed_replies": {"openai": 5},
    }
    gemini = {
        "given": {"run-2": 2},
        "answered": {},
        "duplicates": [{"run": "run-2"}],
        "connections": {"gemini": 2},
        "completed_replies": {"gemini": 1},
    }
    merged = merge_tallies([openai, gemini, {"given": {"run-1": 1}}])
    assert merged == {
        "given": {"run-1": 2, "run-2": 2},
        "answered": {"run-1": 1},
        "duplicates": [{"run": "run-2"}],
        "connections": {"openai": 3, "gemini": 2},
        "completed_replies": {"openai": 5, "gemini": 1},
    }
