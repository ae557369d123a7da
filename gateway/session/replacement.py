"""What a session does when another upstream of its route takes over (``UpstreamReplaced``,
from ``gateway.routing.failover``): it follows the new target (its provider, model and voice
in the profile, so usage and snapshots name it), converts audio for the new provider's rates
and encoding from the next frame on, and tells the client, the audit trail, the metrics and
the trace."""

from __future__ import annotations

from typing import Protocol

import structlog

from gateway.observability import Metrics
from gateway.protocol import ProviderChanged, ServerEvent
from gateway.session.snapshot import Profile
from gateway.session.trace import SessionTrace
from gateway.toolrun.audit import AUDIT_LOGGER
from transports import events as up
from transports.base import Capabilities, Transport

__all__ = ["ReplacementHost", "follow_replacement", "record_failover"]

_audit = structlog.get_logger(AUDIT_LOGGER)


class ReplacementHost(Protocol):
    session_id: str
    profile: Profile
    metrics: Metrics
    trace: SessionTrace | None

    def emit(self, event: ServerEvent) -> None: ...

    def converters_for(self, capabilities: Capabilities) -> None: ...

    def boundary(self) -> None: ...


def follow_replacement(
    host: ReplacementHost, event: up.UpstreamReplaced, transport: Transport
) -> None:
    profile = host.profile
    profile.provider, profile.model, profile.voice = event.provider, event.model, event.voice
    host.converters_for(transport.capabilities)
    adopt = getattr(transport, "adopt", None)
    if adopt is not None:
        adopt()  # the session's audio is in the new provider's format from now
    target = f"{event.provider}/{event.model or '*'}"
    record_failover(host.metrics, host.trace, host.session_id, event.previous, target, event.reason)
    host.emit(
        ProviderChanged(
            provider=event.provider,
            model=event.model,
            reason=event.reason,
            previous=event.previous,
        )
    )
    host.boundary()


def record_failover(
    metrics: Metrics,
    trace: SessionTrace | None,
    session_id: str,
    previous: str,
    target: str,
    reason: str,
) -> None:
    """A failover, for the operator: counted by target and reason, audited, and a span."""
    metrics.failovers.labels(previous, target, reason).inc()
    _audit.info(
        "upstream_failover", session_id=session_id, previous=previous, target=target, reason=reason
    )
    if trace is not None:
        trace.upstream_replaced(previous, target, reason)
