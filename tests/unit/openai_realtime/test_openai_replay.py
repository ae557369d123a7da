"""ReplayLog: what a new upstream session is given after a reconnect."""

from __future__ import annotations

from transports.openai_realtime.replay import SUMMARY_CHARS, Entry, ReplayLog


def test_a_short_conversation_is_replayed_verbatim() -> None:
    log = ReplayLog(recent_items=10)
    log.add(Entry("user", "hi"))
    log.add(Entry("assistant", "hello"))
    assert log.items() == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}],
        },
    ]


def test_a_long_conversation_starts_with_a_summary_of_the_old_part() -> None:
    log = ReplayLog(recent_items=4)
    for n in range(10):
        log.add(Entry("user", f"question {n}"))
        log.add(Entry("assistant", f"answer {n}"))
    items = log.items()
    assert len(items) == 5
    summary = items[0]
    assert summary["type"] == "message"
    assert summary["role"] == "system"
    text = summary["content"][0]["text"]
    assert "- user: question 0" in text
    assert "- assistant: answer 7" in text
    assert "question 8" not in text  # the recent part is not repeated
    assert items[1]["content"][0]["text"] == "question 8"


def test_the_verbatim_part_reaches_back_to_the_calls_of_its_outputs() -> None:
    log = ReplayLog(recent_items=2)
    log.add(Entry("user", "weather?"))
    log.add(Entry("call", '{"city":"Paris"}', call_id="call_a", name="get_weather"))
    log.add(Entry("output", '{"ok":true}', call_id="call_a"))
    log.add(Entry("assistant", "Sunny."))
    items = log.items()
    assert [i["type"] for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert items[0]["role"] == "system"
    assert "- user: weather?" in items[0]["content"][0]["text"]


def test_an_output_whose_call_is_gone_is_only_summarised() -> None:
    log = ReplayLog(recent_items=4)
    log.add(Entry("output", '{"ok":true}', call_id="call_old"))
    log.add(Entry("assistant", "Done."))
    items = log.items()
    assert [i["type"] for i in items] == ["message", "message"]
    assert "tool result call_old" in items[0]["content"][0]["text"]


def test_a_huge_entry_is_cut() -> None:
    log = ReplayLog()
    entry = log.add(Entry("output", "x" * 100_000, call_id="call_a"))
    assert len(entry.text) < 17_000
    assert entry.text.endswith("…[cut]")


def test_the_summary_is_bounded_and_keeps_the_newest_lines() -> None:
    log = ReplayLog(recent_items=1)
    for n in range(300):
        log.add(Entry("user", f"message {n} " + "x" * 300))
    text = log.items()[0]["content"][0]["text"]
    assert len(text) < SUMMARY_CHARS + 400
    assert "(earlier turns omitted)" in text
    assert "message 298" in text


def test_empty_placeholders_are_not_replayed() -> None:
    log = ReplayLog()
    log.add(Entry("user", item_id="item_1"))  # a user utterance whose transcript never came
    assert log.items() == []
    assert log.find("item_1") is not None
