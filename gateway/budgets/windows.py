"""Budget windows: a UTC day and a UTC month, each named by the period it covers. Pure.

A counter is kept per window (``d2026-11-29``, ``m2026-11``); a new day or month starts a new
counter, so nothing has to be reset: the old one is simply not read any more (it stays for the
usage report). Windows are in UTC whatever the node's timezone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from gateway.budgets.limits import Window

__all__ = ["WindowIds", "days_between", "resets_at", "window_ids"]


@dataclass(frozen=True, slots=True)
class WindowIds:
    day: str
    month: str

    def of(self, window: Window) -> str:
        return self.day if window is Window.DAY else self.month


def window_ids(now: datetime) -> WindowIds:
    utc = now.astimezone(UTC)
    return WindowIds(day=f"d{utc:%Y-%m-%d}", month=f"m{utc:%Y-%m}")


def resets_at(window: Window, now: datetime) -> datetime:
    """When the window holding ``now`` ends: the next UTC midnight, or the first of the next
    month at midnight."""
    utc = now.astimezone(UTC)
    midnight = datetime(utc.year, utc.month, utc.day, tzinfo=UTC)
    if window is Window.DAY:
        return midnight + timedelta(days=1)
    if utc.month == 12:
        return datetime(utc.year + 1, 1, 1, tzinfo=UTC)
    return datetime(utc.year, utc.month + 1, 1, tzinfo=UTC)


def days_between(first: date, last: date, *, most: int = 400) -> list[str]:
    """The day windows from ``first`` to ``last`` inclusive (a usage report's range); raises
    ValueError for a reversed or too long range."""
    if last < first:
        raise ValueError("'to' is before 'from'")
    count = (last - first).days + 1
    if count > most:
        raise ValueError(f"at most {most} days at once")
    return [f"d{first + timedelta(days=n):%Y-%m-%d}" for n in range(count)]
