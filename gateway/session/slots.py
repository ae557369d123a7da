"""What a session holds while it is open, counted across every node: a slot of its user's
(``GATEWAY_MAX_SESSIONS_PER_USER``) and one in each concurrent-session limit of its budgets
(key, user, team); and its budgets' check when it starts (a limit that has run out refuses it
with ``budget_exhausted``)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

from gateway.budgets import Reading
from gateway.budgets.guard import exhausted_now
from gateway.clock import Clock
from gateway.config import Settings
from gateway.governance import BudgetCounters
from gateway.governance.credentials import KeyAuthority
from gateway.protocol import EndReason, ErrorCode, ErrorEvent, SessionEnded
from gateway.session.refusals import StartRefused, store_unavailable
from gateway.session.user import SessionUser
from gateway.store import SessionStore, StoreUnavailable

__all__ = ["SessionSlots", "budget_refusal"]


def budget_refusal(reading: Reading, event_id: str | None) -> StartRefused:
    return StartRefused(
        ErrorEvent(
            code=ErrorCode.BUDGET_EXHAUSTED,
            message=f"budget exhausted: {reading.describe()}",
            event_id=event_id,
        ),
        ended=SessionEnded(
            reason=EndReason.BUDGET_EXHAUSTED,
            detail=f"budget exhausted: {reading.describe()}",
            budget=reading.as_json(),
        ),
    )


class SessionSlots:
    def __init__(
        self,
        settings: Settings,
        store: SessionStore,
        counters: BudgetCounters | None,
        clock: Clock,
        node_id: str,
        keys: KeyAuthority | None = None,
    ) -> None:
        self._per_user = settings.max_sessions_per_user
        self._store = store
        self._counters = counters
        self._clock = clock
        self._node = node_id
        self._keys = keys

    async def with_budgets(self, user: SessionUser, event_id: str | None) -> SessionUser:
        """``user`` with its budgets, read now if they could not be when it connected; raises
        ``StartRefused`` (store_unavailable) while the store cannot be read."""
        if not user.budgets_unread or self._keys is None or self._counters is None:
            return user
        try:
            plan = await self._keys.plan(user.user_id, user.tenant)
        except StoreUnavailable:
            raise store_unavailable(event_id) from None
        return replace(user, plan=plan, budgets_unread=False)

    def _budget_slots(self, user: SessionUser) -> list[tuple[str, int]]:
        return [] if user.plan is None else [(s.name, n) for s, n in user.plan.concurrent()]

    async def acquire(self, user: SessionUser, session_id: str, event_id: str | None) -> None:
        """Raises ``StartRefused`` (a limit reached, or the store unreachable); all or none."""
        try:
            await self._check_budgets(user, event_id)
            if self._per_user > 0 and not await self._store.acquire_user_slot(
                user.user_id, session_id, self._node, self._per_user
            ):
                raise StartRefused(
                    ErrorEvent(
                        code=ErrorCode.RATE_LIMITED,
                        message=f"at most {self._per_user} open sessions per user; end one first",
                        retryable=True,
                        event_id=event_id,
                    )
                )
            slots = self._budget_slots(user)
            if slots and self._counters is not None:
                try:
                    full = await self._counters.acquire_slots(session_id, self._node, slots)
                except StoreUnavailable:
                    with contextlib.suppress(StoreUnavailable):  # all or none
                        await self._release_user(user, session_id)
                    raise
                if full is not None:
                    await self._release_user(user, session_id)
                    limit = dict(slots)[full]
                    kind = full.partition(":")[0]
                    raise StartRefused(
                        ErrorEvent(
                            code=ErrorCode.RATE_LIMITED,
                            message=f"the {kind}'s limit of {limit} concurrent sessions is "
                            "reached; end one first",
                            retryable=True,
                            event_id=event_id,
                        )
                    )
        except StoreUnavailable:
            raise store_unavailable(event_id) from None

    async def _check_budgets(self, user: SessionUser, event_id: str | None) -> None:
        if user.plan is None or self._counters is None:
            return
        reading = await exhausted_now(user.plan, self._counters, self._clock)
        if reading is not None:
            raise budget_refusal(reading, event_id)

    async def keep(self, user: SessionUser, session_id: str) -> None:
        """The session runs on this node now (resumed here; a store that restarted empty)."""
        with contextlib.suppress(StoreUnavailable):
            if self._per_user > 0:
                await self._store.keep_user_slot(user.user_id, session_id, self._node)
            slots = self._budget_slots(user)
            if slots and self._counters is not None:
                await self._counters.keep_slots(session_id, self._node, [s for s, _ in slots])

    async def release(self, user: SessionUser, session_id: str) -> None:
        with contextlib.suppress(StoreUnavailable):
            await self._release_user(user, session_id)
            slots = self._budget_slots(user)
            if slots and self._counters is not None:
                await self._counters.release_slots(session_id, [s for s, _ in slots])

    async def _release_user(self, user: SessionUser, session_id: str) -> None:
        if self._per_user > 0:
            await self._store.release_user_slot(user.user_id, session_id)
