"""A confirmation whose key the store did not get (one ``OPEN_CONFIRMATION`` unanswered while
the store stays up, so no recovery of the store records it again) is still approved: by its
node, and by the next owner after a move. Run on ``MemoryStore`` and on a real redis-server.

The soak saw it (seed 7): a node busy with a drain's resumes had one ``open_confirmation`` time
out; the client's approval a second later got ``confirmation_not_found`` ("answered already"),
the key's absence read as another node having taken it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis_kit import RedisServer, unique_prefix

from gateway.clock import SystemClock
from gateway.session.ownership import Ownership
from gateway.store import (
    ClaimOutcome,
    MemoryStore,
    SessionRecord,
    SessionSnapshot,
    SessionStore,
    StoreUnavailable,
    hash_token,
)
from gateway.store.redis import RedisStore

SNAPSHOT = SessionSnapshot(
    provider="openai",
    mode="text",
    input_rate=24000,
    output_rate=24000,
    enabled_tools=None,
    instructions="test",
)
TOKEN = hash_token("tok")
HOUR = 3600.0


class MissesOneOpen:
    """The store, but the first ``open_confirmation`` gets no answer (it stays up otherwise)."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.missed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def open_confirmation(
        self, session_id: str, epoch: int, confirmation_id: str, ttl_s: float
    ) -> None:
        if not self.missed:
            self.missed += 1
            raise StoreUnavailable("the shared store did not answer (open_confirmation)")
        await self.inner.open_confirmation(session_id, epoch, confirmation_id, ttl_s)


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


async def owner_with_a_missed_confirmation(store: SessionStore) -> tuple[Ownership, MissesOneOpen]:
    record = SessionRecord("sess_1", "alice", None, TOKEN, "node-a", 1, "live", SNAPSHOT, 0.0)
    await store.register(record, HOUR)
    flaky = MissesOneOpen(store)
    ownership = Ownership(flaky, session_id="sess_1", node="node-a")  # type: ignore[arg-type]
    open_now = {"conf-1"}  # what the session's confirmation book holds open
    ownership.confirmations_of = lambda: [(c, 60.0) for c in sorted(open_now)]
    await ownership.open_confirmation("conf-1", 60.0)
    assert flaky.missed == 1
    return ownership, flaky


async def test_its_node_takes_it_when_the_client_approves(store: SessionStore) -> None:
    ownership, _ = await owner_with_a_missed_confirmation(store)
    assert await ownership.take_confirmation("conf-1") is True
    assert await ownership.take_confirmation("conf-1") is False  # still closed once


async def test_the_snapshot_before_a_move_records_it_for_the_next_owner(
    store: SessionStore,
) -> None:
    ownership, _ = await owner_with_a_missed_confirmation(store)
    assert await ownership.save(SNAPSHOT, parked=True, ttl_s=HOUR) is True  # the move's
    claim = await store.claim("sess_1", TOKEN, "alice", None, node="node-b", window_s=30)
    assert claim.outcome is ClaimOutcome.CLAIMED
    next_owner = Ownership(store, session_id="sess_1", node="node-b", epoch=2)
    assert await next_owner.take_confirmation("conf-1") is True
    assert await next_owner.take_confirmation("conf-1") is False


async def test_one_taken_on_the_old_owner_stays_taken_for_the_next(store: SessionStore) -> None:
    ownership, _ = await owner_with_a_missed_confirmation(store)
    assert await ownership.take_confirmation("conf-1") is True  # approved before the move
    await ownership.save(SNAPSHOT, parked=True, ttl_s=HOUR)
    await store.claim("sess_1", TOKEN, "alice", None, node="node-b", window_s=30)
    next_owner = Ownership(store, session_id="sess_1", node="node-b", epoch=2)
    assert await next_owner.take_confirmation("conf-1") is False
