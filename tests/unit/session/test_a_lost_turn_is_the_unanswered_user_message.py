"""A session recovered from a node that died: its lost turn is the user's last message when no
reply followed it, whether or not the model had called tools for it (their notes go with it)."""

from __future__ import annotations

from gateway.session.resume import lost_turn_of
from transports.base import ConversationItem

USER = ConversationItem("user", "book it")
CALL = ConversationItem("tool", 'called journal with {"label": "x"}')
REPLY = ConversationItem("assistant", "done")


def test_a_message_with_no_reply_is_lost_with_the_calls_it_led_to() -> None:
    history = (REPLY, USER, CALL)
    assert lost_turn_of(history) == ("book it", (REPLY,))


def test_a_message_alone_is_lost() -> None:
    assert lost_turn_of((REPLY, USER)) == ("book it", (REPLY,))


def test_a_replied_message_is_not_lost() -> None:
    history = (USER, CALL, REPLY)
    assert lost_turn_of(history) == (None, history)
    assert lost_turn_of(()) == (None, ())
