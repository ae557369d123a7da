"""Where the breakers of upstream targets live (``TargetHealth``): ``MemoryTargetHealth`` on one
node, ``gateway.routing.health_redis.RedisTargetHealth`` shared by every node of a cluster.

Both apply the rules of ``gateway.routing.breaker`` at the wall time of the clock they are given
(``clock.now().timestamp()``): the record is shared across nodes, and a monotonic clock means
nothing on another machine.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from gateway.clock import Clock
from gateway.routing.breaker import (
    CLOSED,
    Admission,
    BreakerPhase,
    BreakerPolicy,
    BreakerState,
    BreakerView,
    admit,
    failure,
    success,
    view,
)

__all__ = ["MemoryTargetHealth", "TargetHealth", "log_opened"]

_log = structlog.get_logger("routing")


class TargetHealth(Protocol):
    """The breaker of each upstream target (a provider, a model endpoint: any name). A session
    asks ``admit`` before it connects, then reports ``success`` or ``failure`` of that
    connection; none of these raise when a shared store is unreachable."""

    async def admit(self, target: str) -> Admission: ...

    async def failure(self, target: str, reason: str) -> None: ...

    async def success(self, target: str) -> None: ...

    async def states(self) -> dict[str, BreakerView]:
        """Every target with a live record, as now (metrics, the admin API)."""
        ...


def log_opened(target: str, reason: str, *, again: bool, cooldown_s: float) -> None:
    """The line an operator looks for when calls to a target stop."""
    event = "breaker_reopened" if again else "breaker_opened"
    _log.warning(event, target=target, reason=reason, cooldown_s=cooldown_s)


class MemoryTargetHealth:
    """The breakers of one node. Each method runs without awaiting, so it is atomic on the
    event loop."""

    def __init__(self, policy: BreakerPolicy, clock: Clock) -> None:
        self._policy = policy
        self._clock = clock
        self._records: dict[str, BreakerState] = {}

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def _keep(self, target: str, state: BreakerState) -> None:
        # A fresh record is no record: the store deletes it too.
        if state == CLOSED:
            self._records.pop(target, None)
        else:
            self._records[target] = state

    async def admit(self, target: str) -> Admission:
        admission, state = admit(self._records.get(target, CLOSED), self._policy, self._now())
        self._keep(target, state)
        return admission

    async def failure(self, target: str, reason: str) -> None:
        now = self._now()
        before = self._records.get(target, CLOSED)
        after = failure(before, self._policy, now)
        self._keep(target, after)
        if after.open_until is not None and after.open_until != before.open_until:
            again = before.phase(now) is BreakerPhase.HALF_OPEN
            log_opened(target, reason, again=again, cooldown_s=self._policy.cooldown_s)

    async def success(self, target: str) -> None:
        now = self._now()
        before = self._records.get(target, CLOSED)
        after = success(before, self._policy, now)
        self._keep(target, after)
        if before.phase(now) is BreakerPhase.HALF_OPEN and after == CLOSED:
            _log.info("breaker_closed", target=target)

    async def states(self) -> dict[str, BreakerView]:
        now = self._now()
        for target, state in list(self._records.items()):
            if state.expires_at is not None and now >= state.expires_at:
                del self._records[target]  # lapsed: the store's script drops it too
        return {
            target: view(state, self._policy, now)
            for target, state in sorted(self._records.items())
        }
