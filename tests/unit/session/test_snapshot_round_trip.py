"""A session as plain data and back (gateway.session.snapshot): pure."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.orchestrator import PendingConfirmation
from gateway.session.snapshot import HISTORY_ITEMS, Conversation, Profile, restore, snapshot
from gateway.store import SessionSnapshot
from transports.base import ConversationItem

SETUP = SessionSnapshot(
    provider="openai",
    mode="voice",
    input_rate=16000,
    output_rate=24000,
    enabled_tools=("kb_search", "get_current_time"),
    instructions="Be brief.",
    model="gpt-realtime",
    voice="marin",
    locale="fr-FR",
    tool_dialect=None,
)
PENDING = PendingConfirmation(
    confirmation_id="conf_1",
    call_id="call_1",
    tool_id="calendar_create_event",
    args={"title": "Dentist"},
    args_hash="abc",
    sensitivity="medium",
    prompt="Confirm?",
    expires_at=datetime(2026, 12, 1, tzinfo=UTC),
)


def test_a_live_conversation_round_trips() -> None:
    profile = Profile.of(SETUP)
    conversation = Conversation(confirmation_ttl_s=120)
    conversation.turn.start("book it")
    conversation.turn.retrieval_calls = 2
    conversation.turn.begin_round()
    conversation.book.restore([PENDING])
    conversation.intents.pending_messages.append("remember the umbrella")
    conversation.history.extend(
        [ConversationItem("user", "hi"), ConversationItem("assistant", "hello")]
    )
    profile.mode = "text"  # switched mid-session

    stored = snapshot(profile, conversation)
    assert stored.mode == "text"
    assert stored.enabled_tools == ("get_current_time", "kb_search")  # sorted: stable

    again = Conversation(confirmation_ttl_s=120)
    turn_object = again.turn
    restore(again, stored)
    assert again.turn is turn_object  # restored in place: holders keep their reference
    assert (again.turn.number, again.turn.retrieval_calls, again.turn.rounds) == (1, 2, 1)
    assert again.turn.last_user_text == "book it"
    assert again.book.pending() == [PENDING]
    assert again.intents.pending_messages == ["remember the umbrella"]
    assert list(again.history) == list(conversation.history)
    assert snapshot(Profile.of(stored), again) == stored


def test_history_is_bounded() -> None:
    conversation = Conversation(confirmation_ttl_s=1)
    for n in range(HISTORY_ITEMS + 50):
        conversation.history.append(ConversationItem("user", str(n)))
    assert len(conversation.history) == HISTORY_ITEMS
    assert conversation.history[0].text == "50"


def test_a_fresh_setup_has_an_empty_conversation() -> None:
    conversation = Conversation(confirmation_ttl_s=60)
    restore(conversation, SETUP)
    assert conversation.turn.number == 0
    assert not conversation.book.pending()
    assert not conversation.history
