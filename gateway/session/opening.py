"""Opening a session: what ``session.start`` asks for (checked), and a ``Session`` on a connected
upstream, wired with its runner and its standing in the store. Raises ``StartRefused``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Protocol

import structlog

from gateway.config import Settings
from gateway.observability import Tracing
from gateway.protocol import (
    ClientToolDeclaration,
    EndReason,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    SessionEnded,
    SessionStart,
    tool_choice_wire,
    turn_detection_wire,
)
from gateway.registry import Registry
from gateway.session.client_tools import ClientToolBook, declarations_problem, model_declarations
from gateway.session.ownership import Ownership
from gateway.session.parts import SessionParts
from gateway.session.refusals import StartRefused
from gateway.session.session import Session, SessionKeeper, SessionUser
from gateway.session.snapshot import Profile
from gateway.session.tool_batch import confirmation_key_ttl_s
from gateway.session.tool_choice import offered_tools, tool_choice_problem
from gateway.session.trace import SessionTrace
from gateway.store import SessionRecord, SessionSnapshot, SessionStore
from gateway.toolrun import (
    AuditRecord,
    AuditSink,
    ResultCache,
    ToolRunner,
    UsageRecord,
)
from gateway.usage import SessionUsage
from transports.base import ToolDeclaration, Transport, TransportError, UpstreamConfig

__all__ = [
    "SessionNode",
    "key_allows_model",
    "key_limits_checked",
    "open_session",
    "session_setup",
    "stored_client_tools",
    "tool_choice_checked",
]

_log = structlog.get_logger("session.opening")

TransportFactory = Callable[[str, Settings], Transport]


def session_setup(
    start: SessionStart, user: SessionUser, registry: Registry, settings: Settings
) -> SessionSnapshot:
    """A new session's setup from ``session.start``, its tools checked against the registry
    and the user's roles (and the tools its client declared: ``client_tools_checked``)."""
    client_tools_checked(start, user, registry, settings)
    tool_choice_checked(start, user, registry, settings)
    key_limits_checked(start, user, settings)
    if start.tools is not None:
        unknown = [name for name in start.tools if registry.get(name) is None]
        if unknown:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.INVALID_EVENT,
                    message=f"tools: no tool named {', '.join(map(repr, unknown))}",
                    event_id=start.event_id,
                )
            )
        roles = frozenset(user.roles)
        denied = [
            name
            for name in start.tools
            if (spec := registry.get(name)) is not None and not spec.allowed_for(roles)
        ]
        if denied:
            names = ", ".join(map(repr, denied))
            raise _forbidden(f"tools: not allowed for this user: {names}", start)
    return SessionSnapshot(
        provider=start.provider or settings.provider,
        mode=start.mode.value,
        input_rate=start.audio.input_rate,
        output_rate=start.audio.output_rate,
        enabled_tools=user.tools if start.tools is None else tuple(start.tools),
        instructions=start.instructions or settings.default_instructions,
        model=start.model,
        voice=start.voice,
        locale=start.locale,
        tool_dialect=None if start.tool_dialect is None else str(start.tool_dialect),
        audio_encoding=start.audio.encoding,
        client_tools=tuple(tool.to_dict() for tool in start.client_tools),
        turn_detection=(
            None if start.turn_detection is None else turn_detection_wire(start.turn_detection)
        ),
        tool_choice=None if start.tool_choice is None else tool_choice_wire(start.tool_choice),
    )


def key_limits_checked(start: SessionStart, user: SessionUser, settings: Settings) -> None:
    """A gateway key names the models and tools it may use (None: any model, the tools its
    roles allow): anything else is refused, naming it."""
    provider = start.provider or settings.provider
    model = start.model or provider
    if user.models is not None and not key_allows_model(user.models, provider, model):
        allowed = ", ".join(map(repr, user.models)) or "no model"
        raise _forbidden(f"model: this key may not use {model!r}; it may use {allowed}", start)
    if user.tools is not None and start.tools is not None:
        denied = [name for name in start.tools if name not in user.tools]
        if denied:
            raise _forbidden(f"tools: this key may not use {', '.join(map(repr, denied))}", start)


def _forbidden(message: str, start: SessionStart) -> StartRefused:
    return StartRefused(
        ErrorEvent(code=ErrorCode.FORBIDDEN, message=message, event_id=start.event_id)
    )


def key_allows_model(allowed: tuple[str, ...], provider: str, model: str) -> bool:
    """``model``, ``provider/model`` or ``provider/*`` on the key's list."""
    return bool({model, f"{provider}/{model}", f"{provider}/*"} & set(allowed))


def tool_choice_checked(
    start: SessionStart, user: SessionUser, registry: Registry, settings: Settings
) -> None:
    """A ``tool_choice`` the session can apply (``tool_choice_problem``)."""
    if start.tool_choice is None:
        return
    declared = (tool.to_dict() for tool in start.client_tools)
    offered = offered_tools(registry, user.roles, start.tools, declared)
    provider = start.provider or settings.provider
    dialect = None if start.tool_dialect is None else str(start.tool_dialect)
    problem = tool_choice_problem(start.tool_choice, offered, provider, dialect)
    if problem is not None:
        raise StartRefused(
            ErrorEvent(
                code=ErrorCode.INVALID_EVENT,
                message=f"session.start: {problem}",
                event_id=start.event_id,
            )
        )


def client_tools_checked(
    start: SessionStart, user: SessionUser, registry: Registry, settings: Settings
) -> None:
    """No tool the client declared takes the name of a registry tool this user may use (the
    model could not tell them apart), and each schema is one the upstream can take."""
    provider = start.provider or settings.provider
    visible = (spec.tool_id for spec in registry.visible_to(user.roles))
    problem = declarations_problem(start.client_tools, visible, provider)
    if problem is not None:
        raise StartRefused(
            ErrorEvent(
                code=ErrorCode.INVALID_EVENT,
                message=f"session.start: '{problem.at('client_tools')}' {problem.message}",
                event_id=start.event_id,
            )
        )


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


async def _connect(
    setup: SessionSnapshot,
    user: SessionUser,
    session_id: str,
    event_id: str | None,
    settings: Settings,
    registry: Registry,
    transports: TransportFactory,
    client_tools: tuple[ClientToolDeclaration, ...],
) -> Transport:
    enabled = None if setup.enabled_tools is None else list(setup.enabled_tools)
    visible = registry.visible_to(user.roles, enabled)
    profile = Profile.of(setup)  # its turn detection and tool choice, as the upstream takes them
    transport: Transport | None = None
    try:
        transport = transports(setup.provider, settings)
        # Checked before connecting (no upstream opened for nothing) and after (a transport
        # may only know its capabilities once connected).
        await _refuse_unsupported_mode(transport, setup, event_id)
        config = UpstreamConfig(
            mode="voice" if setup.mode == "voice" else "text",
            instructions=registry.model_instructions(setup.instructions, user.roles, enabled),
            tools=[
                *(
                    ToolDeclaration(s.tool_id, s.description, s.provider_schemas, s.background)
                    for s in visible
                ),
                *model_declarations(client_tools),
            ],
            client_input_rate=setup.input_rate,
            client_output_rate=setup.output_rate,
            client_encoding="pcmu" if setup.audio_encoding == "pcmu" else "pcm16",
            model=setup.model,
            voice=setup.voice,
            locale=setup.locale,
            session_id=session_id,
            history=setup.history,
            turn_detection=profile.turn_detection,
            tool_choice=profile.tool_choice,
            options={} if setup.tool_dialect is None else {"tool_dialect": setup.tool_dialect},
        )
        await asyncio.wait_for(
            transport.connect(config), timeout=settings.upstream_connect_timeout_s + 5
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
    await _refuse_unsupported_mode(transport, setup, event_id)
    return transport


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
    try:
        transport = await _connect(
            setup, user, session_id, event_id, settings, registry, node.transports, client_tools
        )
    except BaseException as failure:
        if trace is not None:  # refused (a mode the provider lacks) or the upstream failed
            trace.ended("refused" if isinstance(failure, StartRefused) else "upstream_failed")
        raise
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
