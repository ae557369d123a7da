"""A token bucket for a client's control events. Pure: time comes from the caller."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TokenBucket"]


@dataclass(slots=True)
class TokenBucket:
    rate_per_s: float
    burst: float
    tokens: float = -1.0  # -1: full on first use
    last: float | None = None

    def take(self, now: float) -> bool:
        """Spend one token if there is one; False means the event is over the limit."""
        if self.last is None:
            self.tokens = self.burst
        else:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate_per_s)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False
