"""Usage for people, read from the budget counters (the same numbers the budgets enforce): per
UTC day and per key, user, team or model, tokens, spend (the price table's currency) and
session minutes. JSON rows or CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from gateway.budgets.limits import Metric
from gateway.budgets.windows import days_between
from gateway.governance.ports import BudgetCounters
from gateway.keys.records import KeyInputError

__all__ = ["GROUPS", "UsageQuery", "usage_csv", "usage_rows"]

GROUPS = ("key", "user", "team", "model")
COLUMNS = ("day", "group_by", "id", "tokens", "spend", "minutes")


class UsageQuery:
    """``group_by``, ``from`` and ``to`` (dates, UTC, inclusive; default: this month so far)."""

    def __init__(self, params: Mapping[str, str], today: date) -> None:
        unknown = sorted(set(params) - {"group_by", "from", "to", "format"})
        if unknown:
            raise KeyInputError(f"unknown parameters {unknown}; known: group_by, from, to, format")
        self.group_by = params.get("group_by", "key")
        if self.group_by not in GROUPS:
            raise KeyInputError(f"group_by: one of {', '.join(GROUPS)}")
        self.first = _date(params.get("from"), "from") or today.replace(day=1)
        self.last = _date(params.get("to"), "to") or today
        try:
            self.days = days_between(self.first, self.last)
        except ValueError as exc:
            raise KeyInputError(f"from/to: {exc}") from None


def _date(raw: str | None, name: str) -> date | None:
    if raw is None or raw == "":
        return None
    try:
        return datetime.strptime(raw, "%Y-%m-%d").date()
    except ValueError:
        raise KeyInputError(f"{name}: a date, YYYY-MM-DD") from None


async def usage_rows(counters: BudgetCounters, query: UsageQuery) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    prefix = f"{query.group_by}:"
    for day in query.days:
        scopes = sorted(s for s in await counters.charged_on(day) if s.startswith(prefix))
        if not scopes:
            continue
        names = [f"{scope}:{metric.value}:{day}" for scope in scopes for metric in Metric]
        totals = await counters.read(names)
        for scope in scopes:
            rows.append(
                {
                    "day": day[1:],
                    "group_by": query.group_by,
                    "id": scope[len(prefix) :],
                    "tokens": int(totals[f"{scope}:tokens:{day}"]),
                    "spend": round(totals[f"{scope}:spend:{day}"], 6),
                    "minutes": round(totals[f"{scope}:minutes:{day}"] / 60, 3),
                }
            )
    return rows


def usage_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        # A spreadsheet must not run what a user id says (CSV injection).
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
