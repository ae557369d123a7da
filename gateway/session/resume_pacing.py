"""How fast moved sessions come back: two pure policies, time given by the caller.

A draining node sends every session it holds to the other nodes at about the same moment (most
sessions are between turns when SIGTERM comes). If each client resumed at once, the node that
takes them would reopen dozens of upstreams and replay their histories in one burst, and the
sessions it already serves would wait behind that work. So:

- ``MoveSpread`` (the draining node): each moved session's ``session.moving`` carries its own
  ``retry_after_ms``. Sessions that move together are given resume times one ``spacing`` apart,
  where the window (``spacing`` × sessions moving) is proportional to how many move, up to a
  maximum; a session that moves later than its slot (it was mid-reply) resumes at once.
- ``ResumeGate`` (every node): a token bucket of resumes per second with a burst. A resume over
  the rate waits for its token (a reservation: the order of arrival is kept); one that would
  wait longer than ``max_wait_s`` is turned away with the time after which it would be taken,
  and the client tries again (``rate_limited``, retryable). Nothing is claimed before the
  token: a resume turned away leaves the session parked, resumable, exactly as it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Admitted", "Deferred", "MoveSpread", "ResumeDecision", "ResumeGate"]


@dataclass(frozen=True, slots=True)
class Admitted:
    """Go ahead after ``wait_s`` seconds (0: now)."""

    wait_s: float


@dataclass(frozen=True, slots=True)
class Deferred:
    """Over the rate by more than the longest wait: try again after ``retry_after_s``."""

    retry_after_s: float


ResumeDecision = Admitted | Deferred


@dataclass(slots=True)
class ResumeGate:
    """Resumes per second with a burst; ``rate_per_s`` 0 admits everything at once."""

    rate_per_s: float
    burst: int
    max_wait_s: float
    _tokens: float = math.nan  # nan: full on first use
    _last: float = 0.0

    def reserve(self, now: float) -> ResumeDecision:
        """Take the next token: now, after a wait, or not at all (``Deferred``, nothing spent).
        Tokens may go below zero: each is a resume already promised a later turn."""
        if self.rate_per_s <= 0:
            return Admitted(0.0)
        if math.isnan(self._tokens):
            self._tokens = float(self.burst)
        else:
            elapsed = max(0.0, now - self._last)
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate_per_s)
        self._last = now
        wait_s = max(0.0, (1.0 - self._tokens) / self.rate_per_s)
        if wait_s > self.max_wait_s:
            return Deferred(wait_s - self.max_wait_s)
        self._tokens -= 1.0
        return Admitted(wait_s)


@dataclass(slots=True)
class MoveSpread:
    """The resume times of one drain's moved sessions, ``spacing_s`` apart from its start."""

    spacing_s: float
    next_at: float  # the time (the caller's clock) of the next free slot

    @classmethod
    def plan(
        cls, moving: int, *, per_session_ms: int, max_window_ms: int, now: float
    ) -> MoveSpread:
        """``moving`` sessions over ``per_session_ms`` each, the whole at most
        ``max_window_ms``."""
        window_ms = min(per_session_ms * moving, max_window_ms)
        spacing_s = window_ms / 1000 / moving if moving > 0 else 0.0
        return cls(spacing_s, now)

    def retry_after_ms(self, now: float) -> int:
        """The wait of the session moving at ``now``: until the next free slot (0 when it is
        past), which is then taken."""
        at = max(now, self.next_at)
        self.next_at = at + self.spacing_s
        return round((at - now) * 1000)

    @property
    def last_resume_at(self) -> float:
        """When the last session given a slot so far is told to resume (the caller's clock)."""
        return self.next_at - self.spacing_s
