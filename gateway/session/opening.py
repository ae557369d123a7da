"""Opening a session: a ``Session`` on a connected upstream (the first target of its route that
answers: ``upstream_connect``), wired with its runner and its standing in the store. What
``session.start`` asks for is checked before (``start_setup``). Raises ``StartRefused``."""

from __future__ import annotations

import dataclasses
import time
from typing import Protocol

import structlog

from gateway.config import Settings
from gateway.observability import Tracing
from gateway.protocol import ClientToolDeclaration, ProtocolError
from gateway.routing import Target, route_of
from gateway.routing.failover import Opened, RoutedTransport
from gateway.session.client_tools import ClientToolBook
from gateway.session.ownership import Ownership
from gateway.session.parts import SessionParts
from gateway.session.refusals import StartRefused
from gateway.session.replacement import record_failover
from gateway.session.session import Session, SessionKeeper, SessionUser
from gateway.session.tool_batch import confirmation_key_ttl_s
from gateway.session.trace import SessionTrace
from gateway.session.upstream_connect import (
    BREAKER_SKIP,
    ConnectFailed,
    TransportFactory,
    connect_route,
    connect_target,
    on_target,
    serves_mode,
    start_refused,
    unanswered_tail,
    upstream_config,
)
from gateway.store import SessionRecord, SessionSnapshot, SessionStore
from gateway.toolrun import (
    AuditRecord,
    AuditSink,
    ResultCache,
    ToolRunner,
    UsageRecord,
)
from gateway.usage import SessionUsage
from transports.base import UpstreamConfig

__all__ = [
    "SessionNode",
    "open_session",
    "stored_client_tools",
]

_log = structlog.get_logger("session.opening")


class _CountingAudit:
    """The session's runner writes exactly one audit record per call the model made, with
    the outcome the model received: the session's usage counts them there."""

    __slots__ = ("_inner", "_usage")

    def __init__(self, inner: AuditSink, usage: SessionUsage) -> None:
        self._inner = inner
        self._usage = usage

    def record(self, record: AuditRecord) -> None:
        self._usage.add_tool_call(record.outcome)
        self._inner.record(record)

    def session_usage(self, record: UsageRecord) -> None:
        self._inner.session_usage(record)


def stored_client_tools(
    setup: SessionSnapshot, session_id: str
) -> tuple[ClientToolDeclaration, ...]:
    """The declarations a snapshot holds; one a newer gateway's rules refuse is left out (the
    session goes on without it) rather than failing the resume."""
    tools: list[ClientToolDeclaration] = []
    for stored in setup.client_tools:
        try:
            tools.append(ClientToolDeclaration(**dict(stored)))
        except (ProtocolError, TypeError) as problem:
            _log.warning(
                "client_tool_dropped_on_restore",
                session_id=session_id,
                tool=str(stored.get("name", "?"))[:64],
                problem=type(problem).__name__,
            )
    return tuple(tools)


class SessionNode(SessionKeeper, Protocol):
    """What opening a session needs of the node that will keep it (the session manager)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def parts(self) -> SessionParts: ...

    @property
    def transports(self) -> TransportFactory: ...

    @property
    def cache(self) -> ResultCache: ...

    @property
    def store(self) -> SessionStore: ...

    @property
    def node_id(self) -> str: ...

    @property
    def tracing(self) -> Tracing | None: ...


async def open_session(
    node: SessionNode,
    session_id: str,
    setup: SessionSnapshot,
    user: SessionUser,
    event_id: str | None,
    *,
    epoch: int,
) -> Session:
    """Connect the upstream and build the session (not attached, no loops yet). The tools its
    client declared are in ``setup`` (checked by ``session_setup`` when it began; a resume on
    any node offers them again)."""
    settings, parts, tracing = node.settings, node.parts, node.tracing
    registry, clock = parts.registry, parts.clock
    client_tools = stored_client_tools(setup, session_id)
    trace = None
    if tracing is not None:
        trace = SessionTrace(
            tracing,
            session_id=session_id,
            provider=setup.provider,
            mode=setup.mode,
            epoch=epoch,
        )
    connecting_ns = time.time_ns()
    catalog = parts.catalog
    route = route_of(
        None if catalog is None or setup.alias is None else catalog.get(setup.alias),
        session_id=session_id,
        current=Target(setup.provider, setup.model, setup.voice),
    )

    def configure(on: SessionSnapshot) -> UpstreamConfig:
        return upstream_config(on, user, session_id, registry, client_tools)

    try:
        try:
            connected = await connect_route(
                route,
                setup,
                configure,
                transports=node.transports,
                settings=settings,
                health=parts.health,
                pool=parts.pool,
            )
        except ConnectFailed as failed:
            raise start_refused(failed, setup, event_id) from None
    except BaseException as failure:
        if trace is not None:  # refused (a mode the provider lacks) or the upstream failed
            trace.ended(
                "refused"
                if isinstance(failure, StartRefused) and failure.ended is None
                else "upstream_failed"
            )
        raise
    setup, transport = connected.setup, connected.transport
    if connected.skipped:  # started on a later target: a failover before the first word
        first, why = connected.skipped[0][0].key, connected.skipped[0][1]
        reason = "breaker_open" if why.startswith(BREAKER_SKIP) else "connect"
        record_failover(parts.metrics, trace, session_id, first, connected.target.key, reason)
    if route.fails_over:

        async def open_target(target: Target) -> Opened:
            history, unanswered = unanswered_tail(session.snapshot().history)
            now = dataclasses.replace(session.snapshot(), history=history)
            config = configure(on_target(now, target))
            return Opened(
                await connect_target(node.transports, settings, config, target, parts.pool),
                unanswered,
                manual_turns=session.profile.turn_detection.manual,
            )

        transport = RoutedTransport(
            transport,
            connected.target,
            route,
            mode=setup.mode,
            open_target=open_target,
            health=parts.health,
            clock=clock,
            first_output_s=(
                settings.first_output_voice_s
                if setup.mode == "voice"
                else settings.first_output_text_s
            ),
            gap_s=settings.output_gap_s,
            serves_mode=lambda target: serves_mode(target, session.profile.mode),
        )
    if trace is not None:
        trace.upstream_connected(connecting_ns, provider=setup.provider)
    usage = SessionUsage()
    runner = ToolRunner(
        registry,
        data_dir=settings.data_dir,
        audit=_CountingAudit(parts.audit, usage),
        clock=clock,
        cache=node.cache,
        budgets=parts.budgets,
        observer=parts.metrics,
        tracing=tracing,
    )
    session = Session(
        parts,
        session_id=session_id,
        user=user,
        setup=setup,
        transport=transport,
        runner=runner,
        ownership=Ownership(
            node.store,
            session_id=session_id,
            node=node.node_id,
            epoch=epoch,
            record_ttl_s=settings.max_duration_s + settings.resume_window_s,
        ),
        keeper=node,
        client_tools=ClientToolBook(client_tools, settings.client_tool_timeout_s),
        usage=usage,
        trace=trace,
    )
    session.upstream_ready()

    def record() -> SessionRecord:
        """What the store should hold of it, were it lost (a store that restarted empty)."""
        return SessionRecord(
            session_id=session_id,
            user_id=session.user.user_id,
            tenant=session.user.tenant,
            token_hash=session.resume_token_hash,
            owner=node.node_id,
            epoch=session.ownership.epoch,
            state="parked" if session.outbound is None else "live",
            snapshot=session.snapshot(),
            saved_at=clock.now().timestamp(),
        )

    def open_confirmations() -> list[tuple[str, float]]:
        """Each open confirmation, and how long its key must live in the store."""
        now = clock.now()
        return [
            (pending.confirmation_id, confirmation_key_ttl_s(pending.expires_at, now))
            for pending in session.conversation.book.pending()
        ]

    session.ownership.record_of = record
    session.ownership.confirmations_of = open_confirmations
    return session
