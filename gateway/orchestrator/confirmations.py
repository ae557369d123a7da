"""Pending confirmations: bound to a hash of tool + canonical arguments, expiring, used once.

Theory of operation. A call to a tool that needs confirmation is not executed; a
``PendingConfirmation`` is opened and the model is told ``CONFIRMATION_REQUIRED``. It then closes
exactly once, by one of:

    approve (client)          → the call runs once with the bound (or re-validated) arguments
    spoken yes (model re-call) → the same, for non-critical tools and matching arguments only
    reject (client)           → nothing runs
    expiry (clock)            → nothing runs

A closed id is remembered, so a late answer gets ``confirmation_not_found`` (used, rejected) or
``confirmation_expired`` rather than a second execution. Everything here is pure: time comes
from the caller.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

__all__ = ["ConfirmationBook", "ConfirmationLookup", "LookupResult", "PendingConfirmation"]


@dataclass(frozen=True, slots=True)
class PendingConfirmation:
    confirmation_id: str
    call_id: str
    tool_id: str
    args: dict[str, Any]
    args_hash: str
    sensitivity: str
    prompt: str
    expires_at: datetime

    @property
    def critical(self) -> bool:
        return self.sensitivity == "critical"


class LookupResult(StrEnum):
    PENDING = "pending"
    NOT_FOUND = "not_found"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class ConfirmationLookup:
    result: LookupResult
    pending: PendingConfirmation | None = None


class ConfirmationBook:
    """The session's open confirmations, plus a bounded memory of closed ids."""

    def __init__(self, ttl: timedelta, closed_memory: int = 512) -> None:
        self._ttl = ttl
        self._open: dict[str, PendingConfirmation] = {}
        # closed id → True when it closed by expiry (answers "expired" instead of "not found").
        self._closed: OrderedDict[str, bool] = OrderedDict()
        self._closed_memory = closed_memory

    def __len__(self) -> int:
        return len(self._open)

    def open(
        self,
        *,
        confirmation_id: str,
        call_id: str,
        tool_id: str,
        args: dict[str, Any],
        args_hash: str,
        sensitivity: str,
        prompt: str,
        now: datetime,
    ) -> PendingConfirmation:
        pending = PendingConfirmation(
            confirmation_id=confirmation_id,
            call_id=call_id,
            tool_id=tool_id,
            args=args,
            args_hash=args_hash,
            sensitivity=sensitivity,
            prompt=prompt,
            expires_at=now + self._ttl,
        )
        self._open[confirmation_id] = pending
        return pending

    def lookup(self, confirmation_id: str, now: datetime) -> ConfirmationLookup:
        pending = self._open.get(confirmation_id)
        if pending is not None:
            if pending.expires_at <= now:
                self._close(confirmation_id, expired=True)
                return ConfirmationLookup(LookupResult.EXPIRED, pending)
            return ConfirmationLookup(LookupResult.PENDING, pending)
        if self._closed.get(confirmation_id):
            return ConfirmationLookup(LookupResult.EXPIRED)
        return ConfirmationLookup(LookupResult.NOT_FOUND)

    def take(self, confirmation_id: str, now: datetime) -> ConfirmationLookup:
        """Close a pending confirmation for approval or rejection: it can be taken only once."""
        found = self.lookup(confirmation_id, now)
        if found.result is LookupResult.PENDING:
            self._close(confirmation_id, expired=False)
        return found

    def expire_due(self, now: datetime) -> list[PendingConfirmation]:
        due = [p for p in self._open.values() if p.expires_at <= now]
        for pending in due:
            self._close(pending.confirmation_id, expired=True)
        return due

    def next_expiry(self) -> datetime | None:
        return min((p.expires_at for p in self._open.values()), default=None)

    def pending(self) -> list[PendingConfirmation]:
        return list(self._open.values())

    def restore(self, pending: list[PendingConfirmation]) -> None:
        """Put back confirmations from a stored snapshot (client resume)."""
        for item in pending:
            self._open[item.confirmation_id] = item

    def _close(self, confirmation_id: str, *, expired: bool) -> None:
        self._open.pop(confirmation_id, None)
        self._closed[confirmation_id] = expired
        while len(self._closed) > self._closed_memory:
            self._closed.popitem(last=False)
