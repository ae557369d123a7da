"""The memory store forgets each record, confirmation and one-time key at its own expiry, on
an injected clock, though it only sweeps once the earliest expiry it knows of is due."""

from __future__ import annotations

from test_store_rules import SNAPSHOT, record

from gateway.clock import ManualClock
from gateway.store import MemoryStore


async def test_each_entry_expires_at_its_own_time_and_a_renewal_moves_it() -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    await store.register(record("sess_1"), 10)
    await store.register(record("sess_2"), 30)
    await store.open_confirmation("sess_2", 1, "conf", 5)
    assert await store.claim_once("key", 1)

    clock.advance(1)  # the key's time: free again (and now held until t = 101)
    assert await store.claim_once("key", 100)
    assert len(store) == 2

    clock.advance(4)  # t = 5: the confirmation's time
    assert not await store.take_confirmation("sess_2", 1, "conf")
    await store.save("sess_1", 1, SNAPSHOT, ttl_s=20)  # renewed: until t = 25

    clock.advance(6)  # t = 11, past the first expiry sess_1 had
    assert await store.owner("sess_1") == ("node-a", 1)
    clock.advance(14.5)  # t = 25.5
    assert await store.owner("sess_1") is None
    assert await store.owner("sess_2") == ("node-a", 1)
    assert not await store.claim_once("key", 1)
    assert len(store) == 1


async def test_an_earlier_expiry_added_later_is_not_missed() -> None:
    clock = ManualClock()
    store = MemoryStore(clock)
    await store.register(record("sess_1"), 60)
    assert await store.claim_once("late", 60)
    assert await store.claim_once("soon", 2)  # earlier than anything known before it
    clock.advance(2)
    assert await store.claim_once("soon", 2)
    assert not await store.claim_once("late", 60)
