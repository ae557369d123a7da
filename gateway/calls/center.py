"""The calls the gateway places: placing one through its carrier, following its progress, and
running it as a voice session when it is answered.

``CallCenter.place`` checks the request against what the caller may do, keeps a ``queued``
record, and asks the carrier's ``Dialer`` to dial (the carrier then reports progress to the
call's own webhooks, which its edge turns into ``answered``/``ended`` here). A carrier that
refuses, or cannot be reached, leaves a ``failed`` record with the reason, and the request
gets a 502. When the answered call's media stream opens, ``plan`` gives the phone routes what
the session needs: the caller who placed it (their key's or token's budgets count the call), the
instructions, tools, model and greeting. ``finished`` adds the session's usage to the record.

Every change is audited (``audit.calls``: ``call_placed``, ``call_answered``, ``call_ended``),
with the numbers cut to their last four digits.

Records are read, changed and written back: two nodes updating one call at the same instant
(a carrier's status callback and the session's end) may lose one update's fields; the status
never goes backwards (``CallRecord`` refuses to), and the carrier's final callback comes last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from gateway.calls.records import AnsweredBy, CallRecord, CallRequest, CallStatus
from gateway.clock import Clock
from gateway.governance.ports import CallBook
from gateway.session.user import SessionUser

__all__ = ["CallCenter", "CallRefused", "Dialer", "PlacementFailed"]

_audit = structlog.get_logger("audit.calls")


class PlacementFailed(Exception):
    """The carrier refused the call or could not be reached; the message says which, safely."""


class CallRefused(Exception):
    """``POST /v1/calls`` cannot place this call: ``status`` and ``code`` for the answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Dialer(Protocol):
    """One carrier's way of placing a call (its REST API)."""

    @property
    def carrier(self) -> str: ...

    async def place(self, record: CallRecord, public_base: str) -> str:
        """Dial ``record.to`` from ``record.from_``; the carrier's id of the call. Progress goes
        to the call's webhooks under ``public_base``. Raises ``PlacementFailed``."""
        ...

    async def hang_up(self, carrier_call_id: str) -> None: ...


@dataclass(frozen=True, slots=True)
class CallSettings:
    default_from: str | None = None
    default_greeting: str = ""


def masked(number: str) -> str:
    """A phone number for the log: its last four digits."""
    return "…" + number[-4:]


class CallCenter:
    def __init__(
        self,
        book: CallBook,
        dialers: Mapping[str, Dialer],
        clock: Clock,
        settings: CallSettings = CallSettings(),
    ) -> None:
        self.book = book
        self._dialers = dict(dialers)
        self._clock = clock
        self.settings = settings

    @property
    def carriers(self) -> tuple[str, ...]:
        """The carriers calls can be placed through (their credentials are set)."""
        return tuple(self._dialers)

    async def place(self, user: SessionUser, request: CallRequest, public_base: str) -> CallRecord:
        carrier = request.carrier or (self.carriers[0] if len(self.carriers) == 1 else None)
        if carrier is None:
            names = ", ".join(self.carriers) or "none: set a carrier's REST credentials"
            raise CallRefused(400, "invalid_request", f"carrier: name one of {names}")
        dialer = self._dialers.get(carrier)
        if dialer is None:
            raise CallRefused(
                400, "invalid_request", f"carrier: {carrier} cannot place calls on this gateway"
            )
        if request.tools is not None and user.tools is not None:
            extra = sorted(set(request.tools) - set(user.tools))
            if extra:
                raise CallRefused(403, "forbidden", f"tools: this key may not use {extra[0]}")
        record = CallRecord(
            call_id=CallRecord.new_id(),
            carrier=carrier,
            to=request.to,
            from_=request.from_,
            owner=user.user_id,
            created_at=self._clock.now().timestamp(),
            key_id=user.key_id,
            team=user.tenant,
            roles=user.roles,
            tenant=user.tenant,
            model=request.model,
            provider=request.provider,
            instructions=request.instructions,
            greeting=request.greeting,
            tools=request.tools,
            machine=request.machine,
            timeout_s=request.timeout_s,
            metadata=dict(request.metadata),
        )
        await self.book.put_call(record)
        try:
            carrier_call_id = await dialer.place(record, public_base)
        except PlacementFailed as failed:
            record = record.ended("failed", self._clock.now().timestamp(), error=str(failed))
            await self.book.put_call(record)
            self._audited("call_ended", record)
            raise CallRefused(502, "carrier_refused", f"{carrier}: {failed}") from None
        record = record.placed(carrier_call_id)
        await self.book.put_call(record)
        self._audited("call_placed", record)
        return record

    async def get(self, call_id: str) -> CallRecord | None:
        return await self.book.call(call_id)

    async def answered(self, call_id: str, answered_by: AnsweredBy) -> CallRecord | None:
        record = await self.book.call(call_id)
        if record is None or record.terminal:
            return record
        answered = record.answered(self._clock.now().timestamp(), answered_by)
        if answered != record:
            await self.book.put_call(answered)
            self._audited("call_answered", answered)
        return answered

    async def ended(
        self,
        call_id: str,
        status: CallStatus,
        *,
        duration_s: float | None = None,
        error: str | None = None,
    ) -> None:
        record = await self.book.call(call_id)
        if record is None or record.terminal:
            return
        done = record.ended(
            status, self._clock.now().timestamp(), duration_s=duration_s, error=error
        )
        await self.book.put_call(done)
        self._audited("call_ended", done)

    async def hang_up(self, record: CallRecord) -> None:
        dialer = self._dialers.get(record.carrier)
        if dialer is not None and record.carrier_call_id:
            await dialer.hang_up(record.carrier_call_id)

    async def plan(self, carrier: str, carrier_call_id: str) -> CallRecord | None:
        """The placed call whose stream just opened (None: an incoming call)."""
        return await self.book.call_by_carrier(carrier, carrier_call_id)

    async def started(self, record: CallRecord, session_id: str) -> None:
        current = await self.book.call(record.call_id) or record
        await self.book.put_call(current.with_session(session_id))

    async def finished(self, record: CallRecord, usage: Mapping[str, Any] | None) -> None:
        """The call's session ended: its usage goes on the record."""
        current = await self.book.call(record.call_id) or record
        numbers = {k: float(v) for k, v in (usage or {}).items() if isinstance(v, int | float)}
        await self.book.put_call(current.with_usage(numbers))

    def _audited(self, event: str, record: CallRecord) -> None:
        _audit.info(
            event,
            call_id=record.call_id,
            carrier=record.carrier,
            carrier_call_id=record.carrier_call_id,
            owner=record.owner,
            key_id=record.key_id,
            to=masked(record.to),
            status=record.status,
            answered_by=record.answered_by,
            duration_s=record.duration_s,
            error=record.error,
        )
