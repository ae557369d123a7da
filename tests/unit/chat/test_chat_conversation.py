"""Conversation: turns, the token budget (oldest whole turns dropped), pending context."""

from __future__ import annotations

from transports.chat.conversation import Conversation, estimate_tokens


def user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


def tool_round(call_id: str) -> list[dict[str, object]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": '{"ok":true}'},
    ]


def test_messages_start_with_the_instructions_and_keep_turn_order() -> None:
    c = Conversation("be brief", max_tokens=10_000)
    c.begin_turn(user("hi"))
    c.append({"role": "assistant", "content": "hello"})
    c.begin_turn(user("again"))
    assert c.messages() == [
        {"role": "system", "content": "be brief"},
        user("hi"),
        {"role": "assistant", "content": "hello"},
        user("again"),
    ]


def test_system_extra_joins_the_instructions_and_notes_come_last_for_one_request() -> None:
    c = Conversation("be brief", max_tokens=10_000)
    c.begin_turn(user("hi"))
    first = c.messages(["tool help"], ["answer now"])
    assert first[0] == {"role": "system", "content": "be brief\n\ntool help"}
    assert first[-1] == {"role": "system", "content": "answer now"}
    assert c.messages() == [{"role": "system", "content": "be brief"}, user("hi")]


def test_over_budget_drops_oldest_whole_turns_never_the_current_one() -> None:
    c = Conversation("", max_tokens=60)
    c.begin_turn(user("a" * 40))
    c.append(*tool_round("call_1"))
    c.begin_turn(user("b" * 40))
    c.append(*tool_round("call_2"))
    c.begin_turn(user("c" * 400))  # alone over budget: still kept
    messages = c.messages()
    assert messages == [user("c" * 400)]
    assert c.dropped_turns == 2


def test_dropping_never_separates_a_call_from_its_result() -> None:
    c = Conversation("", max_tokens=90)
    for n in range(6):
        c.begin_turn(user(f"question {n}"))
        c.append(*tool_round(f"call_{n}"))
    messages = c.messages()
    calls = [m["tool_calls"][0]["id"] for m in messages if m.get("tool_calls")]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == results
    assert messages[0]["role"] == "user"  # a kept turn starts with its user message
    assert sum(estimate_tokens(m) for m in messages) <= 90
    assert c.dropped_turns > 0


def test_pending_context_opens_the_next_turn_before_the_user_message() -> None:
    c = Conversation("", max_tokens=10_000)
    c.begin_turn(user("one"))
    c.add_context("note")
    c.begin_turn(user("two"))
    assert c.messages() == [user("one"), {"role": "system", "content": "note"}, user("two")]
    assert c.turns[-1][0] == {"role": "system", "content": "note"}  # dropped with its turn


def test_pending_context_joins_the_current_turn_at_the_next_request() -> None:
    c = Conversation("", max_tokens=10_000)
    c.begin_turn(user("one"))
    c.append(*tool_round("call_1"))
    c.add_context("confirmation conf_1 expired")
    messages = c.messages()
    assert messages[-1] == {"role": "system", "content": "confirmation conf_1 expired"}
    assert c.pending == []


def test_replayed_history_becomes_turns_with_tool_activity_as_notes() -> None:
    c = Conversation.replayed(
        "sys",
        10_000,
        [("assistant", "welcome"), ("user", "hi"), ("tool", "t ran"), ("assistant", "done")],
    )
    assert c.messages() == [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": "welcome"},
        user("hi"),
        {"role": "system", "content": "Earlier tool activity: t ran"},
        {"role": "assistant", "content": "done"},
    ]


def test_estimate_counts_content_and_call_arguments() -> None:
    small = estimate_tokens({"role": "user", "content": "x" * 4})
    big = estimate_tokens({"role": "user", "content": "x" * 404})
    assert big - small == 100
    with_call = estimate_tokens(tool_round("call_1")[0])
    assert with_call > estimate_tokens({"role": "assistant", "content": None})
