"""One suite of rules every session store keeps, run on ``MemoryStore`` and on ``RedisStore``
against a real redis-server: records and epochs, claims (parked, busy, forced, recovered),
fencing, tombstones, confirmations taken once, the tool-call ledger, limits, single-use keys,
the bus, and snapshots read back as written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from redis_kit import RedisServer, unique_prefix

from gateway.clock import SystemClock
from gateway.orchestrator import PendingConfirmation
from gateway.store import (
    ClaimOutcome,
    Fenced,
    LedgerState,
    MemoryStore,
    RecordMissing,
    SessionRecord,
    SessionSnapshot,
    SessionStore,
    hash_token,
)
from gateway.store.redis import RedisStore
from transports.base import ConversationItem

PENDING = PendingConfirmation(
    confirmation_id="conf-1",
    call_id="call-1",
    tool_id="calendar_create_event",
    args={"title": "Dentist", "n": 12345678901234567},
    args_hash="abc",
    sensitivity="medium",
    prompt="Confirm?",
    expires_at=datetime(2026, 1, 1, 0, 2, tzinfo=UTC),
)
SNAPSHOT = SessionSnapshot(
    provider="openai",
    mode="voice",
    input_rate=16000,
    output_rate=24000,
    enabled_tools=("kb_search",),
    instructions="Be brief.",
    model="gpt-realtime",
    turn_number=3,
    retrieval_calls=2,
    rounds=1,
    last_user_text="book it",
    pending_confirmations=(PENDING,),
    pending_messages=("remember the dentist",),
    history=(ConversationItem("user", "hi"), ConversationItem("assistant", "héllo ✓")),
)
TOKEN = hash_token("tok")
HOUR = 3600.0


def record(
    session_id: str = "sess_1", owner: str = "node-a", tenant: str | None = None
) -> SessionRecord:
    return SessionRecord(session_id, "alice", tenant, TOKEN, owner, 1, "live", SNAPSHOT, 0.0)


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        memory = MemoryStore(SystemClock())
        yield memory
        await memory.close()
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    shared = RedisStore.from_url(
        server.url, prefix=unique_prefix(), timeout_s=1.0, clock=SystemClock()
    )
    yield shared
    await shared.close()


async def claim(
    store: SessionStore,
    node: str,
    *,
    token: str = TOKEN,
    force: bool = False,
    user: str = "alice",
    tenant: str | None = None,
) -> object:
    return await store.claim("sess_1", token, user, tenant, node=node, window_s=30, force=force)


async def test_a_parked_session_is_claimed_once_at_a_new_epoch(store: SessionStore) -> None:
    await store.register(record(), HOUR)
    await store.save("sess_1", 1, SNAPSHOT, parked=True, ttl_s=HOUR)
    got = await store.claim("sess_1", TOKEN, "alice", None, node="node-b", window_s=30)
    assert got.outcome is ClaimOutcome.CLAIMED
    assert got.record is not None
    assert (got.record.owner, got.record.epoch, got.previous_owner) == ("node-b", 2, "node-a")
    assert got.record.snapshot == SNAPSHOT  # read back exactly, numbers and text included
    assert not got.recovered
    assert await store.owner("sess_1") == ("node-b", 2)
    # The old owner is fenced from now on.
    with pytest.raises(Fenced):
        await store.save("sess_1", 1, SNAPSHOT, ttl_s=HOUR)
    await store.save("sess_1", 2, SNAPSHOT, ttl_s=HOUR)


async def test_wrong_token_user_or_tenant_finds_nothing(store: SessionStore) -> None:
    await store.register(record(tenant="t1"), HOUR)
    await store.save("sess_1", 1, SNAPSHOT, parked=True, ttl_s=HOUR)
    for token, user, tenant in (
        (hash_token("other"), "alice", "t1"),
        (TOKEN, "mallory", "t1"),
        (TOKEN, "alice", "t2"),
        (TOKEN, "alice", None),
    ):
        got = await store.claim("sess_1", token, user, tenant, node="node-b", window_s=30)
        assert got.outcome is ClaimOutcome.NOT_FOUND
    assert (
        await store.claim("sess_1", TOKEN, "alice", "t1", node="node-b", window_s=30)
    ).outcome is ClaimOutcome.CLAIMED


async def test_a_live_session_of_a_live_node_is_busy_unless_forced(store: SessionStore) -> None:
    await store.heartbeat("node-a", 30)
    await store.register(record(), HOUR)
    busy = await store.claim("sess_1", TOKEN, "alice", None, node="node-b", window_s=30)
    assert (busy.outcome, busy.previous_owner) == (ClaimOutcome.BUSY, "node-a")
    forced = await store.claim(
        "sess_1", TOKEN, "alice", None, node="node-b", window_s=30, force=True
    )
    assert forced.outcome is ClaimOutcome.CLAIMED
    assert not forced.recovered


async def test_a_live_session_of_a_dead_node_is_recovered(store: SessionStore) -> None:
    # node-a never sent a heartbeat (or it expired): it is dead.
    await store.register(replace(record(), saved_at=SystemClock().now().timestamp()), HOUR)
    got = await store.claim("sess_1", TOKEN, "alice", None, node="node-b", window_s=30)
    assert got.outcome is ClaimOutcome.CLAIMED
    assert got.recovered
    # Too late: the window counts from the last sign of life of the old owner.
    await store.register(replace(record("sess_2"), saved_at=1.0), HOUR)
    late = await store.claim("sess_2", TOKEN, "alice", None, node="node-b", window_s=30)
    assert late.outcome is ClaimOutcome.NOT_FOUND


async def test_an_ended_session_leaves_a_tombstone(store: SessionStore) -> None:
    await store.register(record(), HOUR)
    await store.end("sess_1", 2)  # not the owner's epoch: nothing happens
    assert await store.owner("sess_1") == ("node-a", 1)
    await store.end("sess_1", 1)
    assert await store.owner("sess_1") == ("", 0)
    assert (await claim(store, "node-b")).outcome is ClaimOutcome.NOT_FOUND
    assert not await store.register(record(), HOUR, only_if_absent=True)
    with pytest.raises(Fenced):
        await store.ledger_start("sess_1", 1, "node-a", [("c1", "t")])


async def test_a_lost_record_is_missing_and_can_be_asserted_again(store: SessionStore) -> None:
    assert await store.owner("sess_9") is None
    with pytest.raises(RecordMissing):
        await store.save("sess_9", 1, SNAPSHOT, ttl_s=HOUR)
    with pytest.raises(RecordMissing):
        await store.ledger_start("sess_9", 1, "node-a", [("c1", "t")])
    assert await store.register(record("sess_9"), HOUR, only_if_absent=True)
    assert not await store.register(record("sess_9"), HOUR, only_if_absent=True)
    await store.save("sess_9", 1, SNAPSHOT, ttl_s=HOUR)


async def test_a_confirmation_is_taken_once_by_its_owner(store: SessionStore) -> None:
    await store.register(record(), HOUR)
    await store.open_confirmation("sess_1", 1, "conf-1", 60)
    with pytest.raises(Fenced):
        await store.take_confirmation("sess_1", 7, "conf-1")
    assert await store.take_confirmation("sess_1", 1, "conf-1")
    assert not await store.take_confirmation("sess_1", 1, "conf-1")
    assert not await store.take_confirmation("sess_1", 1, "never-opened")


async def test_the_ledger_runs_a_call_once_and_delivers_it_once(store: SessionStore) -> None:
    await store.register(record(), HOUR)
    first = await store.ledger_start("sess_1", 1, "node-a", [("c1", "kb_search"), ("c2", "echo")])
    assert first == {"c1": None, "c2": None}
    again = await store.ledger_start("sess_1", 1, "node-a", [("c1", "kb_search"), ("c3", "x")])
    assert again["c3"] is None
    known = again["c1"]
    assert known is not None
    assert (known.tool_id, known.state, known.node, known.epoch) == (
        "kb_search",
        LedgerState.STARTED,
        "node-a",
        1,
    )
    envelope = {"ok": True, "data": {"n": 12345678901234567, "x": 1.5}, "meta": {"durationMs": 3.5}}
    assert await store.ledger_finish("sess_1", "c1", envelope) == "node-a"
    assert await store.ledger_deliver("sess_1", 1, ["c1"]) == {"c1"}
    assert await store.ledger_deliver("sess_1", 1, ["c1"]) == set()  # once
    open_calls = {e.call_id: e for e in await store.ledger_open("sess_1")}
    assert set(open_calls) == {"c2", "c3"}
    await store.ledger_finish("sess_1", "c2", {"ok": False, "error": {"type": "TIMEOUT"}})
    finished = {e.call_id: e for e in await store.ledger_open("sess_1")}["c2"]
    assert finished.state is LedgerState.FINISHED
    assert finished.envelope == {"ok": False, "error": {"type": "TIMEOUT"}}


async def test_a_result_the_store_lost_track_of_still_reaches_the_model_once(
    store: SessionStore,
) -> None:
    """An emptied store (Redis restarted without persistence) forgot a running call, or its
    finish could not be written while the store was down: the owner, who holds the result,
    still records and delivers it, once."""
    await store.register(record(), HOUR)
    assert await store.ledger_finish("sess_1", "lost", {"ok": True}) == "node-a"
    assert await store.ledger_deliver("sess_1", 1, ["lost"]) == {"lost"}
    await store.ledger_start("sess_1", 1, "node-a", [("unfinished", "x")])
    assert await store.ledger_deliver("sess_1", 1, ["unfinished", "never-seen"]) == {
        "unfinished",
        "never-seen",
    }
    assert await store.ledger_deliver("sess_1", 1, ["lost", "unfinished", "never-seen"]) == set()
    assert await store.ledger_open("sess_1") == []


async def test_the_ledger_follows_the_owner(store: SessionStore) -> None:
    await store.register(record(), HOUR)
    await store.ledger_start("sess_1", 1, "node-a", [("c1", "slow")])
    await store.save("sess_1", 1, SNAPSHOT, parked=True, ttl_s=HOUR)
    assert (await claim(store, "node-b")).outcome is ClaimOutcome.CLAIMED
    # node-a's call finishes after the move: the result is recorded, node-b is told...
    assert await store.ledger_finish("sess_1", "c1", {"ok": True}) == "node-b"
    # ...and only node-b may deliver it.
    with pytest.raises(Fenced):
        await store.ledger_deliver("sess_1", 1, ["c1"])
    assert await store.ledger_deliver("sess_1", 2, ["c1"]) == {"c1"}
    with pytest.raises(Fenced):
        await store.ledger_start("sess_1", 1, "node-a", [("c2", "x")])


async def test_the_rate_is_per_address_per_minute(store: SessionStore) -> None:
    admitted = [await store.admit_address("1.2.3.4", 3, 1000.0 + n) for n in range(4)]
    assert admitted == [True, True, True, False]
    assert await store.admit_address("5.6.7.8", 3, 1003.0)
    assert not await store.admit_address("1.2.3.4", 3, 1059.9)
    assert await store.admit_address("1.2.3.4", 3, 1060.0)


async def test_sessions_per_user_are_capped(store: SessionStore) -> None:
    await store.heartbeat("node-a", 30)
    assert await store.acquire_user_slot("bob", "s1", "node-a", 2)
    assert await store.acquire_user_slot("bob", "s2", "node-a", 2)
    assert not await store.acquire_user_slot("bob", "s3", "node-a", 2)
    assert await store.acquire_user_slot("bob", "s2", "node-a", 2)  # itself: no new slot
    await store.release_user_slot("bob", "s1")
    assert await store.acquire_user_slot("bob", "s3", "node-a", 2)
    assert await store.acquire_user_slot("carol", "s9", "node-a", 1)


async def test_a_kept_slot_counts_on_its_new_node(store: SessionStore) -> None:
    """A session resumed on node-b: its slot names node-b, so node-a's death does not free it."""
    await store.heartbeat("node-b", 30)
    assert await store.acquire_user_slot("bob", "s1", "node-a", 1)  # node-a: not alive
    await store.keep_user_slot("bob", "s1", "node-b")
    assert not await store.acquire_user_slot("bob", "s2", "node-b", 1)
    await store.release_user_slot("bob", "s1")
    assert await store.acquire_user_slot("bob", "s2", "node-b", 1)


async def test_a_key_is_claimed_once(store: SessionStore) -> None:
    assert await store.claim_once("stream-token:abc", 60)
    assert not await store.claim_once("stream-token:abc", 60)
    assert await store.claim_once("stream-token:def", 60)


async def test_the_bus_carries_messages_to_one_node(store: SessionStore) -> None:
    received: list[dict[str, object]] = []
    ready = asyncio.Event()

    async def listen() -> None:
        async for message in store.messages("node-b"):
            received.append(message)
            ready.set()
            return

    listener = asyncio.create_task(listen())
    for _ in range(100):  # subscribed? (a message before the subscription is lost, as in Redis)
        await store.publish("node-b", {"type": "ping"})
        try:
            await asyncio.wait_for(ready.wait(), 0.05)
            break
        except TimeoutError:
            continue
    await asyncio.wait_for(listener, 2)
    assert received[0] == {"type": "ping"}


async def test_nodes_silent_for_a_day_leave_the_nodes_hash(redis_server: RedisServer) -> None:
    import redis.asyncio as redis

    from gateway.clock import ManualClock

    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    prefix = unique_prefix()
    store = RedisStore.from_url(redis_server.url, prefix=prefix, timeout_s=1.0, clock=clock)
    reader = redis.Redis(port=redis_server.port, decode_responses=True)
    try:
        await store.heartbeat("old", 10)
        clock.advance(3600)
        await store.heartbeat("recent", 10)
        clock.advance(86400 - 1800)
        await store.heartbeat("now", 10)
        assert set(await reader.hkeys(f"{prefix}:nodes")) == {"recent", "now"}
    finally:
        await reader.aclose()
        await store.close()
