"""The live sessions of one gateway: open, resume, park, time out, drain.

The socket handler (``gateway.server``) owns a client socket; a ``Session`` can outlive it (the
resume window), so its upstream reader and timers are owned here instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import structlog

from gateway.clock import Clock
from gateway.config import Settings
from gateway.errors import ClientError
from gateway.observability import Metrics
from gateway.protocol import (
    AudioFormat,
    EndReason,
    ErrorCode,
    ErrorEvent,
    Mode,
    Provider,
    SessionEnded,
    SessionLimits,
    SessionStart,
    SessionStarted,
    ToolInfo,
)
from gateway.registry import Registry, ToolSpec
from gateway.session.outbound import Outbound
from gateway.session.session import Session, SessionUser
from gateway.store import ResumeRecord, SessionSnapshot, SessionStore, hash_token
from gateway.toolrun import AuditSink, ModeBudget, ResultCache, ToolRunner
from transports.base import ToolDeclaration, Transport, TransportError, UpstreamConfig

__all__ = ["SessionManager", "StartRefused", "TransportFactory"]

_log = structlog.get_logger("sessions")

TransportFactory = Callable[[str, Settings], Transport]

# How often a session's timers look at idle time, duration and confirmation expiry.
TIMER_TICK_S = 0.25


class StartRefused(ClientError):
    """``session.start`` (or a resume) cannot be honoured; ``event`` tells the client why."""

    def __init__(self, event: ErrorEvent, *, ended: SessionEnded | None = None) -> None:
        super().__init__(event.message)
        self.event = event
        # Sent after the error when the refusal ends the connection (upstream unavailable).
        self.ended = ended

    @property
    def fatal(self) -> bool:
        return self.event.fatal


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
    sessions: dict[str, Session] = field(default_factory=dict)
    # Per session: its upstream reader and timers, which outlive a client socket.
    _loops: dict[str, tuple[asyncio.Task[None], asyncio.Task[None]]] = field(default_factory=dict)
    # Parked (socket lost) sessions: the task that ends them when the resume window passes.
    _parked: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _none_left: asyncio.Event = field(default_factory=asyncio.Event)
    draining: bool = False

    # -- start -----------------------------------------------------------------------------------

    async def start(self, start: SessionStart, user: SessionUser, outbound: Outbound) -> Session:
        """A new session, announced to the client; raises ``StartRefused``."""
        self._refuse_while_draining(start)
        if len(self.sessions) >= self.settings.max_sessions:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.RATE_LIMITED,
                    message="the gateway is at its session limit; try again shortly",
                    retryable=True,
                    event_id=start.event_id,
                )
            )
        self._check_tools(start, user)
        provider = start.provider.value if start.provider else self.settings.provider
        setup = SessionSnapshot(
            provider=provider,
            mode=start.mode.value,
            input_rate=start.audio.input_rate,
            output_rate=start.audio.output_rate,
            enabled_tools=None if start.tools is None else tuple(start.tools),
            instructions=start.instructions or self.settings.default_instructions,
            model=start.model,
            voice=start.voice,
            locale=start.locale,
            tool_dialect=None if start.tool_dialect is None else str(start.tool_dialect),
        )
        session_id = f"sess_{secrets.token_hex(12)}"
        session = await self._open(session_id, setup, user, outbound, start.event_id)
        try:
            self._announce(session, resumed=False)
        except Exception:
            await session.end(EndReason.ERROR, "internal error while starting")
            await self.forget(session)
            raise
        return session

    def _check_tools(self, start: SessionStart, user: SessionUser) -> None:
        if start.tools is None:
            return
        unknown = [name for name in start.tools if self.registry.get(name) is None]
        if unknown:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.INVALID_EVENT,
                    message=f"tools: no tool named {', '.join(map(repr, unknown))}",
                    event_id=start.event_id,
                )
            )
        roles = frozenset(user.roles)
        denied = [name for name in start.tools if not _spec(self.registry, name).allowed_for(roles)]
        if denied:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.FORBIDDEN,
                    message=f"tools: not allowed for this user: {', '.join(map(repr, denied))}",
                    event_id=start.event_id,
                )
            )

    @staticmethod
    async def _refuse_unsupported_mode(
        transport: Transport, setup: SessionSnapshot, event_id: str | None
    ) -> None:
        modes = transport.capabilities.modes
        if setup.mode in modes:
            return
        await transport.close()
        raise StartRefused(
            ErrorEvent(
                code=ErrorCode.FORBIDDEN,
                message=f"mode: the {setup.provider} provider does not support {setup.mode} "
                f"sessions (it supports {', '.join(sorted(modes))})",
                event_id=event_id,
            )
        )

    async def _open(
        self,
        session_id: str,
        setup: SessionSnapshot,
        user: SessionUser,
        outbound: Outbound,
        event_id: str | None,
    ) -> Session:
        """Connect the upstream and build the session (registered, loops running)."""
        enabled = None if setup.enabled_tools is None else list(setup.enabled_tools)
        visible = self.registry.visible_to(user.roles, enabled)
        transport: Transport | None = None
        try:
            transport = self.transports(setup.provider, self.settings)
            # Checked before connecting (no upstream opened for nothing) and after (a
            # transport may only know its capabilities once connected).
            await self._refuse_unsupported_mode(transport, setup, event_id)
            config = UpstreamConfig(
                mode="voice" if setup.mode == "voice" else "text",
                instructions=self.registry.model_instructions(
                    setup.instructions, user.roles, enabled
                ),
                tools=[
                    ToolDeclaration(s.tool_id, s.description, s.provider_schemas) for s in visible
                ],
                client_input_rate=setup.input_rate,
                client_output_rate=setup.output_rate,
                model=setup.model,
                voice=setup.voice,
                locale=setup.locale,
                session_id=session_id,
                history=setup.history,
                options={} if setup.tool_dialect is None else {"tool_dialect": setup.tool_dialect},
            )
            await asyncio.wait_for(
                transport.connect(config), timeout=self.settings.upstream_connect_timeout_s + 5
            )
        except (TransportError, TimeoutError, OSError) as exc:
            if transport is not None:
                with contextlib.suppress(Exception):
                    await transport.close()
            message = str(exc) or "the upstream did not answer"
            retryable = exc.retryable if isinstance(exc, TransportError) else True
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.UPSTREAM_UNAVAILABLE,
                    message=f"cannot open the {setup.provider} upstream: {message}",
                    retryable=retryable,
                    fatal=True,
                    event_id=event_id,
                ),
                ended=SessionEnded(reason=EndReason.UPSTREAM_FAILED, detail=message),
            ) from None
        await self._refuse_unsupported_mode(transport, setup, event_id)
        budgets: dict[Literal["voice", "text"], ModeBudget] = {
            "voice": self.settings.budget("voice"),
            "text": self.settings.budget("text"),
        }
        runner = ToolRunner(
            self.registry,
            data_dir=self.settings.data_dir,
            audit=self.audit,
            clock=self.clock,
            cache=self.cache,
            budgets=budgets,
            observer=self.metrics,
        )
        session = Session(
            session_id=session_id,
            user=user,
            setup=setup,
            registry=self.registry,
            transport=transport,
            runner=runner,
            budgets=budgets,
            clock=self.clock,
            metrics=self.metrics,
            confirmation_ttl_s=self.settings.confirmation_ttl_s,
            client_events_per_s=self.settings.client_events_per_s,
            client_events_burst=self.settings.client_events_burst,
        )
        session.upstream_ready()
        session.attach(outbound)
        self.sessions[session_id] = session
        self.metrics.active_sessions.inc()
        self._loops[session_id] = (
            asyncio.create_task(session.run_upstream()),
            asyncio.create_task(self._timers(session)),
        )
        return session

    def _announce(self, session: Session, *, resumed: bool) -> None:
        """Send ``session.started`` with a fresh resume token (an older one stops working)."""
        token = secrets.token_urlsafe(24)
        session.resume_token_hash = hash_token(token)
        visible = self.registry.visible_to(session.user.roles, session.profile.enabled)
        session.emit(
            SessionStarted(
                session_id=session.session_id,
                resume_token=token,
                mode=Mode(session.mode),
                provider=Provider(session.provider),
                model=session.profile.model or session.provider,
                registry_version=self.registry.version,
                tools=tuple(
                    ToolInfo(
                        name=s.tool_id,
                        summary=s.summary,
                        category=s.category,
                        requires_confirmation=s.needs_confirmation,
                    )
                    for s in visible
                ),
                audio=AudioFormat(
                    input_rate=session.profile.input_rate, output_rate=session.profile.output_rate
                ),
                resumed=resumed,
                limits=SessionLimits(
                    max_duration_s=self.settings.max_duration_s,
                    idle_timeout_s=self.settings.idle_timeout_s,
                ),
            )
        )

    # -- resume ----------------------------------------------------------------------------------

    async def resume(self, start: SessionStart, user: SessionUser, outbound: Outbound) -> Session:
        """Reattach a session; raises ``StartRefused`` (``resume_failed``).

        A parked session is claimed from the store. A session still attached to a socket that
        looks alive (a half-open connection after a network switch) is taken over when the
        current token matches: the old socket is let go.
        """
        assert start.resume is not None
        self._refuse_while_draining(start)
        session_id = start.resume.session_id
        token_hash = hash_token(start.resume.resume_token)
        session = self._take_over(session_id, token_hash, user)
        if session is None:
            record = await self.store.claim(session_id, token_hash, user.user_id, user.tenant)
            if record is not None:
                session = await self._reattach(record, user, outbound, start.event_id)
        if session is None:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.RESUME_FAILED,
                    message="no resumable session with that id and token (it may have "
                    "expired); send session.start without resume to begin a new one",
                    event_id=start.event_id,
                )
            )
        # The new token's roles apply from now on (its tenant is the session's: checked above).
        session.user = user
        session.attach(outbound)
        self.metrics.resumes.inc()
        self._announce(session, resumed=True)
        return session

    def _take_over(self, session_id: str, token_hash: str, user: SessionUser) -> Session | None:
        session = self.sessions.get(session_id)
        if (
            session is None
            or session_id in self._parked
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

    async def _reattach(
        self, record: ResumeRecord, user: SessionUser, outbound: Outbound, event_id: str | None
    ) -> Session | None:
        session_id = record.session_id
        holder = self._parked.get(session_id)
        local = self.sessions.get(session_id)
        if holder is not None and local is not None:
            if local.ended.is_set() or local.resume_token_hash != record.token_hash:
                return None  # ended meanwhile, or a stale record; the holder cleans up
            del self._parked[session_id]
            holder.cancel()
            return local
        if local is not None:
            return None  # this node still runs it attached elsewhere: not ours to duplicate
        # Parked by another node (shared store): reopen the upstream from the snapshot.
        try:
            return await self._open(session_id, record.snapshot, user, outbound, event_id)
        except StartRefused:
            await self.store.park(record, self.settings.resume_window_s)  # keep it resumable
            raise

    def park(self, session: Session) -> None:
        """The client's socket dropped: keep the session for the resume window, then end it."""
        session.detach()
        record = ResumeRecord(
            session_id=session.session_id,
            user_id=session.user.user_id,
            token_hash=session.resume_token_hash,
            snapshot=session.snapshot(),
            tenant=session.user.tenant,
        )
        self._parked[session.session_id] = asyncio.create_task(self._hold(session, record))

    async def _hold(self, session: Session, record: ResumeRecord) -> None:
        window = self.settings.resume_window_s
        resumed = False
        try:
            await self.store.park(record, window)
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
                if self._parked.get(session.session_id) is asyncio.current_task():
                    del self._parked[session.session_id]
                # Only our own record: another node may have resumed and parked it since.
                with contextlib.suppress(Exception):
                    await self.store.drop(session.session_id, record.token_hash)
                await self.forget(session)

    # -- end -------------------------------------------------------------------------------------

    async def forget(self, session: Session) -> None:
        """The session has ended: unregister it (this object only) and stop its loops once its
        upstream has closed."""
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

    async def _timers(self, session: Session) -> None:
        while not session.ended.is_set():
            await asyncio.sleep(TIMER_TICK_S)
            try:
                await session.tools.expire_due()
                if session.idle_for() > self.settings.idle_timeout_s:
                    await session.end(EndReason.IDLE_TIMEOUT)
                elif session.age() > self.settings.max_duration_s:
                    await session.end(EndReason.MAX_DURATION)
            except Exception:
                _log.exception("session_timer_failed", session_id=session.session_id)

    def _refuse_while_draining(self, start: SessionStart) -> None:
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
        """Refuse new sessions; after the grace period (sooner if every attached session is
        gone) end the rest with reason ``shutdown``, all at once, and wait for their sockets."""
        self.draining = True
        grace = min(self.settings.drain_grace_s, 10)
        deadline = asyncio.get_running_loop().time() + grace
        # Parked sessions cannot come back while draining: no reason to wait for them.
        while any(s.outbound is not None for s in self.sessions.values()):
            self._none_left.clear()
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none_left.wait(), min(remaining, TIMER_TICK_S))
        ending = [
            session.end(EndReason.SHUTDOWN, "the gateway is shutting down")
            for session in list(self.sessions.values())
        ]
        await asyncio.gather(*ending, return_exceptions=True)
        if self.sessions:
            self._none_left.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none_left.wait(), 3)

    async def end_all(self) -> None:
        """The application is being torn down: end every session left (parked ones too) at
        once, so each upstream connection is closed rather than dropped with the event loop."""
        self.draining = True
        ending = [
            session.end(EndReason.SHUTDOWN, "the gateway is shutting down")
            for session in list(self.sessions.values())
        ]
        await asyncio.gather(*ending, return_exceptions=True)


def _spec(registry: Registry, name: str) -> ToolSpec:
    spec = registry.get(name)
    assert spec is not None
    return spec
