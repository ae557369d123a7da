"""The in-memory resume store: claim once, only with the right token and user, within the TTL."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any, TypeVar

from gateway.clock import ManualClock
from gateway.orchestrator import PendingConfirmation
from gateway.store import MemoryStore, ResumeRecord, SessionSnapshot, hash_token
from transports.base import ConversationItem

T = TypeVar("T")

PENDING = PendingConfirmation(
    confirmation_id="conf-1",
    call_id="call-1",
    tool_id="calendar_create_event",
    args={"title": "Dentist"},
    args_hash="abc",
    sensitivity="medium",
    prompt="Confirm?",
    expires_at=datetime(2026, 1, 1, 0, 2, tzinfo=UTC),
)
SNAPSHOT = SessionSnapshot(
    provider="local",
    mode="voice",
    input_rate=16000,
    output_rate=24000,
    enabled_tools=None,
    instructions="Be brief.",
    turn_number=3,
    retrieval_calls=2,
    pending_confirmations=(PENDING,),
    pending_messages=("remember the dentist",),
    history=(ConversationItem("user", "hi"), ConversationItem("assistant", "hello")),
)


def record(session_id: str = "sess_1", token: str = "tok", user: str = "alice") -> ResumeRecord:
    return ResumeRecord(session_id, user, hash_token(token), SNAPSHOT)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def test_claim_returns_the_record_once() -> None:
    store = MemoryStore(ManualClock())
    run(store.park(record(), 30))
    claimed = run(store.claim("sess_1", hash_token("tok"), "alice"))
    assert claimed == record()
    assert claimed.snapshot.pending_confirmations == (PENDING,)
    assert run(store.claim("sess_1", hash_token("tok"), "alice")) is None
    assert len(store) == 0


def test_wrong_token_or_user_leaves_the_record_in_place() -> None:
    store = MemoryStore(ManualClock())
    run(store.park(record(), 30))
    assert run(store.claim("sess_1", hash_token("other"), "alice")) is None
    assert run(store.claim("sess_1", hash_token("tok"), "mallory")) is None
    assert run(store.claim("sess_2", hash_token("tok"), "alice")) is None
    assert run(store.claim("sess_1", hash_token("tok"), "alice")) is not None


def test_a_record_expires_after_its_ttl() -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    run(store.park(record(), 30))
    clock.advance(29.9)
    assert len(store) == 1
    clock.advance(0.1)
    assert run(store.claim("sess_1", hash_token("tok"), "alice")) is None
    assert len(store) == 0


def test_park_replaces_and_drop_forgets() -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    run(store.park(record(token="old"), 30))
    run(store.park(record(token="new"), 30))
    assert run(store.claim("sess_1", hash_token("old"), "alice")) is None
    run(store.drop("sess_1", hash_token("old")))  # a stale drop leaves the newer park
    assert len(store) == 1
    run(store.drop("sess_1", hash_token("new")))
    assert run(store.claim("sess_1", hash_token("new"), "alice")) is None
    run(store.drop("never-parked", hash_token("x")))  # no error


def test_tokens_are_kept_hashed() -> None:
    assert hash_token("tok") != "tok"
    assert len(hash_token("tok")) == 64
    assert record().token_hash == hash_token("tok")
