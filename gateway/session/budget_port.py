"""What a session's budget does to it (``gateway.budgets.guard.SessionPort``): a warning to the
client and a wrap-up instruction to the model; at a limit, the response in progress cancelled
(the client gets its ``response.done``), then the end (``budget_exhausted``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from gateway.budgets import Charge, Reading
from gateway.budgets.guard import SessionBudget
from gateway.clock import Clock
from gateway.governance import BudgetCounters
from gateway.observability import Metrics
from gateway.protocol import BudgetWarning, EndReason, JsonObject, ServerEvent
from gateway.session.user import SessionUser

__all__ = ["WRAP_UP", "BudgetedSession", "SessionBudgetPort", "budget_of"]

# Given to the model at the user's next turn, as a SET_PENDING_MESSAGE would be.
WRAP_UP = (
    "The budget for this conversation is nearly used up. Finish what the user asked for in as "
    "few words as possible, start nothing new, and say goodbye politely if it fits."
)
# How long a cancelled response has to end before the session ends anyway.
CANCEL_WAIT_S = 2.0


class BudgetedSession(Protocol):
    session_id: str

    def emit(self, event: ServerEvent) -> None: ...

    def wrap_up(self, message: str) -> None: ...

    def replying(self) -> bool: ...

    def close_input(self) -> None: ...

    async def cancel_response(self) -> None: ...

    async def until_idle(self) -> None: ...

    async def end(
        self, reason: EndReason, detail: str | None = None, budget: JsonObject | None = None
    ) -> None: ...


def budget_of(
    session: BudgetedSession,
    user: SessionUser,
    counters: BudgetCounters | None,
    clock: Clock,
    metrics: Metrics,
) -> SessionBudget | None:
    """The session's budget (None: nothing counted: budgets off, or a phone stream); its
    team's charges counted by Prometheus when the operator listed the team."""
    if user.plan is None or counters is None:
        return None
    team = user.tenant

    def count_team(charge: Charge) -> None:
        assert team is not None
        metrics.count_team(team, charge.tokens, charge.spend, charge.seconds)

    return SessionBudget(
        user.plan,
        counters,
        clock,
        SessionBudgetPort(session),
        session_id=session.session_id,
        on_charged=count_team if metrics.counts_team(team) else None,
    )


class SessionBudgetPort:
    def __init__(self, session: BudgetedSession) -> None:
        self._session = session

    def budget_warning(self, reading: Reading) -> None:
        self._session.emit(BudgetWarning(limit=reading.as_json()))
        self._session.wrap_up(WRAP_UP)

    async def budget_exhausted(self, reading: Reading) -> None:
        session = self._session
        session.close_input()  # no new turn: the user's audio and text stop here
        if session.replying():
            with contextlib.suppress(Exception):
                await session.cancel_response()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CANCEL_WAIT_S):
                    await session.until_idle()
        await session.end(
            EndReason.BUDGET_EXHAUSTED,
            f"budget exhausted: {reading.describe()}",
            budget=reading.as_json(),
        )
