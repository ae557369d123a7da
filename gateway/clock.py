"""Time as a dependency: policy code takes a ``Clock`` so tests never sleep."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations, deadlines)."""
        ...

    def now(self) -> datetime:
        """Aware UTC wall time (expiry timestamps shown to people)."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to; ships with the package for tests of policy."""

    def __init__(self, start: datetime | None = None) -> None:
        self._mono = 1000.0
        self._wall = start or datetime(2026, 1, 1, tzinfo=UTC)

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return self._wall

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._mono += seconds
        self._wall += timedelta(seconds=seconds)
