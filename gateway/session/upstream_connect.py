"""Opening a session's upstream: the configuration a target is given (the session's setup in
the provider's terms: instructions, tools, history, audio), and the connection itself, target
after target of the session's route until one answers (``connect_route``).

A target the breaker holds open is skipped; a target that cannot be opened (refused, timed
out, an HTTP error at the handshake, a mode it does not serve) is counted against it and the
next one is tried. Only when none answers is the start refused."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from gateway.config import Settings
from gateway.protocol import ClientToolDeclaration, EndReason, ErrorCode, ErrorEvent, SessionEnded
from gateway.providers import PROVIDERS
from gateway.registry import Registry
from gateway.routing import Route, Target
from gateway.routing.health import TargetHealth
from gateway.routing.pool import WarmPool
from gateway.session.client_tools import model_declarations
from gateway.session.refusals import StartRefused
from gateway.session.session import SessionUser
from gateway.session.snapshot import Profile
from gateway.store import SessionSnapshot
from transports.base import (
    AudioEncoding,
    ConversationItem,
    Prewarm,
    ToolDeclaration,
    Transport,
    TransportError,
    UpstreamConfig,
)

__all__ = [
    "BREAKER_SKIP",
    "ConnectFailed",
    "Connected",
    "TransportFactory",
    "connect_route",
    "connect_target",
    "on_target",
    "serves_mode",
    "start_refused",
    "unanswered_tail",
    "upstream_config",
]

_log = structlog.get_logger("session.upstream_connect")

TransportFactory = Callable[[str, Settings], Transport]
BREAKER_SKIP = "skipped: its breaker is open"
# A phone call's G.711 law, as the transports name it (the snapshot keeps a plain string);
# anything else is PCM16.
_G711_ENCODINGS: dict[str, AudioEncoding] = {"pcmu": "pcmu", "pcma": "pcma"}


class ConnectFailed(Exception):
    """No target of the route could be opened: ``reasons`` per target, in the order tried."""

    def __init__(
        self, reasons: list[tuple[Target, str]], *, retryable: bool, mode_refused: bool
    ) -> None:
        super().__init__("; ".join(f"{t.key}: {why}" for t, why in reasons))
        self.reasons = reasons
        self.retryable = retryable
        # The one target tried does not serve the session's mode: the client asked for it.
        self.mode_refused = mode_refused


class ModeRefused(TransportError):
    """The provider does not serve the session's mode (voice or text)."""


@dataclass(frozen=True, slots=True)
class Connected:
    transport: Transport
    target: Target
    setup: SessionSnapshot  # the setup on that target (its provider, model and voice)
    skipped: tuple[tuple[Target, str], ...]  # the targets tried before it, and why each failed


def unanswered_tail(
    history: tuple[ConversationItem, ...],
) -> tuple[tuple[ConversationItem, ...], tuple[str, ...]]:
    """The history without the user's last messages that no reply followed, and those."""
    end = len(history)
    while end and history[end - 1].role == "user":
        end -= 1
    return history[:end], tuple(item.text for item in history[end:])


def on_target(setup: SessionSnapshot, target: Target) -> SessionSnapshot:
    return dataclasses.replace(
        setup, provider=target.provider, model=target.model, voice=target.voice
    )


def upstream_config(
    setup: SessionSnapshot,
    user: SessionUser,
    session_id: str,
    registry: Registry,
    client_tools: tuple[ClientToolDeclaration, ...],
) -> UpstreamConfig:
    """What the upstream of ``setup.provider`` is opened with: the session as it is now."""
    enabled = None if setup.enabled_tools is None else list(setup.enabled_tools)
    visible = registry.visible_to(user.roles, enabled)
    profile = Profile.of(setup)  # its turn detection and tool choice, as the upstream takes them
    return UpstreamConfig(
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
        client_encoding=_G711_ENCODINGS.get(setup.audio_encoding, "pcm16"),
        model=setup.model,
        voice=setup.voice,
        locale=setup.locale,
        session_id=session_id,
        history=setup.history,
        turn_detection=profile.turn_detection,
        tool_choice=profile.tool_choice,
        options={} if setup.tool_dialect is None else {"tool_dialect": setup.tool_dialect},
    )


async def connect_target(
    transports: TransportFactory,
    settings: Settings,
    config: UpstreamConfig,
    target: Target,
    pool: WarmPool | None = None,
) -> Transport:
    """One target's upstream, connected (on a connection the pool opened ahead, when it has
    one); ``TransportError`` (or ``TimeoutError``, ``OSError``) when it cannot be, with
    nothing left open."""
    transport: Transport | None = None
    warm = None if pool is None else pool.take(target)
    try:
        transport = transports(target.provider, settings)
        if config.mode not in transport.capabilities.modes:
            raise _mode_refused(target.provider, config.mode, transport.capabilities.modes)
        connecting = (
            transport.connect_warm(config, warm)
            if warm is not None and isinstance(transport, Prewarm)
            else transport.connect(config)
        )
        warm = None  # the transport has it now (and closes it if it does not use it)
        await asyncio.wait_for(connecting, timeout=settings.upstream_connect_timeout_s + 5)
        # A transport may only know its capabilities once connected.
        if config.mode not in transport.capabilities.modes:
            raise _mode_refused(target.provider, config.mode, transport.capabilities.modes)
    except BaseException:
        if warm is not None:
            await warm.close()
        if transport is not None:
            with contextlib.suppress(Exception):
                await transport.close()
        raise
    return transport


def _mode_refused(provider: str, mode: str, modes: frozenset[str]) -> TransportError:
    return ModeRefused(
        f"the {provider} provider does not support {mode} sessions "
        f"(it supports {', '.join(sorted(modes))})"
    )


def serves_mode(target: Target, mode: str) -> bool:
    record = PROVIDERS.get(target.provider)
    return record is not None and mode in record.modes


async def connect_route(
    route: Route,
    setup: SessionSnapshot,
    configure: Callable[[SessionSnapshot], UpstreamConfig],
    *,
    transports: TransportFactory,
    settings: Settings,
    health: TargetHealth | None,
    pool: WarmPool | None = None,
) -> Connected:
    """The first target of ``route`` that the breaker lets through and that answers."""
    skipped: list[tuple[Target, str]] = []
    retryable = mode_refused = False
    candidates = [t for t in route.targets if serves_mode(t, setup.mode)] or [route.targets[0]]
    for target in candidates:
        if health is not None and route.fails_over:
            admission = await health.admit(target.key)
            if not admission.allowed:
                skipped.append((target, BREAKER_SKIP))
                retryable = True
                continue
        attempt = on_target(setup, target)
        try:
            transport = await connect_target(transports, settings, configure(attempt), target, pool)
        except (TransportError, TimeoutError, OSError) as exc:
            reason = str(exc) or "the upstream did not answer"
            retryable = retryable or not isinstance(exc, TransportError) or exc.retryable
            mode_refused = isinstance(exc, ModeRefused)
            skipped.append((target, reason))
            if health is not None:
                await health.failure(target.key, "connect")
            _log.info("upstream_target_failed", target=target.key, reason=reason[:200])
            continue
        if health is not None:
            await health.success(target.key)
        return Connected(transport, target, attempt, tuple(skipped))
    raise ConnectFailed(
        skipped, retryable=retryable, mode_refused=mode_refused and len(skipped) == 1
    )


def start_refused(
    failed: ConnectFailed, setup: SessionSnapshot, event_id: str | None
) -> StartRefused:
    """The refusal a client hears when no target answered: each target and why."""
    if failed.mode_refused:
        message = f"mode: {failed.reasons[0][1]}"
        return StartRefused(
            ErrorEvent(code=ErrorCode.FORBIDDEN, message=message, event_id=event_id)
        )
    if len(failed.reasons) == 1:
        target, detail = failed.reasons[0][0], failed.reasons[0][1]
        message = f"cannot open the {target.provider} upstream: {detail}"
    else:
        detail = str(failed)
        message = f"cannot open any upstream of model {setup.alias!r}: {detail}"
    return StartRefused(
        ErrorEvent(
            code=ErrorCode.UPSTREAM_UNAVAILABLE,
            message=message,
            retryable=failed.retryable,
            fatal=True,
            event_id=event_id,
        ),
        ended=SessionEnded(reason=EndReason.UPSTREAM_FAILED, detail=detail),
    )
