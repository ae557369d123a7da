"""``ConfirmationBook`` on its own: open, look up, take once, expire, remember, restore.

Time is explicit: a ``ManualClock`` moves only when told to.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from gateway.clock import ManualClock
from gateway.orchestrator import (
    ConfirmationBook,
    ConfirmationLookup,
    LookupResult,
    PendingConfirmation,
)
from gateway.toolrun import arguments_hash

TTL = timedelta(seconds=120)


# --------------------------------------------------------------------------------------------
# helpers


def open_one(
    book: ConfirmationBook,
    clock: ManualClock,
    confirmation_id: str,
    *,
    tool_id: str = "calendar_create_event",
    sensitivity: str = "medium",
) -> PendingConfirmation:
    args = {"title": f"event for {confirmation_id}"}
    return book.open(
        confirmation_id=confirmation_id,
        call_id=f"call-{confirmation_id}",
        tool_id=tool_id,
        args=args,
        args_hash=arguments_hash(tool_id, args),
        sensitivity=sensitivity,
        prompt=f"Confirm {tool_id}?",
        now=clock.now(),
    )


def result(found: ConfirmationLookup) -> LookupResult:
    return found.result


def fresh(ttl: timedelta = TTL, closed_memory: int = 512) -> tuple[ConfirmationBook, ManualClock]:
    return ConfirmationBook(ttl, closed_memory=closed_memory), ManualClock()


# --------------------------------------------------------------------------------------------
# open and look up


def test_open_binds_the_call_and_sets_the_expiry() -> None:
    book, clock = fresh()
    pending = open_one(book, clock, "c1")
    assert pending.confirmation_id == "c1"
    assert pending.call_id == "call-c1"
    assert pending.tool_id == "calendar_create_event"
    assert pending.args == {"title": "event for c1"}
    assert pending.args_hash == arguments_hash("calendar_create_event", pending.args)
    assert pending.prompt == "Confirm calendar_create_event?"
    assert pending.expires_at == clock.now() + TTL
    assert len(book) == 1
    assert book.pending() == [pending]


@pytest.mark.parametrize(
    ("sensitivity", "critical"),
    [("low", False), ("medium", False), ("high", False), ("critical", True)],
)
def test_only_critical_sensitivity_is_critical(sensitivity: str, critical: bool) -> None:
    book, clock = fresh()
    assert open_one(book, clock, "c1", sensitivity=sensitivity).critical is critical


def test_lookup_of_an_open_confirmation_leaves_it_open() -> None:
    book, clock = fresh()
    pending = open_one(book, clock, "c1")
    for _ in range(3):
        found = book.lookup("c1", clock.now())
        assert found == ConfirmationLookup(LookupResult.PENDING, pending)
    assert len(book) == 1


def test_lookup_of_an_unknown_id_is_not_found() -> None:
    book, clock = fresh()
    open_one(book, clock, "c1")
    assert book.lookup("nope", clock.now()) == ConfirmationLookup(LookupResult.NOT_FOUND)


def test_lookup_result_values_are_the_wire_words() -> None:
    assert [r.value for r in LookupResult] == ["pending", "not_found", "expired"]


# --------------------------------------------------------------------------------------------
# take: exactly once


def test_take_closes_exactly_once() -> None:
    book, clock = fresh()
    pending = open_one(book, clock, "c1")
    first = book.take("c1", clock.now())
    assert first == ConfirmationLookup(LookupResult.PENDING, pending)
    assert len(book) == 0
    assert book.pending() == []
    assert result(book.take("c1", clock.now())) is LookupResult.NOT_FOUND
    assert result(book.lookup("c1", clock.now())) is LookupResult.NOT_FOUND


def test_take_leaves_the_other_confirmations_open() -> None:
    book, clock = fresh()
    open_one(book, clock, "c1")
    other = open_one(book, clock, "c2")
    book.take("c1", clock.now())
    assert book.pending() == [other]
    assert result(book.lookup("c2", clock.now())) is LookupResult.PENDING


def test_take_of_an_unknown_id_changes_nothing() -> None:
    book, clock = fresh()
    open_one(book, clock, "c1")
    assert result(book.take("nope", clock.now())) is LookupResult.NOT_FOUND
    assert len(book) == 1


def test_take_after_expiry_answers_expired_and_closes() -> None:
    book, clock = fresh()
    pending = open_one(book, clock, "c1")
    clock.advance(TTL.total_seconds())
    assert book.take("c1", clock.now()) == ConfirmationLookup(LookupResult.EXPIRED, pending)
    assert len(book) == 0
    assert book.take("c1", clock.now()) == ConfirmationLookup(LookupResult.EXPIRED)


# --------------------------------------------------------------------------------------------
# expiry


def test_a_confirmation_is_open_until_just_before_its_expiry() -> None:
    book, clock = fresh()
    open_one(book, clock, "c1")
    clock.advance(TTL.total_seconds() - 0.001)
    assert result(book.lookup("c1", clock.now())) is LookupResult.PENDING
    clock.advance(0.001)
    assert result(book.lookup("c1", clock.now())) is LookupResult.EXPIRED


def test_lookup_after_expiry_closes_it_and_remembers_it_expired() -> None:
    book, clock = fresh()
    pending = open_one(book, clock, "c1")
    clock.advance(TTL.total_seconds() + 30)
    assert book.lookup("c1", clock.now()) == ConfirmationLookup(LookupResult.EXPIRED, pending)
    assert len(book) == 0
    # Later answers still say expired (without the pending: it is gone).
    assert book.lookup("c1", clock.now()) == ConfirmationLookup(LookupResult.EXPIRED)
    assert book.expire_due(clock.now()) == []


def test_expire_due_returns_the_due_ones_once() -> None:
    book, clock = fresh()
    early = open_one(book, clock, "early")
    clock.advance(30)
    late = open_one(book, clock, "late")
    clock.advance(TTL.total_seconds() - 30)  # "early" is due exactly now, "late" in 30 s
    assert book.expire_due(clock.now()) == [early]
    assert book.expire_due(clock.now()) == []
    assert book.pending() == [late]
    assert result(book.lookup("early", clock.now())) is LookupResult.EXPIRED
    clock.advance(30)
    assert book.expire_due(clock.now()) == [late]
    assert len(book) == 0
    assert result(book.lookup("late", clock.now())) is LookupResult.EXPIRED


def test_expire_due_returns_every_due_one_in_opening_order() -> None:
    book, clock = fresh()
    opened = [open_one(book, clock, f"c{i}") for i in range(3)]
    clock.advance(TTL.total_seconds() * 2)
    assert book.expire_due(clock.now()) == opened


def test_expire_due_skips_taken_confirmations() -> None:
    book, clock = fresh()
    open_one(book, clock, "taken")
    kept = open_one(book, clock, "kept")
    book.take("taken", clock.now())
    clock.advance(TTL.total_seconds())
    assert book.expire_due(clock.now()) == [kept]
    # The taken one stays "not found" (used), not "expired".
    assert result(book.lookup("taken", clock.now())) is LookupResult.NOT_FOUND


def test_expire_due_before_anything_is_due_is_empty() -> None:
    book, clock = fresh()
    open_one(book, clock, "c1")
    assert book.expire_due(clock.now()) == []
    assert len(book) == 1


def test_next_expiry_is_the_earliest_open_one() -> None:
    book, clock = fresh()
    assert book.next_expiry() is None
    first = open_one(book, clock, "c1")
    clock.advance(10)
    second = open_one(book, clock, "c2")
    assert book.next_expiry() == first.expires_at
    book.take("c1", clock.now())
    assert book.next_expiry() == second.expires_at
    clock.advance(TTL.total_seconds())
    book.expire_due(clock.now())
    assert book.next_expiry() is None


def test_the_ttl_is_the_books() -> None:
    book, clock = fresh(ttl=timedelta(seconds=5))
    pending = open_one(book, clock, "c1")
    assert pending.expires_at == clock.now() + timedelta(seconds=5)
    clock.advance(5)
    assert book.expire_due(clock.now()) == [pending]


# --------------------------------------------------------------------------------------------
# closed memory


def test_closed_memory_is_bounded_oldest_first() -> None:
    book, clock = fresh(closed_memory=2)
    for name in ("a", "b", "c"):
        open_one(book, clock, name)
    clock.advance(TTL.total_seconds())
    assert len(book.expire_due(clock.now())) == 3
    # "a" fell out of the memory: it is merely unknown now; the newer two are still "expired".
    assert result(book.lookup("a", clock.now())) is LookupResult.NOT_FOUND
    assert result(book.lookup("b", clock.now())) is LookupResult.EXPIRED
    assert result(book.lookup("c", clock.now())) is LookupResult.EXPIRED


def test_closed_memory_counts_taken_and_expired_alike() -> None:
    book, clock = fresh(closed_memory=2)
    open_one(book, clock, "expired")
    clock.advance(TTL.total_seconds())
    book.expire_due(clock.now())
    for name in ("t1", "t2"):
        open_one(book, clock, name)
        book.take(name, clock.now())
    assert result(book.lookup("expired", clock.now())) is LookupResult.NOT_FOUND


def test_a_closed_memory_of_zero_forgets_at_once() -> None:
    book, clock = fresh(closed_memory=0)
    open_one(book, clock, "c1")
    clock.advance(TTL.total_seconds())
    assert result(book.lookup("c1", clock.now())) is LookupResult.EXPIRED
    assert result(book.lookup("c1", clock.now())) is LookupResult.NOT_FOUND


def test_open_confirmations_are_never_evicted_by_the_memory_bound() -> None:
    book, clock = fresh(closed_memory=1)
    kept = open_one(book, clock, "kept")
    for i in range(5):
        open_one(book, clock, f"t{i}")
        book.take(f"t{i}", clock.now())
    assert book.pending() == [kept]


# --------------------------------------------------------------------------------------------
# restore


def test_restore_puts_back_a_snapshot() -> None:
    book, clock = fresh()
    first = open_one(book, clock, "c1")
    clock.advance(10)
    second = open_one(book, clock, "c2")
    snapshot = book.pending()

    restored, _ = fresh()
    restored.restore(snapshot)
    assert restored.pending() == [first, second]
    assert restored.next_expiry() == first.expires_at
    assert restored.take("c2", clock.now()) == ConfirmationLookup(LookupResult.PENDING, second)
    assert result(restored.take("c2", clock.now())) is LookupResult.NOT_FOUND


def test_restore_keeps_the_original_expiry() -> None:
    book, clock = fresh()
    pending = open_one(book, clock, "c1")
    clock.advance(TTL.total_seconds())  # due by the time the session resumes

    restored = ConfirmationBook(timedelta(hours=1))
    restored.restore([pending])
    assert restored.next_expiry() == pending.expires_at
    assert restored.expire_due(clock.now()) == [pending]
    assert result(restored.lookup("c1", clock.now())) is LookupResult.EXPIRED


def test_restore_of_nothing_is_a_no_op() -> None:
    book, clock = fresh()
    open_one(book, clock, "c1")
    book.restore([])
    assert len(book) == 1
