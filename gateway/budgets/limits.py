"""What a budget limits, and the limits of one scope (a key, a user or a team). Pure.

A scope's limits, as the admin API and ``gateway keys`` take them (each optional; ``null`` or
absent: no limit)::

    {"concurrent_sessions": 2,
     "minutes_per_day": 60, "minutes_per_month": 600,
     "tokens_per_day": 200000, "tokens_per_month": 2000000,
     "spend_per_day": 1.5, "spend_per_month": 20,
     "soft_limit": 0.8}

Minutes are session minutes (the time a session is open, counted on its clock); tokens are
every token a response reported, in and out; spend is in the price table's currency. A limit of
0 allows nothing. ``soft_limit`` is the fraction of each limit at which the session is warned
(``budget.warning``); the default is 0.8.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, Literal

from gateway.errors import ClientError

__all__ = [
    "DEFAULT_SOFT_LIMIT",
    "LIMIT_FIELDS",
    "BudgetInputError",
    "Limits",
    "Metric",
    "Scope",
    "ScopeKind",
    "Window",
    "parse_limits",
]

DEFAULT_SOFT_LIMIT = 0.8
# Larger than any real budget, small enough to stay exact as a float in Redis.
MAX_LIMIT = 1e12

# "model" scopes are counted for the usage report; limits belong to the other three.
ScopeKind = Literal["key", "user", "team", "model"]


class BudgetInputError(ClientError, ValueError):
    """Limits that cannot be used; the message names the field and is safe to show."""


class Metric(StrEnum):
    MINUTES = "minutes"
    TOKENS = "tokens"
    SPEND = "spend"


class Window(StrEnum):
    DAY = "day"
    MONTH = "month"


@dataclass(frozen=True, slots=True)
class Scope:
    """Whom a counter or a limit belongs to."""

    kind: ScopeKind
    id: str

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.id}"

    @classmethod
    def parse(cls, name: str) -> Scope:
        kind, _, ident = name.partition(":")
        if kind not in ("key", "user", "team", "model") or not ident:
            raise ValueError(f"not a budget scope: {name!r}")
        return cls(kind, ident)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Limits:
    concurrent_sessions: int | None = None
    minutes_per_day: float | None = None
    minutes_per_month: float | None = None
    tokens_per_day: float | None = None
    tokens_per_month: float | None = None
    spend_per_day: float | None = None
    spend_per_month: float | None = None
    soft_limit: float = DEFAULT_SOFT_LIMIT

    def limit(self, metric: Metric, window: Window) -> float | None:
        """The limit of ``metric`` in ``window``, in the counter's unit (minutes: seconds)."""
        value: float | None = getattr(self, f"{metric.value}_per_{window.value}")
        if value is None:
            return None
        return value * 60 if metric is Metric.MINUTES else value

    def any(self) -> bool:
        return any(
            getattr(self, f.name) is not None for f in fields(self) if f.name != "soft_limit"
        )

    def as_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def merged(self, changes: Mapping[str, Any]) -> Limits:
        """These limits with ``changes`` (the admin API's PATCH: a field set to null is
        removed); raises ``BudgetInputError``."""
        return parse_limits({**self.as_json(), **changes})


LIMIT_FIELDS = tuple(f.name for f in fields(Limits))


def parse_limits(raw: Any, where: str = "budgets") -> Limits:
    """Limits from JSON; raises ``BudgetInputError`` naming the field for anything unknown,
    negative, not finite, huge, or of the wrong type."""
    if raw is None:
        return Limits()
    if not isinstance(raw, Mapping):
        raise BudgetInputError(f"{where}: expected an object of limits")
    unknown = sorted(set(raw) - set(LIMIT_FIELDS))
    if unknown:
        raise BudgetInputError(f"{where}: unknown fields {unknown}; known: {list(LIMIT_FIELDS)}")
    values: dict[str, Any] = {}
    for name in LIMIT_FIELDS:
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BudgetInputError(f"{where}.{name}: expected a number, got {type(value).__name__}")
        if not math.isfinite(value) or value < 0:
            raise BudgetInputError(f"{where}.{name}: must be a finite number ≥ 0")
        if name == "soft_limit":
            if not 0 < value <= 1:
                raise BudgetInputError(f"{where}.soft_limit: a fraction above 0, at most 1")
            values[name] = float(value)
        elif name == "concurrent_sessions":
            if value != int(value) or value > 100_000:
                raise BudgetInputError(f"{where}.{name}: a whole number up to 100000")
            values[name] = int(value)
        else:
            if value > MAX_LIMIT:
                raise BudgetInputError(f"{where}.{name}: at most {MAX_LIMIT:g}")
            values[name] = float(value)
    return Limits(**values)
