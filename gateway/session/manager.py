"""The live sessions of one gateway node: open, announce, time out, end, drain; and what the
other nodes of a cluster ask of it (the bus).

The socket handler (a client edge, ``gateway.edges``) owns a client socket; a ``Session`` can
outlive it (the resume window), so its upstream reader and timers are owned here instead.
Parking, resuming and moving sessions (on this node or another) is ``gateway.session.resume``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.clock import Clock
from gateway.config import Settings
from gateway.governance import BudgetCounters
from gateway.governance.credentials import KeyAuthority
from gateway.observability import Metrics, Tracing
from gateway.protocol import (
    AudioFormat,
    EndReason,
    ErrorCode,
    ErrorEvent,
    Mode,
    Recovery,
    SessionEnded,
    SessionLimits,
    SessionStart,
    SessionStarted,
    ToolInfo,
)
from gateway.registry import Registry
from gateway.routing import ModelCatalog, TargetHealth, WarmPool
from gateway.session.client_output import ClientOutput
from gateway.session.fan_out import for_each
from gateway.session.opening import open_session
from gateway.session.parts import SessionObserver, SessionParts
from gateway.session.refusals import StartRefused, store_unavailable
from gateway.session.resume import Resumes
from gateway.session.session import Session, SessionUser
from gateway.session.slots import SessionSlots
from gateway.session.start_setup import session_setup
from gateway.store import (
    Fenced,
    SessionRecord,
    SessionSnapshot,
    SessionStore,
    StoreUnavailable,
    hash_token,
)
from gateway.toolrun import AuditSink, ResultCache
from transports.base import Transport

__all__ = ["SessionManager", "StartRefused", "TransportFactory"]

_log = structlog.get_logger("sessions")

TransportFactory = Callable[[str, Settings], Transport]

# How often a session's timers look at idle time, duration and confirmation expiry.
TIMER_TICK_S = 0.25


@dataclass(slots=True)
class SessionManager:
    settings: Settings
    registry: Registry
    transports: TransportFactory
    metrics: Metrics
    audit: AuditSink
    clock: Clock
    cache: ResultCache
    store: SessionStore
    node_id: str = "local"
    sessions: dict[str, Session] = field(default_factory=dict)
    # Per session: its upstream reader and timers, which outlive a client socket.
    _loops: dict[str, tuple[asyncio.Task[None], asyncio.Task[None]]] = field(default_factory=dict)
    _none_left: asyncio.Event = field(default_factory=asyncio.Event)
    # Snapshot writes in flight, and sessions that changed again meanwhile.
    _saving: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _save_again: set[str] = field(default_factory=set)
    # Sessions handed off whose calls still run here (a drain waits for them).
    _finishing: set[Session] = field(default_factory=set)
    _background: set[asyncio.Task[None]] = field(default_factory=set)
    draining: bool = False
    # With tracing on, the process's tracer (gateway.observability.tracing); None: off.
    tracing: Tracing | None = None
    # Where budgets are charged (gateway.governance; None: nothing is counted).
    counters: BudgetCounters | None = None
    keys: KeyAuthority | None = None
    catalog: ModelCatalog | None = None  # the operator's model aliases (GATEWAY_MODELS)
    health: TargetHealth | None = None  # the breakers of their targets
    pool: WarmPool | None = None  # connections opened ahead
    observer: SessionObserver | None = None  # hears the sessions' events: the console
    resumes: Resumes = field(init=False)
    slots: SessionSlots = field(init=False)
    # What every session here is built with (``opening.open_session``).
    parts: SessionParts = field(init=False)

    def __post_init__(self) -> None:
        self.resumes = Resumes(self)
        self.parts = SessionParts.of(
            self.settings,
            registry=self.registry,
            clock=self.clock,
            metrics=self.metrics,
            audit=self.audit,
            counters=self.counters,
            catalog=self.catalog,
            health=self.health,
            pool=self.pool,
            observer=self.observer,
        )
        self.slots = SessionSlots(
            self.settings, self.store, self.counters, self.clock, self.node_id, self.keys
        )

    # -- start -----------------------------------------------------------------------------------

    async def start(
        self, start: SessionStart, user: SessionUser, outbound: ClientOutput
    ) -> Session:
        """A new session, announced to the client; raises ``StartRefused``."""
        self.refuse_while_draining(start)
        user = await self.slots.with_budgets(user, start.event_id)
        if len(self.sessions) >= self.settings.max_sessions:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.RATE_LIMITED,
                    message="the gateway is at its session limit; try again shortly",
                    retryable=True,
                    event_id=start.event_id,
                )
            )
        session_id = f"sess_{secrets.token_hex(12)}"
        parts = self.parts
        setup = session_setup(
            start, user, parts.registry, self.settings, catalog=parts.catalog, session_id=session_id
        )
        await self.slots.acquire(user, session_id, start.event_id)
        try:
            session = await self.open(
                session_id,
                setup,
                user,
                outbound,
                start.event_id,
                epoch=1,
            )
        except BaseException:
            await self.release_slot(user, session_id)
            raise
        try:
            await self.announce(session, resumed=False, register=True)
        except BaseException as exc:
            # It never started for the client: it hears of the refusal alone (no
            # session.ended from the session itself).
            session.detach()
            unavailable = isinstance(exc, StoreUnavailable)
            await session.end(EndReason.ERROR, "could not be recorded" if unavailable else None)
            await self.forget(session)
            if unavailable:
                raise store_unavailable(start.event_id) from None
            raise
        self.resumes.moves.move_if_draining(session)  # began before the drain, ends during it
        return session

    async def keep_slot(self, session: Session) -> None:
        """Its slots name this node (a resumed session; a store that restarted empty)."""
        await self.slots.keep(session.user, session.session_id)

    async def release_slot(self, user: SessionUser, session_id: str) -> None:
        await self.slots.release(user, session_id)

    async def open(
        self,
        session_id: str,
        setup: SessionSnapshot,
        user: SessionUser,
        outbound: ClientOutput,
        event_id: str | None,
        *,
        epoch: int,
    ) -> Session:
        """Connect the upstream and build the session (registered, loops running)."""
        session = await open_session(self, session_id, setup, user, event_id, epoch=epoch)
        session.attach(outbound)
        self.sessions[session_id] = session
        self.metrics.active_sessions.inc()
        self._loops[session_id] = (
            asyncio.create_task(session.run_upstream()),
            asyncio.create_task(self._timers(session)),
        )
        return session

    async def announce(
        self,
        session: Session,
        *,
        resumed: bool,
        recovery: Recovery | None = None,
        register: bool = False,
    ) -> None:
        """Send ``session.started`` with a fresh resume token (an older one stops working once
        the store has the new one's hash). ``register``: a new session's first record."""
        token = secrets.token_urlsafe(24)
        token_hash = hash_token(token)
        ttl_s = self.live_ttl_s()
        if register:
            record = SessionRecord(
                session_id=session.session_id,
                user_id=session.user.user_id,
                tenant=session.user.tenant,
                token_hash=token_hash,
                owner=self.node_id,
                epoch=session.ownership.epoch,
                state="live",
                snapshot=session.snapshot(),
                saved_at=self.clock.now().timestamp(),
            )
            await self.store.register(record, ttl_s)
        else:
            try:
                await session.ownership.save(session.snapshot(), token_hash=token_hash, ttl_s=ttl_s)
            except Fenced:
                session.lost()
                return
        session.resume_token_hash = token_hash
        visible = self.registry.visible_to(session.user.roles, session.profile.enabled)
        session.emit(
            SessionStarted(
                session_id=session.session_id,
                resume_token=token,
                mode=Mode(session.mode),
                provider=session.provider,
                model=session.profile.model or session.provider,
                registry_version=self.registry.version,
                tools=tuple(
                    ToolInfo(
                        name=s.tool_id,
                        summary=s.summary,
                        category=s.category,
                        requires_confirmation=s.needs_confirmation,
                        background=s.background,
                    )
                    for s in visible
                ),
                audio=AudioFormat(
                    input_rate=session.profile.input_rate,
                    output_rate=session.profile.output_rate,
                    encoding=session.profile.encoding,
                ),
                upstream_input_rate=(
                    session.transport.capabilities.input_rate
                    if session.profile.mode == "voice"
                    else None
                ),
                resumed=resumed,
                limits=SessionLimits(
                    max_duration_s=self.settings.max_duration_s,
                    idle_timeout_s=self.settings.idle_timeout_s,
                ),
                recovery=recovery,
            )
        )
        session.tools.background.replay_missed()
        if resumed:  # a request sent while nobody was attached was lost: asked again
            session.tools.client_calls.ask_again()

    def live_ttl_s(self) -> float:
        """A live record outlives the longest session by the resume window (for a crash)."""
        return self.settings.max_duration_s + self.settings.resume_window_s

    # -- resume (gateway.session.resume) ---------------------------------------------------------

    async def resume(
        self, start: SessionStart, user: SessionUser, outbound: ClientOutput
    ) -> Session:
        self.refuse_while_draining(start)
        user = await self.slots.with_budgets(user, start.event_id)
        return await self.resumes.resume(start, user, outbound)

    def park(self, session: Session) -> None:
        self.resumes.park(session)

    # -- snapshots and ownership -----------------------------------------------------------------

    def session_boundary(self, session: Session) -> None:
        """A turn began or ended: a snapshot for a shared store, one write in flight per
        session (a boundary during a write asks for one more after it)."""
        if not self.store.shared:
            return
        session_id = session.session_id
        if session_id in self._saving:
            self._save_again.add(session_id)
            return
        self._saving[session_id] = asyncio.create_task(self._save(session))

    async def _save(self, session: Session) -> None:
        try:
            while not session.ended.is_set():
                self._save_again.discard(session.session_id)
                try:
                    await session.ownership.save(session.snapshot(), ttl_s=self.live_ttl_s())
                except Fenced:
                    session.lost()
                    return
                if session.session_id not in self._save_again:
                    return
        finally:
            self._saving.pop(session.session_id, None)

    def session_lost(self, session: Session) -> None:
        """Another node owns it now: let our copy go, quietly."""
        self._in_background(self.release_local(session))

    def _in_background(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def release_local(self, session: Session) -> None:
        """Stop our copy of a session that goes on elsewhere: its socket closes (1012), its
        upstream closes, calls still running finish into the ledger."""
        previous = session.outbound
        await session.hand_off()
        if previous is not None:
            previous.close()
        await self.forget(session)

    async def verify_ownership(self) -> None:
        """After a pause longer than a lease: every session another node took meanwhile is let
        go before it can do anything (its writes are fenced anyway). Several at a time
        (``fan_out``): the store's return waits for this before the sessions are recorded again."""

        async def check(session: Session) -> bool:
            owner = await self.store.owner(session.session_id)  # StoreUnavailable: stop
            if owner is not None and owner != (self.node_id, session.ownership.epoch):
                session.lost()
            return True

        await for_each(list(self.sessions.values()), check)

    async def reassert_all(self) -> None:
        """The store is back, perhaps empty: each session here is recorded again (its owner's
        next write re-registers a missing record; a tombstone or a newer owner fences it), with
        its open confirmations and its user's slot. (Ledger entries it lost are written again
        when their calls finish: ``ledger_finish``.) Several at a time (``fan_out``), parked
        sessions first: their clients are the ones resuming, perhaps on another node, which
        trusts this one to have recorded them within a lease."""

        async def record_again(session: Session) -> bool:
            if session.ended.is_set() or session.ownership.handed_off:
                return True
            parked = session.outbound is None
            ttl_s = self.settings.resume_window_s if parked else self.live_ttl_s()
            try:
                if not await session.ownership.save(session.snapshot(), parked=parked, ttl_s=ttl_s):
                    return False  # down again: the next recovery of the store does it all
                await session.ownership.reopen_confirmations()
                await self.keep_slot(session)
            except Fenced:
                session.lost()
            return True

        # parked first (False sorts first); the order is otherwise kept
        waiting = sorted(self.sessions.values(), key=lambda s: s.outbound is not None)
        await for_each(waiting, record_again)

    def on_message(self, message: Mapping[str, Any]) -> None:
        """What another node says (the bus): a release request, a release done, a call of a
        session of ours finished there."""
        kind, session_id = message.get("type"), str(message.get("session_id", ""))
        reply_to = message.get("reply_to")
        if kind in ("release", "moved") and isinstance(reply_to, str):
            # "release": it is live here and asked for; "moved": claimed from parked.
            self._in_background(self.resumes.let_go(session_id, reply_to, save=kind == "release"))
        elif kind == "released":
            self.resumes.released(session_id)
        elif kind == "ledger":
            session = self.sessions.get(session_id)
            if session is not None:
                session.ownership.call_finished_elsewhere(str(message.get("call_id", "")))

    # -- end -------------------------------------------------------------------------------------

    async def end_key_sessions(self, key_id: str) -> int:
        """A key was revoked: its sessions here end (``key_revoked``), parked ones too."""
        ending = [
            s.end(EndReason.KEY_REVOKED, "the session's key was revoked")
            for s in list(self.sessions.values())
            if key_id and s.user.key_id == key_id
        ]
        await asyncio.gather(*ending, return_exceptions=True)
        return len(ending)

    async def forget(self, session: Session) -> None:
        """The session has ended (or gone to another node): unregister it (this object only)
        and stop its loops once its upstream has closed; an ended session's record goes."""
        if self.sessions.get(session.session_id) is not session:
            return
        del self.sessions[session.session_id]
        self.metrics.active_sessions.dec()
        if not self.sessions:
            self._none_left.set()
        await session.closed()
        current = asyncio.current_task()
        for task in self._loops.pop(session.session_id, ()):
            if task is not current and not task.done():
                task.cancel()
        if session.ownership.handed_off and session.tools.running():
            self._finishing.add(session)
            self._in_background(self._finish(session))

    async def session_ending(self, session: Session) -> None:
        """The session ends here for good: its user's slot and its record go (a tombstone)."""
        await self.release_slot(session.user, session.session_id)
        with contextlib.suppress(StoreUnavailable):
            await self.store.end(session.session_id, session.ownership.epoch)

    async def _finish(self, session: Session) -> None:
        try:
            await session.tools.wait_running()
        finally:
            self._finishing.discard(session)

    async def _timers(self, session: Session) -> None:
        while not session.ended.is_set():
            await asyncio.sleep(TIMER_TICK_S)
            try:
                await session.tools.expire_due()
                session.clock_tick()
                if session.idle_for() > self.settings.idle_timeout_s:
                    await session.end(EndReason.IDLE_TIMEOUT)
                elif session.age() > self.settings.max_duration_s:
                    await session.end(EndReason.MAX_DURATION)
            except Exception:
                _log.exception("session_timer_failed", session_id=session.session_id)

    def refuse_while_draining(self, start: SessionStart) -> None:
        if self.draining:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.UPSTREAM_UNAVAILABLE,
                    message="the gateway is shutting down; connect again to another node",
                    retryable=True,
                    fatal=True,
                    event_id=start.event_id,
                ),
                ended=SessionEnded(reason=EndReason.SHUTDOWN, detail="the gateway is draining"),
            )

    async def drain(self) -> None:
        """SIGTERM. With a shared store, sessions move to other nodes (``Resumes.move_all``); else
        after the grace period (sooner if every attached session is gone) the rest end with
        reason ``shutdown``, all at once."""
        self.draining = True
        grace = self.settings.drain_grace_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        if self.store.shared:
            await self.resumes.move_all(deadline)
        # Parked sessions cannot come back while draining: no reason to wait for them.
        while any(s.outbound is not None for s in self.sessions.values()):
            self._none_left.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none_left.wait(), min(remaining, TIMER_TICK_S))
        if self.store.shared:  # sessions whose start ended meanwhile were moved: until due
            await self.resumes.moves.moves_done()
        await self.end_all()
        if self.sessions:
            self._none_left.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none_left.wait(), 3)
        if self._finishing:  # calls running here for sessions now elsewhere: into the ledger
            running = [s.tools.wait_running() for s in list(self._finishing)]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*running), max(deadline - loop.time(), 1))

    async def end_all(self) -> None:
        """The application is being torn down: end every session left (parked ones too) at
        once, so each upstream connection is closed rather than dropped with the event loop."""
        self.draining = True
        ending = [
            session.end(EndReason.SHUTDOWN, "the gateway is shutting down")
            for session in list(self.sessions.values())
        ]
        await asyncio.gather(*ending, return_exceptions=True)
