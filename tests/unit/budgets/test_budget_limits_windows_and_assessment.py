"""Budgets as pure rules (gateway.budgets): limits refuse what they cannot hold, naming the
field; windows are UTC days and months; a charge adds to every scope's counters; the totals
read against the limits give warnings past the soft fraction and exhaustion at the limit."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest

from gateway.budgets import (
    BudgetInputError,
    Charge,
    Limits,
    Metric,
    Plan,
    Scope,
    Window,
    assess,
    counter_key,
    parse_limits,
    resets_at,
    window_ids,
)
from gateway.budgets.assess import charge_entries, limited_counters
from gateway.budgets.windows import days_between

NOW = datetime(2026, 11, 29, 15, 30, tzinfo=UTC)
KEY = Scope("key", "k_1")
TEAM = Scope("team", "support")


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ({"spend_per_dya": 1}, "budgets: unknown fields ['spend_per_dya']"),
        ({"spend_per_day": -1}, "budgets.spend_per_day: must be a finite number ≥ 0"),
        ({"spend_per_day": "5"}, "budgets.spend_per_day: expected a number, got str"),
        ({"tokens_per_day": True}, "budgets.tokens_per_day: expected a number, got bool"),
        ({"tokens_per_month": float("nan")}, "budgets.tokens_per_month: must be a finite"),
        ({"minutes_per_day": 1e13}, "budgets.minutes_per_day: at most 1e+12"),
        ({"concurrent_sessions": 1.5}, "budgets.concurrent_sessions: a whole number"),
        ({"soft_limit": 0}, "budgets.soft_limit: a fraction above 0, at most 1"),
        ({"soft_limit": 1.2}, "budgets.soft_limit: a fraction above 0, at most 1"),
        ([1, 2], "budgets: expected an object of limits"),
    ],
)
def test_limits_that_cannot_be_held_are_refused_naming_the_field(raw: Any, names: str) -> None:
    with pytest.raises(BudgetInputError) as refused:
        parse_limits(raw)
    assert str(refused.value).startswith(names)


def test_limits_read_back_and_minutes_are_counted_in_seconds() -> None:
    limits = parse_limits({"spend_per_day": 1.5, "minutes_per_month": 10, "concurrent_sessions": 2})
    assert limits.limit(Metric.SPEND, Window.DAY) == 1.5
    assert limits.limit(Metric.MINUTES, Window.MONTH) == 600
    assert limits.limit(Metric.TOKENS, Window.DAY) is None
    assert limits.concurrent_sessions == 2
    assert limits.soft_limit == 0.8
    assert parse_limits(limits.as_json()) == limits
    assert limits.merged({"spend_per_day": None}).spend_per_day is None
    assert not Limits().any()
    assert limits.any()


def test_windows_are_utc_days_and_months_and_say_when_they_reset() -> None:
    east = NOW.astimezone(timezone(timedelta(hours=10)))  # already the 30th there
    assert window_ids(east).day == "d2026-11-29"
    assert window_ids(east).month == "m2026-11"
    assert resets_at(Window.DAY, NOW) == datetime(2026, 11, 30, tzinfo=UTC)
    assert resets_at(Window.MONTH, NOW) == datetime(2026, 12, 1, tzinfo=UTC)
    december = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert resets_at(Window.MONTH, december) == datetime(2027, 1, 1, tzinfo=UTC)
    assert days_between(date(2026, 11, 29), date(2026, 12, 1)) == [
        "d2026-11-29",
        "d2026-11-30",
        "d2026-12-01",
    ]
    with pytest.raises(ValueError, match="before"):
        days_between(date(2026, 12, 1), date(2026, 11, 1))


def test_a_charge_adds_to_every_scope_each_metric_it_carries_in_both_windows() -> None:
    ids = window_ids(NOW)
    entries = dict(charge_entries([KEY, TEAM], Charge(tokens=120, spend=0.25), ids))
    assert entries == {
        "key:k_1:tokens:d2026-11-29": 120,
        "key:k_1:tokens:m2026-11": 120,
        "key:k_1:spend:d2026-11-29": 0.25,
        "key:k_1:spend:m2026-11": 0.25,
        "team:support:tokens:d2026-11-29": 120,
        "team:support:tokens:m2026-11": 120,
        "team:support:spend:d2026-11-29": 0.25,
        "team:support:spend:m2026-11": 0.25,
    }


def test_totals_past_the_soft_fraction_warn_and_at_the_limit_exhaust() -> None:
    ids = window_ids(NOW)
    plan = Plan(
        (
            (KEY, Limits(spend_per_day=1.0, minutes_per_month=10)),
            (TEAM, Limits(tokens_per_day=1000, soft_limit=0.5)),
            (Scope("user", "alice"), Limits()),
        )
    )
    assert sorted(limited_counters(plan, ids)) == [
        "key:k_1:minutes:m2026-11",
        "key:k_1:spend:d2026-11-29",
        "team:support:tokens:d2026-11-29",
    ]
    calm = assess(plan, {counter_key(KEY, Metric.SPEND, ids.day): 0.79}, ids, NOW)
    assert calm.warnings == ()
    assert calm.exhausted == ()
    totals = {
        counter_key(KEY, Metric.SPEND, ids.day): 0.8,
        counter_key(TEAM, Metric.TOKENS, ids.day): 1000,
        counter_key(KEY, Metric.MINUTES, ids.month): 599,
    }
    result = assess(plan, totals, ids, NOW)
    assert [(r.scope.name, r.metric) for r in result.warnings] == [
        ("key:k_1", Metric.MINUTES),
        ("key:k_1", Metric.SPEND),
    ]
    (exhausted,) = result.exhausted
    assert exhausted.as_json() == {
        "scope": "team",
        "metric": "tokens",
        "window": "day",
        "used": 1000,
        "limit": 1000,
        "resets_at": "2026-11-30T00:00:00Z",
    }
    assert "the team's tokens for today (1000 of 1000; resets 2026-11-30T00:00:00Z)" in (
        exhausted.describe()
    )
    minutes = result.warnings[0].as_json()
    assert minutes["used"] == pytest.approx(9.983333)
    assert minutes["limit"] == 10


def test_a_zero_limit_allows_nothing() -> None:
    ids = window_ids(NOW)
    plan = Plan(((KEY, Limits(tokens_per_day=0)),))
    assert assess(plan, {}, ids, NOW).exhausted[0].limit == 0
