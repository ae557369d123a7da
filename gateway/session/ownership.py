"""One session's standing in the shared store: the epoch it is owned at, and the writes that
must be made as its owner (the tool-call ledger, confirmations, snapshots).

Every write checks the epoch in the store; a node that lost the session gets ``Fenced`` and must
do nothing more for it. When the store cannot be reached (``StoreUnavailable``), the session
goes on here: no other node can take it over without the store either; ledger and confirmation
writes are skipped (logged; the store counts its failures), so that a Redis restart costs live
sessions nothing.

When the store answers that it has no record of the session at all (it restarted empty: Redis
runs without persistence), the owner registers the session again from what it holds (the
``record_of`` callback), with its open confirmations (``confirmations_of``: their keys went
with the record, and a confirmation whose key is missing reads as taken by another node), and
goes on; the tombstone an ended session leaves stops a stale node from doing so.

A confirmation whose key could not be written (the store did not answer that one command, though
it stays up: no recovery of the store follows to record it again) is remembered as unrecorded:
written at the session's next snapshot (before a move, so the next owner finds it open), and,
taken here meanwhile, it is this node's (nobody else could take a key never written).

Each result the ledger marks delivered here must reach this node's upstream: a hand-off waits for
the deliveries under way (``delivering``, ``deliveries_given``) before the upstream closes; one
asked for after the hand-off is left in the ledger for the new owner.

``handed_off``: the session left this node (drained, or another node asked for it): calls still
running here finish into the ledger, and their results are left for the new owner.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import structlog

from gateway.store import (
    Fenced,
    LedgerEntry,
    RecordMissing,
    SessionRecord,
    SessionSnapshot,
    SessionStore,
    StoreUnavailable,
)

__all__ = ["Ownership"]

_log = structlog.get_logger("session.ownership")

# How often a call started elsewhere is looked up when no message says it finished.
LEDGER_POLL_S = 0.25

T = TypeVar("T")


class Ownership:
    def __init__(
        self,
        store: SessionStore,
        *,
        session_id: str,
        node: str,
        epoch: int = 1,
        record_of: Callable[[], SessionRecord] | None = None,
        record_ttl_s: float = 3600.0,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.node = node
        self.epoch = epoch
        self.handed_off = False
        self.record_of = record_of
        # The open confirmations (id, how long their keys must live), to record again.
        self.confirmations_of: Callable[[], Iterable[tuple[str, float]]] | None = None
        self._restores = 0  # records registered again (the store had lost them)
        # Confirmations opened here whose key the store did not get (it did not answer).
        self._unrecorded: set[str] = set()
        # Deliveries under way (the ledger asked, the result not yet given): a hand-off waits.
        self._giving = 0
        self._all_given = asyncio.Event()
        self._all_given.set()
        self._record_ttl_s = record_ttl_s
        # Calls this node waits for (started elsewhere): woken by a bus message.
        self._finished: dict[str, asyncio.Event] = {}

    def _unavailable(self, op: str) -> None:
        """Gone on without the store (the store counted the failure)."""
        _log.warning("store_unavailable", op=op, session_id=self.session_id)

    async def _as_owner(self, write: Callable[[], Awaitable[T]]) -> T:
        """An owner's write; when the store lost the record, registered again first."""
        try:
            return await write()
        except RecordMissing:
            if self.record_of is None:
                raise Fenced(f"session {self.session_id} has no record") from None
            record = self.record_of()
            await self.store.register(record, self._record_ttl_s, only_if_absent=True)
            _log.info("session_record_restored", session_id=self.session_id, epoch=self.epoch)
            self._restores += 1
            await self.reopen_confirmations()
            try:
                return await write()
            except RecordMissing:
                raise Fenced(f"session {self.session_id} has no record") from None

    # -- snapshots -------------------------------------------------------------------------------

    async def save(
        self,
        snapshot: SessionSnapshot,
        *,
        ttl_s: float,
        parked: bool = False,
        token_hash: str | None = None,
    ) -> bool:
        """Write a snapshot; False when the store could not be reached (raises ``Fenced``)."""
        await self.record_unrecorded_confirmations()  # the snapshot names them: keys first
        try:
            await self._as_owner(
                lambda: self.store.save(
                    self.session_id,
                    self.epoch,
                    snapshot,
                    token_hash=token_hash,
                    parked=parked,
                    ttl_s=ttl_s,
                )
            )
        except StoreUnavailable:
            self._unavailable("save")
            return False
        return True

    # -- confirmations ---------------------------------------------------------------------------

    async def open_confirmation(self, confirmation_id: str, ttl_s: float) -> None:
        try:
            await self._as_owner(
                lambda: self.store.open_confirmation(
                    self.session_id, self.epoch, confirmation_id, ttl_s
                )
            )
        except StoreUnavailable:
            self._unavailable("open_confirmation")
            self._unrecorded.add(confirmation_id)
        else:
            self._unrecorded.discard(confirmation_id)

    async def reopen_confirmations(self, only: set[str] | None = None) -> None:
        """Record the open confirmations again (``only`` those): the store lost them (it
        restarted empty), or never got them."""
        for confirmation_id, ttl_s in self.confirmations_of() if self.confirmations_of else ():
            if only is None or confirmation_id in only:
                await self.open_confirmation(confirmation_id, ttl_s)

    async def record_unrecorded_confirmations(self) -> None:
        """Write the keys of the open confirmations the store did not get (raises ``Fenced``);
        those closed meanwhile are forgotten."""
        if not self._unrecorded:
            return
        still_open = {c for c, _ in self.confirmations_of()} if self.confirmations_of else set()
        self._unrecorded &= still_open
        await self.reopen_confirmations(only=set(self._unrecorded))

    async def take_confirmation(self, confirmation_id: str) -> bool:
        """True when this node closes it (approve, reject, expiry): exactly one node does."""
        restores = self._restores
        unrecorded = confirmation_id in self._unrecorded
        self._unrecorded.discard(confirmation_id)
        try:
            taken = await self._as_owner(
                lambda: self.store.take_confirmation(self.session_id, self.epoch, confirmation_id)
            )
        except StoreUnavailable:
            self._unavailable("take_confirmation")
            return True  # nobody else can take it without the store either
        # The record had to be registered again: its confirmation keys went with it, so this
        # one is missing because the store forgot it, not because another node took it (the
        # one being taken is no longer open here, so it was not recorded again). A key never
        # written (``unrecorded``) nobody else can have taken either.
        return taken or unrecorded or self._restores > restores

    # -- the tool-call ledger --------------------------------------------------------------------

    async def start_calls(self, calls: Sequence[tuple[str, str]]) -> dict[str, LedgerEntry | None]:
        """None for each call this node may run now; the known entry for a call started
        before (here or elsewhere): it must not run again. Raises ``Fenced``."""
        if not calls:
            return {}
        try:
            return await self._as_owner(
                lambda: self.store.ledger_start(self.session_id, self.epoch, self.node, calls)
            )
        except StoreUnavailable:
            self._unavailable("ledger_start")
            return dict.fromkeys((call_id for call_id, _ in calls), None)

    async def finish_calls(self, results: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Record results; tell the session's owner when it is another node (it delivers)."""
        for call_id, envelope in results:
            try:
                owner = await self.store.ledger_finish(self.session_id, call_id, envelope)
            except StoreUnavailable:
                self._unavailable("ledger_finish")
                continue
            if owner is not None and owner != self.node:
                message = {"type": "ledger", "session_id": self.session_id, "call_id": call_id}
                try:
                    await self.store.publish(owner, message)
                except StoreUnavailable:
                    self._unavailable("publish")

    @contextlib.asynccontextmanager
    async def delivering(self, call_ids: Sequence[str]) -> AsyncIterator[set[str]]:
        """``deliver``, for a block that gives the model the calls it yields: a hand-off waits
        for the block (``deliveries_given``), so that no call the ledger marks delivered here
        is lost with this node's upstream (the new owner leaves delivered calls alone)."""
        self._giving += 1
        self._all_given.clear()
        try:
            yield await self.deliver(call_ids)
        finally:
            self._giving -= 1
            if not self._giving:
                self._all_given.set()

    async def deliveries_given(self) -> None:
        """Until every ``delivering`` block under way has given its results."""
        await self._all_given.wait()

    async def deliver(self, call_ids: Sequence[str]) -> set[str]:
        """The finished calls this node may give the model now, each once (raises ``Fenced``).
        Nothing, once handed off."""
        if self.handed_off:
            return set()
        if not call_ids:
            return set()
        try:
            return await self._as_owner(
                lambda: self.store.ledger_deliver(self.session_id, self.epoch, call_ids)
            )
        except StoreUnavailable:
            self._unavailable("ledger_deliver")
            return set(call_ids)

    async def open_calls(self) -> list[LedgerEntry]:
        try:
            return await self.store.ledger_open(self.session_id)
        except StoreUnavailable:
            self._unavailable("ledger_open")
            return []

    def call_finished_elsewhere(self, call_id: str) -> None:
        """A bus message: a call this node waits for has a result in the ledger."""
        event = self._finished.get(call_id)
        if event is not None:
            event.set()

    async def wait_finished(self, call_id: str, deadline_s: float) -> LedgerEntry | None:
        """The call's entry once it is finished, or None when ``deadline_s`` passed first."""
        event = self._finished.setdefault(call_id, asyncio.Event())
        loop = asyncio.get_running_loop()
        until = loop.time() + deadline_s
        try:
            while True:
                for entry in await self.open_calls():
                    if entry.call_id == call_id and entry.envelope is not None:
                        return entry
                remaining = until - loop.time()
                if remaining <= 0:
                    return None
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(remaining, LEDGER_POLL_S))
        finally:
            self._finished.pop(call_id, None)
