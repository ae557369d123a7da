"""Sessions that outlive a socket: parked, resumed (on this node or another), moved away.

Theory of operation. Every session has a record in the store (``gateway.store``): its owner and
epoch, the current resume token's hash, its last snapshot.

- **park**: the client's socket dropped. The session stays here for the resume window (its
  upstream open, its calls running) and its record says ``parked`` with a fresh snapshot, so
  that any node may claim it.
- **resume**: a client comes back with the session id and its token. A session attached here
  (a half-open socket) is taken over at once. Else the record is claimed in the store (a new
  epoch): parked here, the live object is picked up again; parked elsewhere, its node is told
  (``moved``) and closes its copy first, then the upstream is reopened here from the snapshot;
  live on a node that is alive, that node is asked to release it (``release``), else forced;
  live on a node that died, it is recovered from its last snapshot, and the client is told
  what was lost. Calls the ledger holds for it are adopted: delivered once, or reported failed
  when their node died while they ran.
- **move** (drain): parked sessions are let go at once; attached ones move at a turn boundary
  (``gateway.session.drain_moves``: ``session.moving`` with a fresh token and its own
  ``retry_after_ms``), and so does a session whose start or resume ends here during the drain.

A resume that reopens a session here (not one attached or parked here) first takes its turn at
``ResumeGate``, the node's resumes per second: the sessions already here keep their latency
while another node's sessions arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

import structlog

from gateway.clock import Clock
from gateway.config import Settings
from gateway.observability import Metrics
from gateway.protocol import (
    EndReason,
    ErrorCode,
    ErrorEvent,
    Recovery,
    SessionStart,
)
from gateway.session.client_output import ClientOutput
from gateway.session.drain_moves import RELEASE_WAIT_S, DrainMoves
from gateway.session.refusals import StartRefused, store_unavailable
from gateway.session.resume_pacing import Admitted, Deferred, ResumeGate
from gateway.session.session import Session, SessionUser
from gateway.store import (
    ClaimOutcome,
    Fenced,
    SessionRecord,
    SessionSnapshot,
    SessionStore,
    StoreUnavailable,
    hash_token,
)
from transports.base import ConversationItem

__all__ = ["Resumes"]

_log = structlog.get_logger("sessions.resume")

# How often a claim of a session whose node does not answer is tried again.
CLAIM_RETRY_S = 0.1


class ManagerView(Protocol):
    """What resuming needs of the session manager."""

    settings: Settings
    store: SessionStore
    metrics: Metrics
    clock: Clock
    node_id: str

    @property
    def sessions(self) -> Mapping[str, Session]: ...

    async def open(
        self,
        session_id: str,
        setup: SessionSnapshot,
        user: SessionUser,
        outbound: ClientOutput,
        event_id: str | None,
        *,
        epoch: int,
    ) -> Session: ...

    async def announce(
        self, session: Session, *, resumed: bool, recovery: Recovery | None = None
    ) -> None: ...

    async def forget(self, session: Session) -> None: ...

    async def release_local(self, session: Session) -> None: ...

    async def keep_slot(self, session: Session) -> None: ...

    def refuse_while_draining(self, start: SessionStart) -> None: ...


class Resumes:
    def __init__(self, manager: ManagerView) -> None:
        self._m = manager
        # Parked (socket lost) sessions: the task that ends them when the resume window passes.
        self.parked: dict[str, asyncio.Task[None]] = {}
        # Sessions another node is letting go for this one: set when it says "released".
        self._released: dict[str, asyncio.Event] = {}
        settings = manager.settings
        self.gate = ResumeGate(
            settings.resumes_per_s, settings.resume_burst, settings.resume_queue_s
        )
        self.moves = DrainMoves(manager)

    # -- park ------------------------------------------------------------------------------------

    def park(self, session: Session) -> None:
        """The client's socket dropped: keep the session for the resume window, then end it."""
        session.detach()
        self.parked[session.session_id] = asyncio.create_task(self._hold(session))

    async def _hold(self, session: Session) -> None:
        m = self._m
        window = m.settings.resume_window_s
        resumed = False
        try:
            try:
                await session.ownership.save(session.snapshot(), parked=True, ttl_s=window)
            except Fenced:
                session.lost()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(session.ended.wait(), timeout=window)
            if not session.ended.is_set():
                await session.end(EndReason.CLIENT, "the client did not come back in time")
        except asyncio.CancelledError:
            resumed = not session.ended.is_set()
            if not resumed:
                raise
        except Exception:
            _log.exception("parked_session_failed", session_id=session.session_id)
            await session.end(EndReason.ERROR, "internal error while parked")
        finally:
            if not resumed:
                if self.parked.get(session.session_id) is asyncio.current_task():
                    del self.parked[session.session_id]
                await m.forget(session)

    # -- resume ----------------------------------------------------------------------------------

    async def resume(
        self, start: SessionStart, user: SessionUser, outbound: ClientOutput
    ) -> Session:
        """Reattach a session; raises ``StartRefused`` (``resume_failed``, or
        ``store_unavailable`` when the store is needed and cannot be reached)."""
        m = self._m
        assert start.resume is not None
        session_id = start.resume.session_id
        token_hash = hash_token(start.resume.resume_token)
        recovery: Recovery | None = None
        session = self._take_over(session_id, token_hash, user)
        claimed = session is None
        if session is None:
            if session_id not in self.parked:  # parked here: picked up again, nothing reopened
                await self._take_turn(start)
                m.refuse_while_draining(start)  # a drain began while it waited for its turn
            try:
                session, recovery = await self._claim(session_id, token_hash, user, outbound, start)
            except StoreUnavailable:
                raise store_unavailable(start.event_id) from None
        if session is None:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.RESUME_FAILED,
                    message="no resumable session with that id and token (it may have "
                    "expired); send session.start without resume to begin a new one",
                    event_id=start.event_id,
                )
            )
        # The new token's roles apply from now on (its tenant is the session's: checked).
        session.user = user
        session.attach(outbound)
        m.metrics.resumes.inc()
        await m.announce(session, resumed=True, recovery=recovery)
        if claimed and m.store.shared:
            await m.keep_slot(session)  # the user's open sessions: counted on this node now
        self.moves.move_if_draining(session)
        return session

    async def _take_turn(self, start: SessionStart) -> None:
        """``GATEWAY_RESUMES_PER_S``: wait for this resume's turn, or refuse it (retryable, the
        session stays parked) when its turn is more than ``GATEWAY_RESUME_QUEUE_S`` away."""
        match self.gate.reserve(self._m.clock.monotonic()):
            case Deferred(retry_after_s=later):
                retry_ms = math.ceil(later * 1000)
                _log.info("resume_deferred", retry_after_ms=retry_ms)
                raise StartRefused(
                    ErrorEvent(
                        code=ErrorCode.RATE_LIMITED,
                        message="this node is taking many resumed sessions; try again in "
                        f"{retry_ms} ms",
                        retryable=True,
                        event_id=start.event_id,
                    )
                )
            case Admitted(wait_s=wait) if wait > 0:
                await asyncio.sleep(wait)

    def _take_over(self, session_id: str, token_hash: str, user: SessionUser) -> Session | None:
        """A session still attached here to a socket that looks alive (a half-open connection
        after a network switch): the old socket is let go."""
        session = self._m.sessions.get(session_id)
        if (
            session is None
            or session_id in self.parked
            or session.ended.is_set()
            or session.user.user_id != user.user_id
            or session.user.tenant != user.tenant
            or not session.resume_token_hash
            or not hmac.compare_digest(session.resume_token_hash, token_hash)
        ):
            return None
        previous = session.outbound
        session.detach()
        if previous is not None:
            previous.close()  # the old socket's handler stops and lets that socket go
        return session

    async def _claim(
        self,
        session_id: str,
        token_hash: str,
        user: SessionUser,
        outbound: ClientOutput,
        start: SessionStart,
    ) -> tuple[Session | None, Recovery | None]:
        m = self._m
        store, node = m.store, m.node_id
        window = m.settings.resume_window_s

        async def claim(force: bool) -> Any:
            return await store.claim(
                session_id,
                token_hash,
                user.user_id,
                user.tenant,
                node=node,
                window_s=window,
                force=force,
            )

        claim_result = await claim(False)
        if claim_result.outcome is ClaimOutcome.BUSY and claim_result.previous_owner is not None:
            # Live on a node that looks alive: ask it to let go. No answer: it is dead (its
            # heartbeat expires within a lease: then it is a recovery) or stuck (after a lease,
            # taken anyway: whatever it writes later is fenced).
            await self._ask(claim_result.previous_owner, "release", session_id)
            loop = asyncio.get_running_loop()
            until = loop.time() + m.settings.lease_ttl_s
            claim_result = await claim(False)
            while claim_result.outcome is ClaimOutcome.BUSY and loop.time() < until:
                await asyncio.sleep(CLAIM_RETRY_S)
                claim_result = await claim(False)
            if claim_result.outcome is ClaimOutcome.BUSY:
                claim_result = await claim(True)
        # Redis may have restarted empty, the session's node not yet recorded it again (at its
        # next heartbeat, within a lease): say so, and the client tries again.
        if (
            claim_result.outcome is ClaimOutcome.NOT_FOUND
            and m.store.shared
            and await store.up_for_s() < m.settings.lease_ttl_s
        ):
            raise StoreUnavailable("the store restarted: its sessions are being recorded")
        if claim_result.outcome is not ClaimOutcome.CLAIMED:
            return None, None
        record = claim_result.record
        assert record is not None
        local = m.sessions.get(session_id)
        holder = self.parked.pop(session_id, None)
        if local is not None and holder is not None and not local.ended.is_set():
            holder.cancel()  # parked here: the live session is picked up again
            local.ownership.epoch = record.epoch
            return local, None
        previous = claim_result.previous_owner
        if previous is not None and previous != node and not claim_result.recovered:
            await self._ask(previous, "moved", session_id)  # its upstream closes first
        lost_node = previous if claim_result.recovered else None
        return await self._reopen(record, lost_node, user, outbound, start)

    async def _reopen(
        self,
        record: SessionRecord,
        lost_node: str | None,
        user: SessionUser,
        outbound: ClientOutput,
        start: SessionStart,
    ) -> tuple[Session, Recovery | None]:
        """The session as its record has it, on a new upstream; its ledger adopted.
        ``lost_node``: the node that died with it (a recovery), if any."""
        m = self._m
        snapshot = record.snapshot
        lost_turn, kept = lost_turn_of(snapshot.history) if lost_node else (None, ())
        if lost_turn is not None:
            # The turn in flight died with its node: the client is told (it may ask again);
            # the new upstream is not asked it a second time behind everyone's back.
            snapshot = replace(snapshot, history=kept)
        try:
            session = await m.open(
                record.session_id,
                snapshot,
                user,
                outbound,
                start.event_id,
                epoch=record.epoch,
            )
        except StartRefused:
            with contextlib.suppress(StoreUnavailable, Fenced):  # keep it resumable
                await m.store.save(
                    record.session_id,
                    record.epoch,
                    record.snapshot,
                    parked=True,
                    ttl_s=m.settings.resume_window_s,
                )
            raise
        session.resume_token_hash = record.token_hash
        recovery = None
        if lost_node is not None:
            open_calls = await session.ownership.open_calls()
            recovery = Recovery(
                lost_turn=lost_turn,
                failed_calls=tuple(
                    e.call_id for e in open_calls if e.envelope is None and e.node == lost_node
                ),
            )
            m.metrics.sessions_recovered.inc()
            _log.info(
                "session_recovered",
                session_id=record.session_id,
                lost_node=lost_node,
                lost_turn=recovery.lost_turn is not None,
                open_calls=[(e.call_id, e.node, e.state.value) for e in open_calls],
            )
        session.tools.adopt_open_calls()
        return session, recovery

    # -- other nodes -----------------------------------------------------------------------------

    async def _ask(self, node: str, what: str, session_id: str) -> None:
        """Tell ``node`` to let the session go, and wait (bounded) until it says it did."""
        waiter = self._released.setdefault(session_id, asyncio.Event())
        waiter.clear()
        message = {"type": what, "session_id": session_id, "reply_to": self._m.node_id}
        try:
            await self._m.store.publish(node, message)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), RELEASE_WAIT_S)
        finally:
            self._released.pop(session_id, None)

    def released(self, session_id: str) -> None:
        waiter = self._released.get(session_id)
        if waiter is not None:
            waiter.set()

    async def let_go(self, session_id: str, reply_to: str, *, save: bool) -> None:
        """Another node takes this session: stop our copy (after a last snapshot, when it is
        still ours to write) and say so."""
        m = self._m
        session = m.sessions.get(session_id)
        if session is not None:
            holder = self.parked.pop(session_id, None)
            if holder is not None:
                holder.cancel()
            if save:
                with contextlib.suppress(Fenced):
                    await session.ownership.save(
                        session.snapshot(), parked=True, ttl_s=m.settings.resume_window_s
                    )
            await m.release_local(session)
        with contextlib.suppress(StoreUnavailable):
            await m.store.publish(reply_to, {"type": "released", "session_id": session_id})

    # -- move (drain) ----------------------------------------------------------------------------

    async def move_all(self, deadline: float) -> None:
        """A draining node with a shared store sends its sessions to other nodes: parked ones at
        once (any node may claim them), attached ones by ``DrainMoves`` (each at its next turn
        boundary, at the latest at ``deadline``, loop time)."""
        m = self._m
        self.moves.begin(deadline)  # before any await: a session arriving from now on moves
        for session_id, holder in list(self.parked.items()):
            session = m.sessions.get(session_id)
            self.parked.pop(session_id, None)
            holder.cancel()
            if session is not None:
                await m.release_local(session)
        await self.moves.move_attached()


def lost_turn_of(
    history: tuple[ConversationItem, ...],
) -> tuple[str | None, tuple[ConversationItem, ...]]:
    """The user's last message when no reply followed it (only its tool calls, which died with
    it), and the history without that turn; else None and the history as it is."""
    end = len(history)
    while end and history[end - 1].role == "tool":
        end -= 1
    if end and history[end - 1].role == "user":
        return history[end - 1].text, history[: end - 1]
    return None, history
