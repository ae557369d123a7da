"""Routing: the operator's model aliases and the order a session tries its targets in
(``aliases``, ``resolve``), when a target counts as stalled (``stall``), a session's upstream
that fails over (``failover``), and the circuit breaker of each target (``breaker``: the pure
rules; ``health``: the ``TargetHealth`` port and ``MemoryTargetHealth``, one node's).
``gateway.routing.health_redis.RedisTargetHealth`` shares the breakers among every node of a
cluster; like the store's Redis, it is imported only when Redis is configured."""

from gateway.routing.aliases import (
    Alias,
    CatalogError,
    ModelCatalog,
    Target,
    catalog_lines,
    load_catalog,
    parse_catalog,
    spread_order,
)
from gateway.routing.breaker import (
    Admission,
    AdmissionKind,
    BreakerPhase,
    BreakerPolicy,
    BreakerState,
    BreakerView,
)
from gateway.routing.health import MemoryTargetHealth, TargetHealth
from gateway.routing.pool import WarmPool
from gateway.routing.resolve import (
    NoSuchModel,
    Route,
    first_target,
    key_allows_alias,
    pick_alias,
    route_of,
)

__all__ = [
    "Admission",
    "AdmissionKind",
    "Alias",
    "BreakerPhase",
    "BreakerPolicy",
    "BreakerState",
    "BreakerView",
    "CatalogError",
    "MemoryTargetHealth",
    "ModelCatalog",
    "NoSuchModel",
    "Route",
    "Target",
    "TargetHealth",
    "WarmPool",
    "catalog_lines",
    "first_target",
    "key_allows_alias",
    "load_catalog",
    "parse_catalog",
    "pick_alias",
    "route_of",
    "spread_order",
]
