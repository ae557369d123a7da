"""What every session of a node is built with: ``SessionParts``, made once (the session manager,
from the settings and the node's collaborators) and handed to each ``Session``. What belongs to
one session (its ids, user, setup, upstream, runner, standing in the store) is passed on its
own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.clock import Clock
from gateway.config import Settings
from gateway.governance import BudgetCounters
from gateway.observability import Metrics
from gateway.protocol import ServerEvent
from gateway.registry import Registry
from gateway.routing import ModelCatalog
from gateway.routing.health import TargetHealth
from gateway.routing.pool import WarmPool
from gateway.session.holding_policy import NO_HOLDING, HoldingPolicy
from gateway.toolrun import DEFAULT_BUDGETS, AuditSink, Mode, ModeBudget
from gateway.usage import PriceTable

__all__ = ["SessionObserver", "SessionParts"]


class SessionObserver(Protocol):
    """Hears each event a session sends its client (never its audio): the operator's console."""

    def event(self, session: Any, event: ServerEvent) -> None: ...


@dataclass(frozen=True, slots=True)
class SessionParts:
    registry: Registry
    clock: Clock
    metrics: Metrics
    # The audit: a session's runner records each call there, the session its usage at the end.
    audit: AuditSink
    budgets: Mapping[Mode, ModeBudget] = field(default_factory=lambda: dict(DEFAULT_BUDGETS))
    confirmation_ttl_s: float = 120.0
    # The client's control events: sustained rate and burst (``ratelimit.TokenBucket``).
    client_events_per_s: float = 20.0
    client_events_burst: int = 60
    holding: HoldingPolicy = NO_HOLDING
    prices: PriceTable | None = None
    # Where sessions charge their budgets (None: nothing is counted).
    counters: BudgetCounters | None = None
    # The operator's model aliases (None: each session has the one provider it asks for), and
    # the health of their targets, shared by the nodes when the store is.
    catalog: ModelCatalog | None = None
    health: TargetHealth | None = None
    # Connections opened ahead for the targets that keep some (None: none are).
    pool: WarmPool | None = None
    observer: SessionObserver | None = None

    @classmethod
    def of(
        cls,
        settings: Settings,
        *,
        registry: Registry,
        clock: Clock,
        metrics: Metrics,
        audit: AuditSink,
        counters: BudgetCounters | None = None,
        catalog: ModelCatalog | None = None,
        health: TargetHealth | None = None,
        pool: WarmPool | None = None,
        observer: SessionObserver | None = None,
    ) -> SessionParts:
        """The parts ``settings`` configure; the operator's price table read once, here."""
        path = settings.price_table
        return cls(
            registry=registry,
            clock=clock,
            metrics=metrics,
            audit=audit,
            budgets={"voice": settings.budget("voice"), "text": settings.budget("text")},
            confirmation_ttl_s=settings.confirmation_ttl_s,
            client_events_per_s=settings.client_events_per_s,
            client_events_burst=settings.client_events_burst,
            holding=HoldingPolicy(settings.holding_cue, settings.holding_line),
            prices=None if path is None else PriceTable.load(path),
            counters=counters,
            catalog=catalog,
            health=health,
            pool=pool,
            observer=observer,
        )
