"""The breaker of upstream targets keeps one contract on one node (``MemoryTargetHealth``) and
shared by several through a real redis-server (``RedisTargetHealth``), driven by a clock the
test moves: the same sequence gets the same answers from both. Then what only sharing shows:
two nodes (two clients) see one breaker, their probes are counted together, and a Redis that
cannot be reached lets every call through without raising."""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as redis
from redis_kit import RedisServer, unique_prefix
from structlog.testing import capture_logs

from gateway.clock import ManualClock
from gateway.routing import (
    Admission,
    AdmissionKind,
    BreakerPhase,
    BreakerPolicy,
    MemoryTargetHealth,
    TargetHealth,
)
from gateway.routing.health_redis import RedisTargetHealth
from gateway.store import StoreUnavailable
from soak.redis_server import free_port

POLICY = BreakerPolicy(failures=3, window_s=30.0, cooldown_s=30.0, half_open_probes=2)
ALLOWED = Admission(AdmissionKind.ALLOWED)
PROBE = Admission(AdmissionKind.PROBE)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def clients(redis_server: RedisServer) -> AsyncIterator[list[redis.Redis]]:
    """Two connections to the one server: two nodes' clients."""
    made = [redis.Redis.from_url(redis_server.url) for _ in range(2)]
    yield made
    for client in made:
        await client.aclose()


@pytest.fixture(params=["memory", "redis"])
async def health(request: pytest.FixtureRequest, clock: ManualClock) -> AsyncIterator[TargetHealth]:
    if request.param == "memory":
        yield MemoryTargetHealth(POLICY, clock)
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    client = redis.Redis.from_url(server.url)
    yield RedisTargetHealth(client, POLICY, clock, unique_prefix())
    await client.aclose()


async def admits(health: TargetHealth, target: str, times: int) -> list[Admission]:
    return [await health.admit(target) for _ in range(times)]


# -- one contract, both implementations --------------------------------------------------------


async def test_failures_open_a_target_and_only_that_one(
    health: TargetHealth, clock: ManualClock
) -> None:
    assert await health.states() == {}
    for _ in range(2):
        await health.failure("openai", "connect refused")
        clock.advance(5)
    assert await health.admit("openai") == ALLOWED
    view = (await health.states())["openai"]
    assert (view.phase, view.recent_failures, view.open_until) == (BreakerPhase.CLOSED, 2, None)

    await health.failure("openai", "connect refused")
    assert await health.admit("openai") == Admission.refused(30.0)
    clock.advance(12.5)
    assert await health.admit("openai") == Admission.refused(17.5)
    assert await health.admit("gemini") == ALLOWED
    states = await health.states()
    assert list(states) == ["openai"]
    assert (states["openai"].phase, states["openai"].retry_after_s) == (BreakerPhase.OPEN, 17.5)


async def test_failures_leave_the_window_and_a_success_while_closed_keeps_them(
    health: TargetHealth, clock: ManualClock
) -> None:
    await health.failure("openai", "timeout")
    clock.advance(20)
    await health.failure("openai", "timeout")
    await health.success("openai")  # does not wipe them: flapping must still open it
    clock.advance(10)  # the first failure is now exactly window_s old: out
    await health.failure("openai", "timeout")
    assert await health.admit("openai") == ALLOWED
    assert (await health.states())["openai"].recent_failures == 2
    clock.advance(1)
    await health.failure("openai", "timeout")
    assert not (await health.admit("openai")).allowed


async def test_half_open_probes_then_a_success_closes(
    health: TargetHealth, clock: ManualClock
) -> None:
    for _ in range(3):
        await health.failure("openai", "5xx")
    await health.success("openai")  # a session from before it opened: ignored
    clock.advance(30)
    assert await admits(health, "openai", 3) == [PROBE, PROBE, Admission.refused(30.0)]
    view = (await health.states())["openai"]
    assert (view.phase, view.probes_taken) == (BreakerPhase.HALF_OPEN, 2)
    clock.advance(1)
    await health.success("openai")
    assert await admits(health, "openai", 3) == [ALLOWED] * 3
    assert await health.states() == {}


async def test_a_failed_probe_reopens_and_silent_probes_are_replaced(
    health: TargetHealth, clock: ManualClock
) -> None:
    for _ in range(3):
        await health.failure("openai", "5xx")
    clock.advance(30)
    assert await health.admit("openai") == PROBE
    await health.failure("openai", "probe failed")
    assert await health.admit("openai") == Admission.refused(30.0)
    clock.advance(30)
    assert await admits(health, "openai", 3) == [PROBE, PROBE, Admission.refused(30.0)]
    clock.advance(29.5)
    assert await health.admit("openai") == Admission.refused(0.5)
    clock.advance(0.5)  # no verdict for a cool-down: their node died, fresh probes
    assert await admits(health, "openai", 3) == [PROBE, PROBE, Admission.refused(30.0)]


async def test_an_idle_record_lapses(health: TargetHealth, clock: ManualClock) -> None:
    for _ in range(3):
        await health.failure("openai", "5xx")
    clock.advance(POLICY.forget_after_s - 0.25)
    assert (await health.states())["openai"].phase is BreakerPhase.HALF_OPEN
    clock.advance(0.25)
    assert await health.states() == {}
    assert await admits(health, "openai", 3) == [ALLOWED] * 3


@pytest.mark.parametrize("seed", range(12))
async def test_random_sequences_get_the_same_answers_from_memory_and_redis(
    clients: list[redis.Redis], seed: int
) -> None:
    rng = random.Random(seed)
    policy = BreakerPolicy(
        failures=rng.randint(1, 3),
        window_s=rng.choice([2.0, 10.0]),
        cooldown_s=rng.choice([1.5, 5.0]),
        half_open_probes=rng.randint(1, 3),
    )
    clock = ManualClock()
    memory = MemoryTargetHealth(policy, clock)
    shared = RedisTargetHealth(clients[0], policy, clock, unique_prefix())
    for step in range(150):
        target = rng.choice(["a", "b"])
        op = rng.choice(["admit", "admit", "failure", "success"])
        if op == "admit":
            assert await memory.admit(target) == await shared.admit(target), step
        elif op == "failure":
            await memory.failure(target, "x")
            await shared.failure(target, "x")
        else:
            await memory.success(target)
            await shared.success(target)
        assert await memory.states() == await shared.states(), step
        clock.advance(rng.choice([0.0, 0.3, 1.0, 1.5, 2.0, 5.0, 7.0, 30.0]))


# -- shared by several nodes -------------------------------------------------------------------


@pytest.fixture
def nodes(clients: list[redis.Redis], clock: ManualClock) -> list[RedisTargetHealth]:
    prefix = unique_prefix()
    return [RedisTargetHealth(client, POLICY, clock, prefix) for client in clients]


async def test_two_nodes_share_one_breaker(
    nodes: list[RedisTargetHealth], clock: ManualClock
) -> None:
    a, b = nodes
    for _ in range(3):
        await a.failure("openai", "connect refused")
    assert await b.admit("openai") == Admission.refused(30.0)
    assert await b.admit("gemini") == ALLOWED

    clock.advance(30)
    # After the cool-down both nodes ask at once: two probes in all, however they interleave.
    answers = await asyncio.gather(*(node.admit("openai") for node in (a, b) * 5))
    assert sum(answer.probe for answer in answers) == POLICY.half_open_probes
    assert sum(answer.allowed for answer in answers) == POLICY.half_open_probes

    await b.success("openai")
    assert await admits(a, "openai", 3) == [ALLOWED] * 3
    assert await a.states() == await b.states() == {}


async def test_a_probe_failing_on_one_node_reopens_it_for_the_other(
    nodes: list[RedisTargetHealth], clock: ManualClock
) -> None:
    a, b = nodes
    await a.failure("openai", "5xx")
    await b.failure("openai", "5xx")
    assert await a.admit("openai") == ALLOWED
    await a.failure("openai", "5xx")  # the third, counted across nodes
    clock.advance(30)
    assert await a.admit("openai") == PROBE
    await a.failure("openai", "probe failed")
    assert await b.admit("openai") == Admission.refused(30.0)
    assert (await b.states())["openai"].phase is BreakerPhase.OPEN


# -- a Redis that cannot be reached ------------------------------------------------------------


@pytest.fixture
async def unreachable() -> AsyncIterator[redis.Redis]:
    """A client of a port nobody listens on."""
    client = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.2)
    yield client
    await client.aclose()


async def test_an_unreachable_redis_admits_every_session_and_raises_nothing(
    unreachable: redis.Redis, clock: ManualClock
) -> None:
    errors: list[str] = []
    health = RedisTargetHealth(unreachable, POLICY, clock, unique_prefix(), on_error=errors.append)
    started = time.monotonic()
    with capture_logs() as logs:
        for _ in range(5):
            await health.failure("openai", "connect refused")
        assert await admits(health, "openai", 3) == [ALLOWED] * 3
        await health.success("openai")
    # Redis was asked once: the outage's back-off let the others through at once.
    assert errors == ["breaker_failure"]
    assert time.monotonic() - started < 1.5
    events = [line["event"] for line in logs]
    assert events.count("breaker_store_unreachable") == 1  # one line per outage
    assert events.count("breaker_failure_dropped") == 5  # each dropped failure said
    with pytest.raises(StoreUnavailable):
        await health.states()  # the admin API says the store is down

    clock.advance(1.0)  # the back-off is over: Redis is asked again
    assert await health.admit("openai") == ALLOWED
    assert errors == ["breaker_failure", "breaker_admit"]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a Redis behind a dead link)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


async def test_a_redis_that_never_answers_is_given_up_on_within_the_timeout(
    silent_port: int, clock: ManualClock
) -> None:
    client = redis.Redis(host="127.0.0.1", port=silent_port)
    health = RedisTargetHealth(client, POLICY, clock, unique_prefix(), timeout_s=0.2)
    try:
        started = time.monotonic()
        assert await health.admit("openai") == ALLOWED
        await health.failure("openai", "timeout")
        assert time.monotonic() - started < 1.5
    finally:
        await client.aclose()
