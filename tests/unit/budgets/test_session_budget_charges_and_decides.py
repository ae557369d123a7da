"""One session's budget (gateway.budgets.guard) against a real counter store (SQLite in memory)
and a clock the test moves: responses and the session's clock are charged, each limit warns
once and then exhausts once, a turn on a spent budget does not start, time is charged only with
a client attached, and a charge the store refused is sent again with the next."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from gateway.budgets import Limits, Plan, Reading, Scope
from gateway.budgets.guard import CLOCK_CHARGE_S, SessionBudget
from gateway.clock import ManualClock
from gateway.governance import SqliteGovernance
from gateway.store import StoreUnavailable

KEY = Scope("key", "k_1")
DAY = "d2026-11-29"


class Port:
    def __init__(self) -> None:
        self.said: list[tuple[str, str, str]] = []

    def budget_warning(self, reading: Reading) -> None:
        self.said.append(("warning", reading.scope.kind, reading.metric.value))

    async def budget_exhausted(self, reading: Reading) -> None:
        self.said.append(("exhausted", reading.scope.kind, reading.metric.value))


class Flaky(SqliteGovernance):
    """The store, down while ``down`` is set."""

    down = False

    async def charge(
        self,
        entries: Sequence[tuple[str, float]],
        read: Sequence[str],
        *,
        day: str,
        scopes: Sequence[str],
    ) -> dict[str, float]:
        if self.down:
            raise StoreUnavailable("down")
        return await super().charge(entries, read, day=day, scopes=scopes)


def budget(
    limits: Limits, store: SqliteGovernance, clock: ManualClock
) -> tuple[SessionBudget, Port]:
    port = Port()
    plan = Plan(((KEY, limits), (Scope("user", "alice"), Limits())))
    return SessionBudget(plan, store, clock, port, session_id="s1"), port


async def test_responses_warn_once_then_exhaust_once_and_the_next_turn_does_not_start() -> None:
    clock = ManualClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    store = SqliteGovernance(":memory:")
    guard, port = budget(Limits(tokens_per_day=1000), store, clock)
    assert await guard.turn_may_start()
    guard.response_charged(500, 0.01, "openai/gpt-realtime")
    assert await guard.turn_may_start()
    assert port.said == []
    guard.response_charged(350, 0.01, "openai/gpt-realtime")  # 850: past 80 %
    assert await guard.turn_may_start()
    guard.response_charged(100, None, "openai/gpt-realtime")  # 950: warned already
    assert await guard.turn_may_start()
    assert port.said == [("warning", "key", "tokens")]
    guard.response_charged(100, None, "openai/gpt-realtime")  # 1050: exhausted
    assert not await guard.turn_may_start()
    await guard.settle()
    assert port.said == [("warning", "key", "tokens"), ("exhausted", "key", "tokens")]
    totals = await store.read([f"key:k_1:tokens:{DAY}", "model:openai/gpt-realtime:spend:" + DAY])
    assert totals == {f"key:k_1:tokens:{DAY}": 1050, f"model:openai/gpt-realtime:spend:{DAY}": 0.02}
    assert await store.charged_on(DAY) == {"key:k_1", "user:alice", "model:openai/gpt-realtime"}


async def test_a_limit_spent_by_another_session_is_met_at_the_next_turn() -> None:
    clock = ManualClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    store = SqliteGovernance(":memory:")
    guard, port = budget(Limits(spend_per_day=1.0), store, clock)
    other, _ = budget(Limits(spend_per_day=1.0), store, clock)
    other.response_charged(10, 1.5, "openai/gpt-realtime")
    await other.settle()
    assert not await guard.turn_may_start()
    assert port.said == [("warning", "key", "spend"), ("exhausted", "key", "spend")]


async def test_the_clock_charges_attached_time_every_five_seconds() -> None:
    clock = ManualClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    store = SqliteGovernance(":memory:")
    guard, port = budget(Limits(minutes_per_day=1), store, clock)
    counter = f"key:k_1:minutes:{DAY}"
    guard.tick(attached=True)
    for _ in range(4):
        clock.advance(1.0)
        guard.tick(attached=True)
    await guard.charged()
    assert (await store.read([counter]))[counter] == 0  # 4 s: not charged yet
    clock.advance(1.0)
    guard.tick(attached=True)
    await guard.charged()
    assert (await store.read([counter]))[counter] == CLOCK_CHARGE_S
    guard.tick(attached=False)  # parked: its time is not counted
    clock.advance(100.0)
    guard.tick(attached=False)
    guard.tick(attached=True)
    clock.advance(2.0)
    await guard.settle()  # the end charges what is left
    assert (await store.read([counter]))[counter] == CLOCK_CHARGE_S + 2.0
    assert port.said == []


async def test_a_charge_the_store_refused_is_sent_with_the_next() -> None:
    clock = ManualClock(datetime(2026, 11, 29, 12, tzinfo=UTC))
    store = Flaky(":memory:")
    guard, _ = budget(Limits(tokens_per_day=10_000), store, clock)
    store.down = True
    guard.response_charged(300, None, "openai/gpt-realtime")
    assert await guard.turn_may_start()  # the store is down: the turn goes on
    store.down = False
    guard.response_charged(200, None, "openai/gpt-realtime")
    await guard.settle()
    counter = f"key:k_1:tokens:{DAY}"
    assert (await store.read([counter]))[counter] == 500
