"""One session's budgets, enforced while it runs (the async shell around ``assess``).

- A response's usage is charged when the upstream reports its end (tokens, and spend priced
  with the model that produced it), in the background: the client's next event never waits for
  the store.
- The session's clock: every ``CLOCK_CHARGE_S`` of time with a client attached (for a voice
  session, the time its audio flows both ways) is charged as session minutes. A session that
  charges nothing else still reads its counters at each tick, so it learns within
  ``CLOCK_CHARGE_S`` that another session (on any node) spent the budget.
- Each user turn's start reads the counters; a turn started on an exhausted budget is cut.

Each charge returns the totals (one atomic step in the store); past a scope's soft fraction the
session is warned once per limit, at the limit it is ended (``SessionPort``). Charges of one
session go one at a time; what piles up meanwhile goes in the next. A charge the store could
not take is kept and sent with the next: usage is never dropped.

Overspend: a session learns of an exhausted budget at its next response end, clock tick or
turn start, so past the limit each live session may add at most the response it is in, or
``CLOCK_CHARGE_S`` of session time (docs/keys.md states and tests the bound).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

import structlog

from gateway.budgets.assess import (
    Assessment,
    Charge,
    Plan,
    Reading,
    assess,
    charge_entries,
    limited_counters,
)
from gateway.budgets.limits import Scope
from gateway.budgets.windows import window_ids
from gateway.clock import Clock
from gateway.governance.ports import BudgetCounters
from gateway.store import StoreUnavailable

__all__ = ["CLOCK_CHARGE_S", "SessionBudget", "SessionPort", "exhausted_now"]

_log = structlog.get_logger("budgets")

CLOCK_CHARGE_S = 5.0
# How long a user turn waits for its budget check (a store round trip, well under a ms).
TURN_CHECK_WAIT_S = 0.5


class SessionPort(Protocol):
    """What the budget does to its session."""

    def budget_warning(self, reading: Reading) -> None:
        """Past the soft fraction of a limit: ``budget.warning``, and the model is asked to
        wrap up."""
        ...

    async def budget_exhausted(self, reading: Reading) -> None:
        """At a limit: the current response ends, then the session (``budget_exhausted``)."""
        ...


class SessionBudget:
    def __init__(
        self,
        plan: Plan,
        counters: BudgetCounters,
        clock: Clock,
        port: SessionPort,
        *,
        session_id: str,
        on_charged: Callable[[Charge], None] | None = None,
    ) -> None:
        """``on_charged``: told of each charge the store took (the team's metrics)."""
        self.plan = plan
        self._counters = counters
        self._clock = clock
        self._port = port
        self._scopes = tuple(scope for scope, _ in plan.scopes)
        self._pending = Charge()
        self._pending_model: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._warned: set[tuple[str, str, str]] = set()
        self.exhausted: Reading | None = None
        self._ending: asyncio.Task[None] | None = None
        self._store_down = False
        # A session's budget is made as it opens, with its client attached: its time counts.
        self._clock_from: float | None = clock.monotonic()
        self._accrued_s = 0.0
        self._log = _log.bind(session_id=session_id)
        self._on_charged = on_charged

    # -- what the session reports ----------------------------------------------------------------

    def response_charged(self, tokens: int, cost: float | None, model: str) -> None:
        """A response's usage, as the upstream reported it (``model``: ``provider/model``)."""
        if tokens or cost:
            self._submit(Charge(tokens=float(tokens), spend=cost or 0.0), model)

    def tick(self, attached: bool) -> None:
        """The session's timer (a few times a second): session time, charged every
        ``CLOCK_CHARGE_S``; only while a client is attached."""
        now = self._clock.monotonic()
        if self._clock_from is not None:  # attached since the last tick
            self._accrued_s += now - self._clock_from
        self._clock_from = now if attached else None
        if self._accrued_s >= CLOCK_CHARGE_S:
            seconds, self._accrued_s = self._accrued_s, 0.0
            self._submit(Charge(seconds=seconds), None)

    async def turn_may_start(self) -> bool:
        """A user turn begins: the counters are read (with any charge still in flight) before
        it reaches the model, and False when a limit has run out (the session is ending). A
        store slower than ``TURN_CHECK_WAIT_S`` lets the turn go on; the read ends it if need be."""
        self._submit(Charge(), None)
        task = self._task
        if task is not None and not self._store_down:  # a store known down is not waited for
            with contextlib.suppress(TimeoutError, Exception):
                async with asyncio.timeout(TURN_CHECK_WAIT_S):
                    await asyncio.shield(task)
        return self.exhausted is None

    async def settle(self) -> None:
        """The session ends or leaves this node: its last seconds charged, every charge done."""
        self.tick(attached=False)
        if self._accrued_s > 0:
            seconds, self._accrued_s = self._accrued_s, 0.0
            self._submit(Charge(seconds=seconds), None)
        await self.charged()

    async def charged(self) -> None:
        """Every charge submitted so far has reached the store (or is kept for the next)."""
        while self._task is not None and not self._task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)

    # -- charging --------------------------------------------------------------------------------

    def _submit(self, charge: Charge, model: str | None) -> None:
        self._pending = self._pending + charge
        if model is not None:
            self._pending_model = model
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        first = True
        while first or not self._pending.empty():
            first = False
            charge, self._pending = self._pending, Charge()
            model, self._pending_model = self._pending_model, None
            try:
                assessment = await self._charge(charge, model)
            except Exception as failure:  # the store's, or SQLite's: the charge is kept
                self._store_down = True
                self._pending = charge + self._pending  # sent with the next
                if model is not None and self._pending_model is None:
                    self._pending_model = model
                if isinstance(failure, StoreUnavailable):
                    self._log.warning("budget_charge_deferred", reason="store unavailable")
                else:
                    self._log.exception("budget_charge_failed")
                return
            self._store_down = False
            if self._on_charged is not None and not charge.empty():
                self._on_charged(charge)
            self._apply(assessment)

    async def _charge(self, charge: Charge, model: str | None) -> Assessment:
        now = self._clock.now()
        ids = window_ids(now)
        read = limited_counters(self.plan, ids)
        if charge.empty():
            totals = await self._counters.read(read)
        else:
            scopes = [*self._scopes, *([Scope("model", model)] if model else [])]
            totals = await self._counters.charge(
                charge_entries(scopes, charge, ids),
                read,
                day=ids.day,
                scopes=[scope.name for scope in scopes],
            )
        return assess(self.plan, totals, ids, now)

    def _apply(self, assessment: Assessment) -> None:
        if self.exhausted is not None:
            return
        for reading in (*assessment.warnings, *assessment.exhausted):
            if reading.topic not in self._warned:  # a warning always comes first
                self._warned.add(reading.topic)
                self._port.budget_warning(reading)
        if assessment.exhausted:
            self.exhausted = assessment.exhausted[0]
            self._log.info("budget_exhausted", limit=self.exhausted.as_json())
            # Its own task: ending the session settles the budget, which waits for this one.
            self._ending = asyncio.create_task(self._port.budget_exhausted(self.exhausted))


async def exhausted_now(plan: Plan, counters: BudgetCounters, clock: Clock) -> Reading | None:
    """The first limit of ``plan`` that has run out, or None (a new session's check; raises
    ``StoreUnavailable``)."""
    now = clock.now()
    ids = window_ids(now)
    wanted = limited_counters(plan, ids)
    if not wanted:
        return None
    exhausted = assess(plan, await counters.read(wanted), ids, now).exhausted
    return exhausted[0] if exhausted else None
