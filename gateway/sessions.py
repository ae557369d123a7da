"""The live sessions of one gateway: open, resume, park, time out, drain.

The socket handler (``gateway.server``) owns a client socket; a ``Session`` can outlive it (the
resume window), so its upstream reader and timers are owned here instead.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from gateway.session import Outbound, Session, SessionUser
from gateway.store import ResumeRecord, SessionSnapshot, SessionStore, hash_token
from gateway.toolrun import AuditSink, ModeBudget, ResultCache, ToolRunner
from transports.base import ToolDeclaration, Transport, TransportError, UpstreamConfig

__all__ = ["SessionManager", "StartRefused", "TransportFactory"]

_log = structlog.get_logger("sessions")

TransportFactory = Callable[[str, Settings], Transport]


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

    # -- start -----------------------------------------------------------------------------------

    async def start(self, start: SessionStart, user: SessionUser, outbound: Outbound) -> Session:
        """A new session, announced to the client; raises ``StartRefused``."""
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
        )
        session_id = f"sess_{secrets.token_hex(12)}"
        session = await self._open(session_id, setup, user, outbound, start.event_id)
        self._announce(session, resumed=False)
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
            config = UpstreamConfig(
                mode="voice" if setup.mode == "voice" else "text",
                instructions=_with_tool_list(setup.instructions, visible),
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
            )
            await asyncio.wait_for(transport.connect(config), timeout=15)
        except (TransportError, TimeoutError, OSError) as exc:
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
        if setup.mode not in transport.capabilities.modes:
            await transport.close()
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.FORBIDDEN,
                    message=f"mode: the {setup.provider} provider does not support "
                    f"{setup.mode} sessions",
                    event_id=event_id,
                )
            )
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
        visible = self.registry.visible_to(session.user.roles, session.enabled)
        session.emit(
            SessionStarted(
                session_id=session.session_id,
                resume_token=token,
                mode=Mode(session.mode),
                provider=Provider(session.provider),
                model=session.model or session.provider,
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
                audio=AudioFormat(input_rate=session.input_rate, output_rate=session.output_rate),
                resumed=resumed,
                limits=SessionLimits(
                    max_duration_s=self.settings.max_duration_s,
                    idle_timeout_s=self.settings.idle_timeout_s,
                ),
            )
        )

    # -- resume ----------------------------------------------------------------------------------

    async def resume(self, start: SessionStart, user: SessionUser, outbound: Outbound) -> Session:
        """Reattach a parked session; raises ``StartRefused`` (``resume_failed``)."""
        assert start.resume is not None
        session_id = start.resume.session_id
        record = await self.store.claim(
            session_id, hash_token(start.resume.resume_token), user.user_id
        )
        session: Session | None = None
        if record is not None:
            holder = self._parked.pop(session_id, None)
            if holder is not None:
                holder.cancel()
                session = self.sessions.get(session_id)
                if session is not None and session.ended.is_set():
                    session = None
                if session is not None:
                    session.attach(outbound)
            else:
                # Parked by another node (shared store): reopen the upstream from the snapshot.
                session = await self._open(
                    session_id, record.snapshot, user, outbound, start.event_id
                )
        if session is None:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.RESUME_FAILED,
                    message="no resumable session with that id and token (it may have "
                    "expired); send session.start without resume to begin a new one",
                    event_id=start.event_id,
                )
            )
        self.metrics.resumes.inc()
        self._announce(session, resumed=True)
        return session

    def park(self, session: Session) -> None:
        """The client's socket dropped: keep the session for the resume window, then end it."""
        session.detach()
        record = ResumeRecord(
            session_id=session.session_id,
            user_id=session.user.user_id,
            token_hash=session.resume_token_hash,
            snapshot=session.snapshot(),
        )
        self._parked[session.session_id] = asyncio.create_task(self._hold(session, record))

    async def _hold(self, session: Session, record: ResumeRecord) -> None:
        window = self.settings.resume_window_s
        await self.store.park(record, window)
        try:
            await asyncio.wait_for(session.ended.wait(), timeout=window)
        except TimeoutError:
            await session.end(EndReason.CLIENT, "the client did not come back in time")
        self._parked.pop(session.session_id, None)
        # Only our own record: another node may have resumed and parked the session since.
        await self.store.drop(session.session_id, record.token_hash)
        await self.forget(session)

    # -- end -------------------------------------------------------------------------------------

    async def forget(self, session: Session) -> None:
        """The session has ended: unregister it and stop its loops."""
        if self.sessions.pop(session.session_id, None) is not None:
            self.metrics.active_sessions.dec()
        if not self.sessions:
            self._none_left.set()
        upstream, timers = self._loops.pop(session.session_id, (None, None))
        if timers is not None:
            timers.cancel()
        if upstream is not None and not upstream.done():
            # Give the reader a moment to see the end (the upstream is closing), then stop it.
            _, pending = await asyncio.wait([upstream], timeout=1.0)
            for task in pending:
                task.cancel()

    async def _timers(self, session: Session) -> None:
        while not session.ended.is_set():
            await asyncio.sleep(0.25)
            await session.tools.expire_due()
            if session.idle_for() > self.settings.idle_timeout_s:
                await session.end(EndReason.IDLE_TIMEOUT)
            elif session.age() > self.settings.max_duration_s:
                await session.end(EndReason.MAX_DURATION)

    async def drain(self) -> None:
        """After the grace period (sooner if every session is gone) end the rest with reason
        ``shutdown``, then wait briefly for their sockets to close."""
        if self.sessions:
            self._none_left.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none_left.wait(), min(self.settings.drain_grace_s, 10))
        for session in list(self.sessions.values()):
            await session.end(EndReason.SHUTDOWN, "the gateway is shutting down")
        if self.sessions:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._none_left.wait(), 3)


def _spec(registry: Registry, name: str) -> ToolSpec:
    spec = registry.get(name)
    assert spec is not None
    return spec


def _with_tool_list(instructions: str, visible: list[ToolSpec]) -> str:
    tools = "\n".join(f"- {s.tool_id}: {s.description}" for s in visible)
    return f"{instructions}\n\nTools you may call:\n{tools}" if tools else instructions
