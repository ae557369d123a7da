"""When a session moves to another upstream, the user's last messages that no reply followed are
split off its history (``unanswered_tail``), to be asked again on the new target."""

from __future__ import annotations

from gateway.session.upstream_connect import unanswered_tail
from transports.base import ConversationItem


def user(text: str) -> ConversationItem:
    return ConversationItem("user", text)


def assistant(text: str) -> ConversationItem:
    return ConversationItem("assistant", text)


def tool(text: str) -> ConversationItem:
    return ConversationItem("tool", text)


def test_an_empty_history_has_no_tail() -> None:
    assert unanswered_tail(()) == ((), ())


def test_a_history_that_ends_in_a_reply_has_no_tail() -> None:
    history = (user("hi"), assistant("hello"), user("weather?"), assistant("sunny"))
    assert unanswered_tail(history) == (history, ())


def test_a_history_that_ends_in_a_tool_result_has_no_tail() -> None:
    history = (user("weather?"), tool('{"sky": "clear"}'))
    assert unanswered_tail(history) == (history, ())


def test_the_trailing_user_messages_are_split_off_in_order() -> None:
    answered = (user("hi"), assistant("hello"))
    history = (*answered, user("one"), user("two"), user("three"))
    assert unanswered_tail(history) == (answered, ("one", "two", "three"))


def test_one_trailing_user_message() -> None:
    history = (assistant("hello"), tool("x"), user("again"))
    assert unanswered_tail(history) == ((assistant("hello"), tool("x")), ("again",))


def test_user_messages_before_a_reply_stay() -> None:
    history = (user("a"), user("b"), assistant("ab"), user("c"))
    assert unanswered_tail(history) == ((user("a"), user("b"), assistant("ab")), ("c",))


def test_a_history_of_only_user_messages_is_all_tail() -> None:
    history = (user("a"), user(""), user("c"))
    assert unanswered_tail(history) == ((), ("a", "", "c"))


def test_the_history_kept_is_a_tuple_prefix() -> None:
    history = (assistant("x"), user("y"))
    kept, tail = unanswered_tail(history)
    assert isinstance(kept, tuple)
    assert isinstance(tail, tuple)
    assert kept + tuple(user(t) for t in tail) == history
