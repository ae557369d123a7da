"""One suite of rules both key and counter stores keep (gateway.governance): SQLite for one
node and Redis for several (a real redis-server). Keys are found by their secret's hash only;
charges are atomic (two nodes charging at once see the sum of both); concurrency slots are all
or none; the usage index names who was charged each day; revocations can be looked up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from redis_kit import RedisServer, unique_prefix

from gateway.budgets import Limits
from gateway.calls.records import CallRecord
from gateway.clock import SystemClock
from gateway.governance import Governance, SqliteGovernance
from gateway.governance.redis import RedisGovernance
from gateway.keys import ApiKey, Team, UserLimits, secret_hash
from gateway.store.redis import RedisStore

DAY = "d2026-11-29"


def a_key(key_id: str = "k_1", secret: str = "gk_secret", **fields: object) -> ApiKey:
    return ApiKey(
        key_id=key_id,
        secret_hash=secret_hash(secret),
        hint="gk_…",
        owner="alice",
        limits=Limits(spend_per_day=2.0),
        created_at=1.0,
        **fields,  # type: ignore[arg-type]
    )


def redis_store(server: RedisServer, prefix: str) -> RedisStore:
    return RedisStore.from_url(server.url, prefix=prefix, timeout_s=1.0, clock=SystemClock())


async def redis_pair(server: RedisServer, prefix: str) -> tuple[RedisGovernance, RedisGovernance]:
    made = [RedisGovernance(redis_store(server, prefix), owns_store=True) for _ in range(2)]
    return made[0], made[1]


async def heartbeat(server: RedisServer, prefix: str, node: str, ttl_s: float) -> None:
    """A node's heartbeat, as its session store writes it (slots of dead nodes do not count)."""
    nodes = redis_store(server, prefix)
    await nodes.heartbeat(node, ttl_s)
    await nodes.close()


@pytest.fixture(params=["sqlite", "redis"])
async def pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Governance, Governance]]:
    """Two handles on one store (two nodes; for SQLite, two connections to one file)."""
    first: Governance
    second: Governance
    if request.param == "sqlite":
        first, second = SqliteGovernance(tmp_path / "g.db"), SqliteGovernance(tmp_path / "g.db")
    else:
        server = request.getfixturevalue("redis_server")
        prefix = unique_prefix()
        await heartbeat(server, prefix, "node-a", 30)
        await heartbeat(server, prefix, "node-b", 30)
        first, second = await redis_pair(server, prefix)
    yield first, second
    await first.close()
    await second.close()


async def test_a_key_is_found_by_its_secrets_hash_and_changes_keep_its_hash(
    pair: tuple[Governance, Governance],
) -> None:
    store, other = pair
    key = a_key(team="support", models=("gpt-realtime",))
    await store.put_key(key)
    assert await other.key_by_hash(secret_hash("gk_secret")) == key
    assert await other.key_by_hash(secret_hash("gk_other")) is None
    assert await other.key("k_1") == key
    assert await other.key("k_9") is None
    await store.put_key(replace(key, revoked_at=5.0, name="old"))
    found = await other.key_by_hash(secret_hash("gk_secret"))
    assert found is not None
    assert found.revoked_at == 5.0
    assert found.name == "old"
    await store.put_key(a_key("k_2", "gk_two"))
    assert [k.key_id for k in await other.keys()] == ["k_1", "k_2"]
    assert await other.revoked_since(4.0) == {"k_1": 5.0}
    assert await other.revoked_since(6.0) == {}


async def test_teams_and_users_limits_are_kept(pair: tuple[Governance, Governance]) -> None:
    store, other = pair
    await store.put_team(Team("support", Limits(tokens_per_day=10), 3.0))
    await store.put_user_limits(UserLimits("alice", Limits(concurrent_sessions=1)))
    assert await other.team("support") == Team("support", Limits(tokens_per_day=10), 3.0)
    assert await other.team("sales") is None
    assert [t.team_id for t in await other.teams()] == ["support"]
    assert await other.user_limits("alice") == UserLimits("alice", Limits(concurrent_sessions=1))
    assert [u.user_id for u in await other.users_with_limits()] == ["alice"]


async def test_charges_from_two_nodes_at_once_add_up_exactly(
    pair: tuple[Governance, Governance],
) -> None:
    store, other = pair
    counter = "key:k_1:spend:" + DAY

    async def charge(on: Governance) -> float:
        totals = await on.charge([(counter, 0.125)], [counter], day=DAY, scopes=["key:k_1"])
        return totals[counter]

    seen = await asyncio.gather(*(charge(store if n % 2 else other) for n in range(40)))
    # each charge saw a distinct total: none read the counter between another's add and read
    assert sorted(seen) == [0.125 * n for n in range(1, 41)]
    assert await store.read([counter, "key:k_1:tokens:" + DAY]) == {
        counter: 5.0,
        "key:k_1:tokens:" + DAY: 0.0,
    }
    assert await other.charged_on(DAY) == {"key:k_1"}
    assert await other.charged_on("d2026-11-30") == set()


async def test_concurrency_slots_are_taken_all_or_none(pair: tuple[Governance, Governance]) -> None:
    store, other = pair
    slots = [("key:k_1", 2), ("team:support", 1)]
    assert await store.acquire_slots("s1", "node-a", slots) is None
    assert await store.acquire_slots("s1", "node-a", slots) is None  # the same session again
    assert await store.acquire_slots("s2", "node-a", slots) == "team:support"
    if isinstance(store, RedisGovernance):  # shared: the other node sees the same
        assert await other.acquire_slots("s2", "node-b", [("key:k_1", 2)]) is None
        assert await other.acquire_slots("s3", "node-b", [("key:k_1", 2)]) == "key:k_1"
        await other.release_slots("s2", ["key:k_1"])
    await store.release_slots("s1", ["key:k_1", "team:support"])
    assert await store.acquire_slots("s2", "node-a", slots) is None


async def test_a_dead_nodes_sessions_free_their_slots(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    store, other = await redis_pair(redis_server, prefix)
    try:
        await heartbeat(redis_server, prefix, "node-a", 0.2)
        assert await store.acquire_slots("s1", "node-a", [("user:bob", 1)]) is None
        assert await other.acquire_slots("s2", "node-b", [("user:bob", 1)]) == "user:bob"
        await asyncio.sleep(0.3)  # node a's heartbeat expires: it died
        assert await other.acquire_slots("s2", "node-b", [("user:bob", 1)]) is None
    finally:
        await store.close()
        await other.close()


async def test_sqlite_keeps_keys_and_counters_across_a_restart(tmp_path: Path) -> None:
    first = SqliteGovernance.in_folder(tmp_path / "data")
    await first.put_key(a_key())
    await first.charge([("user:alice:tokens:" + DAY, 7)], [], day=DAY, scopes=["user:alice"])
    await first.close()
    again = SqliteGovernance.in_folder(tmp_path / "data")
    assert await again.key_by_hash(secret_hash("gk_secret")) == a_key()
    assert await again.read(["user:alice:tokens:" + DAY]) == {"user:alice:tokens:" + DAY: 7.0}
    await again.close()


async def test_a_placed_calls_record_is_found_by_its_id_and_by_the_carriers(
    pair: tuple[Governance, Governance],
) -> None:
    first, second = pair
    queued = CallRecord(
        call_id="call_1", carrier="twilio", to="+14155550100", from_="+14155550199",
        owner="alice", created_at=1_800_000_000.0, key_id="k_1", tools=("get_weather",),
    )  # fmt: skip
    await first.put_call(queued)
    assert await second.call("call_1") == queued
    assert await second.call_by_carrier("twilio", "CA1") is None
    ringing = queued.placed("CA1")
    await first.put_call(ringing)
    assert await second.call_by_carrier("twilio", "CA1") == ringing
    assert await second.call_by_carrier("telnyx", "CA1") is None
    done = ringing.answered(1_800_000_010.0, "human").ended("completed", 1_800_000_040.0)
    await second.put_call(done.with_usage({"input_tokens": 12.0}))
    found = await first.call("call_1")
    assert found is not None
    assert (found.status, found.duration_s, found.usage) == (
        "completed",
        30.0,
        {"input_tokens": 12.0},
    )
    assert await first.call("call_2") is None


async def test_a_stale_view_of_a_call_never_undoes_its_end(
    pair: tuple[Governance, Governance],
) -> None:
    """A session's end written from a view read before the carrier's last callback (two nodes,
    or two coroutines) adds its usage and loses nothing the callback wrote."""
    first, second = pair
    answered = (
        CallRecord(
            call_id="call_9",
            carrier="telnyx",
            to="+14155550100",
            from_="+14155550199",
            owner="alice",
            created_at=1_800_000_000.0,
        )
        .placed("v3:abc")
        .answered(1_800_000_005.0, "human")
    )
    await first.put_call(answered)
    stale = await second.call("call_9")
    assert stale is not None
    await first.put_call(answered.ended("completed", 1_800_000_065.0))
    await second.put_call(stale.with_session("sess_1").with_usage({"audio_in_s": 42.0}))
    kept = await first.call("call_9")
    assert kept is not None
    assert (kept.status, kept.duration_s, kept.session_id) == ("completed", 60.0, "sess_1")
    assert kept.usage == {"audio_in_s": 42.0}
