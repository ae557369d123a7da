"""Budgets per key, user and team: limits (``limits``), windows (``windows``), what a charge
adds to and what the totals mean (``assess``, pure), and one session's enforcement (``guard``)."""

from gateway.budgets.assess import Assessment, Charge, Plan, Reading, assess, counter_key
from gateway.budgets.limits import (
    BudgetInputError,
    Limits,
    Metric,
    Scope,
    Window,
    parse_limits,
)
from gateway.budgets.windows import WindowIds, resets_at, window_ids

__all__ = [
    "Assessment",
    "BudgetInputError",
    "Charge",
    "Limits",
    "Metric",
    "Plan",
    "Reading",
    "Scope",
    "Window",
    "WindowIds",
    "assess",
    "counter_key",
    "parse_limits",
    "resets_at",
    "window_ids",
]
