"""A session's budgets: which counters a charge adds to, and what the totals mean. Pure.

A session answers to up to three scopes (its key, its user, its team), each with its own
limits (``Plan``). A charge (``Charge``: tokens, spend, seconds) adds to every counter of every
scope of the session, and of its model (for the usage report), in the day's and the month's
window; ``assess`` reads the totals against the limits: past the soft fraction a warning, at
the limit exhausted. Counters are named ``{scope}:{metric}:{window}``
(``key:k_1a2b:spend:d2026-11-29``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.budgets.limits import Limits, Metric, Scope, Window
from gateway.budgets.windows import WindowIds, resets_at

__all__ = [
    "Assessment",
    "Charge",
    "Plan",
    "Reading",
    "assess",
    "charge_entries",
    "counter_key",
    "limited_counters",
]


def counter_key(scope: Scope, metric: Metric, window_id: str) -> str:
    return f"{scope.name}:{metric.value}:{window_id}"


@dataclass(frozen=True, slots=True)
class Charge:
    tokens: float = 0.0
    spend: float = 0.0
    seconds: float = 0.0

    def amount(self, metric: Metric) -> float:
        if metric is Metric.TOKENS:
            return self.tokens
        if metric is Metric.SPEND:
            return self.spend
        return self.seconds

    def __add__(self, other: Charge) -> Charge:
        return Charge(
            self.tokens + other.tokens, self.spend + other.spend, self.seconds + other.seconds
        )

    def empty(self) -> bool:
        return not (self.tokens or self.spend or self.seconds)


@dataclass(frozen=True, slots=True)
class Plan:
    """The scopes a session answers to, each with its limits (a scope without limits is still
    counted: the usage report reads it)."""

    scopes: tuple[tuple[Scope, Limits], ...]

    def concurrent(self) -> list[tuple[Scope, int]]:
        return [
            (scope, limits.concurrent_sessions)
            for scope, limits in self.scopes
            if limits.concurrent_sessions is not None
        ]

    def limited(self) -> bool:
        return any(limits.any() for _, limits in self.scopes)

    def names(self) -> set[str]:
        return {scope.name for scope, _ in self.scopes}


@dataclass(frozen=True, slots=True)
class Reading:
    """One limit as the counters stand: ``used`` of ``limit`` (minutes in seconds)."""

    scope: Scope
    metric: Metric
    window: Window
    used: float
    limit: float
    resets_at: datetime

    @property
    def topic(self) -> tuple[str, str, str]:
        """What a warning is about (a session is warned of each once)."""
        return (self.scope.name, self.metric.value, self.window.value)

    def as_json(self) -> dict[str, Any]:
        minutes = self.metric is Metric.MINUTES
        return {
            "scope": self.scope.kind,
            "metric": self.metric.value,
            "window": self.window.value,
            "used": round(self.used / 60 if minutes else self.used, 6),
            "limit": round(self.limit / 60 if minutes else self.limit, 6),
            "resets_at": self.resets_at.isoformat().replace("+00:00", "Z"),
        }

    def describe(self) -> str:
        """For people: ``the key's spend for today (1.52 of 1.5; resets 2026-11-30T00:00:00Z)``."""
        j = self.as_json()
        period = "today" if self.window is Window.DAY else "this month"
        unit = " minutes" if self.metric is Metric.MINUTES else ""
        return (
            f"the {self.scope.kind}'s {self.metric.value} for {period} "
            f"({j['used']:g} of {j['limit']:g}{unit}; resets {j['resets_at']})"
        )


@dataclass(frozen=True, slots=True)
class Assessment:
    warnings: tuple[Reading, ...] = ()
    exhausted: tuple[Reading, ...] = ()


def limited_counters(plan: Plan, ids: WindowIds) -> list[str]:
    """The counters ``assess`` needs: those of every limit the plan sets."""
    return [
        counter_key(scope, metric, ids.of(window))
        for scope, limits in plan.scopes
        for metric in Metric
        for window in Window
        if limits.limit(metric, window) is not None
    ]


def charge_entries(
    scopes: Iterable[Scope], charge: Charge, ids: WindowIds
) -> list[tuple[str, float]]:
    """``(counter, amount)`` for every counter a charge adds to."""
    return [
        (counter_key(scope, metric, ids.of(window)), charge.amount(metric))
        for scope in scopes
        for metric in Metric
        if charge.amount(metric) > 0
        for window in Window
    ]


def assess(plan: Plan, totals: Mapping[str, float], ids: WindowIds, now: datetime) -> Assessment:
    """Each limit of the plan against its counter (missing: 0)."""
    warnings: list[Reading] = []
    exhausted: list[Reading] = []
    for scope, limits in plan.scopes:
        for metric in Metric:
            for window in Window:
                limit = limits.limit(metric, window)
                if limit is None:
                    continue
                used = totals.get(counter_key(scope, metric, ids.of(window)), 0.0)
                reading = Reading(scope, metric, window, used, limit, resets_at(window, now))
                if used >= limit:
                    exhausted.append(reading)
                elif used >= limit * limits.soft_limit:
                    warnings.append(reading)
    return Assessment(tuple(warnings), tuple(exhausted))
