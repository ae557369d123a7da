"""The one composition root: settings → logging → registry → runner pieces → server.

Everything is wired here explicitly; transports are an explicit mapping, never registered by
import side effects.
"""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import Callable, Mapping
from importlib.metadata import version as package_version
from typing import Any

import structlog
from aiohttp import web
from threadpoolctl import threadpool_limits

from gateway.admin.routes import AdminRoutes
from gateway.admin.service import KeyAdmin
from gateway.admission import Admission
from gateway.audio.resample import design_resamplers
from gateway.clock import Clock, SystemClock
from gateway.config import Settings, is_loopback
from gateway.console.service import Console
from gateway.errors import ConfigError
from gateway.governance import Governance, SqliteGovernance
from gateway.governance.credentials import KeyAuthority
from gateway.governance.revocations import RevocationWatch
from gateway.node import NodeRuntime, new_node_id
from gateway.observability import Metrics, Tracing, configure_logging, tracing_from_environment
from gateway.protocol import ALLOWED_SAMPLE_RATES
from gateway.providers import PROVIDERS, configured_models, make_transport, warm_up_upstreams
from gateway.registry import Registry, load_registry
from gateway.routing import ModelCatalog, Target, load_catalog
from gateway.routing.breaker import BreakerPolicy
from gateway.routing.health import MemoryTargetHealth, TargetHealth
from gateway.routing.pool import WarmPool
from gateway.server import GatewayServer
from gateway.session.manager import SessionManager, TransportFactory
from gateway.store import MemoryStore, SessionStore, StoreUnavailable
from gateway.toolrun import AuditSink, ResultCache, StructlogAuditSink

__all__ = ["build_server", "run"]
from transports.base import Prewarm, TransportError, WarmUpstream

_log = structlog.get_logger("app")


def build_server(
    settings: Settings,
    *,
    registry: Registry | None = None,
    transports: TransportFactory = make_transport,
    audit: AuditSink | None = None,
    store: SessionStore | None = None,
    tracing: Tracing | None = None,
    clock: Clock | None = None,
    governance: Governance | None = None,
) -> GatewayServer:
    """The whole gateway; tests and benchmarks swap in their registry, transports, sinks,
    clock (budget windows follow its UTC day) and key store. ``tracing``: None, tracing off
    (``gateway serve`` reads the ``OTEL_*`` variables)."""
    registry = registry if registry is not None else load_registry(settings.registry_path())
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    clock = clock if clock is not None else SystemClock()
    metrics = Metrics(
        tool_ids=(spec.tool_id for spec in registry.tools()),
        models=configured_models(settings),
        teams=settings.metrics_teams,
    )
    store = store if store is not None else build_store(settings, clock, metrics.store_error)
    governance = governance if governance is not None else build_governance(settings, store)
    keys = KeyAuthority(governance, clock)
    catalog = None if settings.models is None else load_catalog(settings.models, PROVIDERS.names())
    health = None if catalog is None else build_health(settings, store, clock)
    node_id = new_node_id(settings.node_id)
    console = build_console(settings, store, node_id) if settings.admin else None
    manager = SessionManager(
        settings=settings,
        registry=registry,
        transports=transports,
        metrics=metrics,
        audit=audit if audit is not None else StructlogAuditSink(),
        clock=clock,
        cache=ResultCache(clock),
        store=store,
        node_id=node_id,
        tracing=tracing,
        counters=governance if settings.budgets else None,
        keys=keys,
        catalog=catalog,
        health=health,
        pool=build_pool(settings, catalog, transports, clock, health, metrics),
        observer=console,
    )
    admission = Admission(
        settings,
        clock=clock,
        sessions_open=lambda: len(manager.sessions),
        store=store,
        keys=keys,
        counters=governance if settings.budgets else None,
    )
    drain_asked = asyncio.Event()  # by the console, from any node

    def on_message(message: Mapping[str, Any]) -> None:
        if message.get("type") == "drain":
            drain_asked.set()
        else:
            manager.on_message(message)

    node = NodeRuntime(
        node_id,
        store,
        lease_ttl_s=settings.lease_ttl_s,
        metrics=metrics,
        on_message=on_message,
        on_paused=manager.verify_ownership,
        on_store_back=manager.reassert_all,
    )
    admin = KeyAdmin(governance, clock, registry.tool_ids())
    return GatewayServer(
        settings=settings,
        registry=registry,
        metrics=metrics,
        manager=manager,
        admission=admission,
        node=node,
        governance=governance,
        admin=AdminRoutes(settings, admission, admin, clock) if settings.admin else None,
        revocations=RevocationWatch(governance, clock, manager.end_key_sessions),
        console=console,
        drain_asked=drain_asked,
    )


def build_console(settings: Settings, store: SessionStore, node_id: str) -> Console:
    """The operator's console (with the admin API): its views beside the sessions on Redis,
    else in this process."""
    from gateway.console.store import ConsoleStore, MemoryConsole

    views: ConsoleStore = MemoryConsole(node_id)
    if store.shared:
        from gateway.console.store import RedisConsole
        from gateway.store.redis import RedisStore

        if isinstance(store, RedisStore):
            views = RedisConsole(store)
    return Console(
        views,
        node_id=node_id,
        version=package_version("realtime-gateway"),
        transcripts=settings.console_transcripts,
        trace_url=settings.console_trace_url,
    )


def build_pool(
    settings: Settings,
    catalog: ModelCatalog | None,
    transports: TransportFactory,
    clock: Clock,
    health: TargetHealth | None,
    metrics: Metrics,
) -> WarmPool | None:
    """Warm connections for the targets that keep some (``GATEWAY_POOL_SIZE``, or a target's
    own ``pool`` in the alias file) and whose provider can open one ahead (``Prewarm``); the
    aliases' targets, or without aliases the default provider. None: nothing to keep."""
    targets = (
        [Target(settings.provider)]
        if catalog is None
        else list({t.key: t for a in catalog.aliases.values() for t in a.targets}.values())
    )
    wanted = [
        (target, settings.pool_size if target.pool is None else target.pool) for target in targets
    ]
    sizes = [
        (target, size)
        for target, size in wanted
        if size and _prewarms(transports, target, settings)
    ]
    if not any(size for _, size in sizes):
        return None

    async def open_warm(target: Target) -> WarmUpstream:
        transport = transports(target.provider, settings)
        assert isinstance(transport, Prewarm)
        return await transport.open_warm(target.model)

    def key_of(target: Target) -> str:
        """The provider and the model it will really be asked for."""
        record = PROVIDERS.get(target.provider)
        configured = None if record is None else record.default_models(settings).get("voice")
        return f"{target.provider}/{target.model or configured or '*'}"

    return WarmPool(
        sizes,
        idle_s=settings.pool_idle_s,
        open_warm=open_warm,
        clock=clock,
        health=health,
        key_of=key_of,
        on_take=lambda key, taken: metrics.pool_takes.labels(key, str(taken).lower()).inc(),
    )


def _prewarms(transports: TransportFactory, target: Target, settings: Settings) -> bool:
    """The target's provider can open a connection ahead (and is configured: its key set)."""
    try:
        return isinstance(transports(target.provider, settings), Prewarm)
    except TransportError:
        return False


def build_health(settings: Settings, store: SessionStore, clock: Clock) -> TargetHealth:
    """The breakers of the aliases' targets: on Redis beside the sessions (every node sees
    the same), else in this process."""
    policy = BreakerPolicy(
        failures=settings.breaker_failures,
        window_s=settings.breaker_window_s,
        cooldown_s=settings.breaker_cooldown_s,
        half_open_probes=settings.breaker_probes,
    )
    if store.shared:
        from gateway.routing.health_redis import RedisTargetHealth
        from gateway.store.redis import RedisStore

        if isinstance(store, RedisStore):
            return RedisTargetHealth(
                store.client,
                policy,
                clock,
                settings.redis_prefix,
                timeout_s=settings.store_timeout_s,
            )
    return MemoryTargetHealth(policy, clock)


def build_governance(settings: Settings, store: SessionStore) -> Governance:
    """Keys and budget counters: beside the sessions on Redis, else in SQLite under
    ``GATEWAY_DATA_DIR`` (they survive a restart)."""
    if store.shared:
        from gateway.governance.redis import RedisGovernance
        from gateway.store.redis import RedisStore

        if isinstance(store, RedisStore):
            return RedisGovernance(store)
    return SqliteGovernance.in_folder(settings.data_dir)


def build_store(
    settings: Settings, clock: Clock, on_error: Callable[[str], None] = lambda op: None
) -> SessionStore:
    """Redis when ``GATEWAY_REDIS_URL`` is set (imported only then), else in memory;
    ``on_error`` hears of every operation the store failed (by name)."""
    if settings.redis_url is None:
        return MemoryStore(clock)
    from gateway.store.redis import RedisStore

    return RedisStore.from_url(
        settings.redis_url.get_secret_value(),
        prefix=settings.redis_prefix,
        timeout_s=settings.store_timeout_s,
        clock=clock,
        on_error=on_error,
        max_connections=settings.redis_max_connections,
        idle_s=settings.redis_idle_s,
    )


async def serve(
    settings: Settings, tracing: Tracing | None = None, clock: Clock | None = None
) -> None:
    """``gateway serve``; ``clock``: a test's (None: the system's)."""
    # The resampler's matrix products are small: BLAS threads only add hand-offs between
    # cores (twice the CPU per chunk, measured pinned) to a process that is one event loop.
    threadpool_limits(limits=1, user_api="blas")
    # The resamplers' matrices from the shipped designs, before serving, not in a session's start.
    design_resamplers(ALLOWED_SAMPLE_RATES)
    server = build_server(settings, tracing=tracing, clock=clock)
    # Sessions are ended by drain(); what is left (sockets that never started) gets little time.
    runner = server.runner()
    try:
        await runner.setup()  # joins the cluster: raises StoreUnavailable when Redis is not there
    except StoreUnavailable:
        await server.manager.store.close()
        raise
    reuse_port = settings.reuse_port or None  # workers of one supervisor share their ports
    site = web.TCPSite(runner, settings.host, settings.port, reuse_port=reuse_port)
    await site.start()
    metrics_runner = None
    if settings.metrics_port is not None:
        metrics_runner = server.runner(server.metrics_app())
        await metrics_runner.setup()
        metrics_host = settings.metrics_host or settings.host
        await web.TCPSite(
            metrics_runner, metrics_host, settings.metrics_port, reuse_port=reuse_port
        ).start()
        _log.info("metrics_listening", host=metrics_host, port=settings.metrics_port)
    warn_about_exposure(settings)
    warm_up_upstreams(settings)
    tune_gc()
    _log.info(
        "gateway_listening",
        loop=type(asyncio.get_running_loop()).__module__.split(".")[0],
        host=settings.host,
        port=settings.port,
        provider=settings.provider,
        auth=settings.auth,
        registry=server.registry.version,
        tools=len(server.registry),
        node=server.manager.node_id,
        store="redis" if server.manager.store.shared else "memory",
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # SIGTERM, or the console's drain button (on any node).
    waits = [asyncio.create_task(stop.wait()), asyncio.create_task(server.drain_asked.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for wait in waits:
        wait.cancel()
    _log.info("gateway_draining")
    try:
        # The grace, then a phone call's last sentence and the calls running for moved sessions.
        await asyncio.wait_for(server.drain(), timeout=settings.drain_limit_s())
    finally:
        await runner.cleanup()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        if isinstance(server.manager.audit, StructlogAuditSink):
            server.manager.audit.flush()  # records of the last moments are kept too
        if tracing is not None:
            tracing.shutdown()  # the spans still in the batch are exported
    _log.info("gateway_stopped")


def warn_about_exposure(settings: Settings) -> None:
    """Say at start-up what is open that an operator may not expect."""
    if settings.auth == "jwt" and not settings.allowed_origins:
        _log.warning(
            "any_origin_accepted",
            detail="GATEWAY_ALLOWED_ORIGINS is not set: a page of any origin may connect "
            "with a valid token",
        )
    if settings.auth == "none":
        _log.warning(
            "auth_disabled",
            detail="GATEWAY_AUTH=none: only pages of this machine and localhost Host names "
            "are accepted",
            anonymous_roles=list(settings.anonymous_roles),
        )
    if settings.metrics_token is None and settings.metrics_port is None:
        _log.info(
            "metrics_open",
            detail="/metrics is served to anyone who reaches the port; set "
            "GATEWAY_METRICS_TOKEN or GATEWAY_METRICS_PORT to restrict it",
        )


def tune_gc() -> None:
    """Shorter pauses of the cyclic collector: what exists once the server listens (modules,
    SDKs, the registry: ~75k objects) lives as long as the process, so it is frozen and full
    collections no longer scan it (``scripts/bench capacity`` saw such a collection pause
    the loop for 40-60 ms at 200 sessions; what remains is the sessions' own objects)."""
    gc.collect()
    gc.freeze()


def run() -> int:
    settings = Settings.load()
    try:
        tracing = tracing_from_environment(capture_content=settings.trace_content)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    configure_logging(settings.log_format, settings.log_level, trace_ids=tracing is not None)
    if settings.auth == "none" and not is_loopback(settings.host):  # also checked by Settings
        raise SystemExit("GATEWAY_AUTH=none is only allowed on a loopback address")
    if settings.worker_count() > 1:
        from gateway.workers import supervise

        return supervise(settings)
    with asyncio.Runner(loop_factory=event_loop_factory(settings.event_loop)) as runner:
        runner.run(serve(settings, tracing))
    return 0


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop (libuv, I/O callbacks in C: the relay's CPU per frame drops by about a
    tenth) where it is installed, else asyncio's; ``asyncio`` asks for asyncio's."""
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:  # e.g. Windows, where the dependency is not installed
            _log.warning("uvloop_unavailable", fallback="asyncio")
            return None
        return uvloop.new_event_loop
    return None
