"""One soak run from start to report: the fleet up, the monitor, the load, the faults; then the
wind-down (every session ends), the cleanup check, the fleet down, the logs read, the
invariants checked, and the report written. Returns the report; its ``violations`` decide the
exit status."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

from soak import faults
from soak.cleanup import check_cleanup
from soak.config import SoakConfig
from soak.context import SoakLogs
from soak.driver import Driver
from soak.failovers import GatewayFailover, applications, check_failovers, parse_node_log
from soak.fleet import Fleet
from soak.invariants import Violation, check_latency, check_sessions, check_tools
from soak.logscan import scan_log
from soak.monitor import Monitor
from soak.nodes import NodeDirectory
from soak.records import Clock
from soak.report import write_report
from soak.resources import growth_rows
from soak.schedule import (
    SERVER_WIDE,
    plan_fleet_faults,
    plan_session_faults,
    schedule_report,
    stream,
)

__all__ = ["run_soak"]

WIND_DOWN_S = 90.0  # sessions finish their turn and end within this, or are given up
# How long a fleet fault weighs on every session: a drain, the restart, the moved sessions
# resumed on the other node; Redis down, then every node recording its sessions again.
FLEET_FAULT_SPAN_S = {"sigterm_restart": 15.0, "redis_restart": 10.0}


def _driver_log(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    return handler


def _journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def run_soak(config: SoakConfig) -> dict[str, Any]:
    folder = config.out / "run"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    handler = _driver_log(folder / "driver.log")
    fleet = Fleet(folder)
    try:
        await fleet.start(0.0)
        return await _soak(config, fleet, folder)
    finally:
        await fleet.stop(0.0)
        logging.getLogger().removeHandler(handler)
        handler.close()


async def _soak(config: SoakConfig, fleet: Fleet, folder: Path) -> dict[str, Any]:
    clock = Clock()
    logs = SoakLogs()
    # Every choice draws from a stream of the seed's (soak.schedule); sessions pick nodes from
    # their own, this directory's is never drawn from.
    directory = NodeDirectory([n.node for n in fleet.nodes.values()], stream(config.seed, "nodes"))
    monitor = Monitor(
        clock,
        fleet.pids,
        lambda: {name: n.node.url for name, n in fleet.nodes.items()},
        fleet.pool_ports,
        config.sample_every_s,
    )
    monitor.sample_now()
    baseline_fds = {s.role: s.fds for s in monitor.samples}
    monitor.start()
    driver = Driver(directory, clock, config.seed, logs)
    plan = plan_fleet_faults(
        config.calm_end_s, config.duration_s, config.restart_every_s, config.redis_restart
    )
    planned = plan_session_faults(
        config.seed, config.calm_end_s, config.duration_s, config.fault_rate, config.sessions
    )
    load = asyncio.create_task(driver.run(config.sessions, config.ramp_s), name="load")
    fault_tasks = [
        asyncio.create_task(
            faults.session_faults(
                planned, config.sessions, driver.live_sessions, fleet, logs, clock
            ),
            name="session-faults",
        ),
        asyncio.create_task(faults.fleet_faults(plan, fleet, logs, clock), name="fleet-faults"),
    ]
    cpu_start = time.process_time()
    await asyncio.sleep(max(0.0, config.duration_s - clock.now()))
    driver.stopping.set()
    load_end = clock.now()
    stuck = False
    try:
        await asyncio.wait_for(asyncio.shield(load), WIND_DOWN_S)
    except TimeoutError:
        stuck = True
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
    for task in fault_tasks:  # a restart under way finishes (bounded by its own waits)
        if task.get_name() == "session-faults":
            task.cancel()
    await asyncio.gather(*fault_tasks, return_exceptions=True)
    wind_down_s = clock.now() - load_end
    driver_cpu_s = time.process_time() - cpu_start
    monitor.sample_now()
    await monitor.stop()
    tally = await fleet.control("/tally")
    applied = applications(await fleet.applied(), clock.origin)
    cleanup = await check_cleanup(fleet, baseline_fds)
    stopped = await fleet.stop(clock.now())

    violations: list[Violation] = []
    if stuck:
        violations.append(
            Violation(
                "session_end", f"sessions still running {WIND_DOWN_S:g} s after the load stopped"
            )
        )
    tool_violations, tools_summary = check_tools(_journal(fleet.journal), tally, driver.records)
    session_violations, sessions_summary = check_sessions(driver.records)
    fleet_windows = [
        (entry.at, entry.at + FLEET_FAULT_SPAN_S[entry.kind])
        for entry in logs.faults
        if entry.kind in FLEET_FAULT_SPAN_S
    ]
    latency_violations, latency_rows = check_latency(
        logs.latencies,
        driver.records,
        config.calm_end_s,
        calm_from=config.calm_from_s,
        fleet_windows=fleet_windows,
    )
    gateway_failovers: list[GatewayFailover] = []
    calls: dict[str, str] = {}
    for role, path in fleet.logs():
        if role.startswith("node-"):
            found, node_calls = parse_node_log(path.read_text(errors="replace"), clock.wall_origin)
            gateway_failovers += found
            calls.update(node_calls)
    requested = Counter(e.kind for e in logs.faults if e.kind in SERVER_WIDE and e.ok)
    failover_violations, failovers = check_failovers(
        applied, driver.records, gateway_failovers, calls, requested
    )
    growth_violations, growth = growth_rows(
        monitor.samples,
        monitor.node_sessions,
        config.growth_from_s,
        load_end,
        config.growth_min_span_s,
    )
    findings = [
        scan_log(role, path.read_text(errors="replace"), json_lines=role.startswith("node-"))
        for role, path in [*fleet.logs(), ("driver", folder / "driver.log")]
    ]
    log_violations = [
        Violation(
            "logs",
            f"{f.source}: {f.traceback_count} tracebacks, {f.not_json_count} "
            f"lines not JSON, {len(f.suspicious)} asyncio complaints",
        )
        for f in findings
        if not f.clean
    ]
    for incarnation in stopped:
        if incarnation.exit_code != 0:
            violations.append(
                Violation("cleanup", f"a node exited {incarnation.exit_code} at the end")
            )
    violations += (
        tool_violations
        + session_violations
        + failover_violations
        + latency_violations
        + growth_violations
        + log_violations
        + cleanup.violations
    )
    fault_log = [entry.as_dict() for entry in sorted(logs.faults, key=lambda e: e.at)]
    report = {
        "config": {
            "minutes": config.minutes,
            "sessions": config.sessions,
            "fault_rate_per_min": config.fault_rate,
            "calm_from_s": config.calm_from_s,
            "calm_end_s": config.calm_end_s,
            "restart_every_s": config.restart_every_s,
            "redis_restart": config.redis_restart,
            "seed": config.seed,
        },
        "timeline": {
            "load_end_s": round(load_end, 1),
            "wind_down_s": round(wind_down_s, 1),
            "restarts": [{"at_s": round(at, 1), "node": name} for at, name in plan.restarts],
            "redis_restart_at_s": None if plan.redis_at is None else round(plan.redis_at, 1),
        },
        "sessions": sessions_summary,
        "tools": tools_summary,
        "faults": fault_log,
        "failovers": failovers,
        "schedule": schedule_report(config.seed, plan, planned, logs.hits, fault_log),
        "latency": latency_rows,
        "latency_samples": [
            [s.kind, s.provider, round(s.sent_at, 2), round(s.ms, 1), s.session]
            for s in logs.latencies
        ],
        "resources": growth,
        "driver": {
            "cpu_s": round(driver_cpu_s, 1),
            "cpu_share_of_a_core": round(driver_cpu_s / max(load_end, 1e-9), 3),
            "loop_lag_p99_ms": _p99(monitor.loop_lag_ms),
        },
        "cleanup": {"nodes": cleanup.nodes, "driver": cleanup.driver},
        "nodes": {
            name: [
                {
                    "pid": i.pid,
                    "started_s": round(i.started_at, 1),
                    "exit_code": i.exit_code,
                    "stop_s": None if i.stop_s is None else round(i.stop_s, 1),
                }
                for i in node.incarnations
            ]
            for name, node in fleet.nodes.items()
        },
        "logs": [f.as_dict() for f in findings],
        "violations": [v.as_dict() for v in violations],
    }
    write_report(report, monitor, config)
    return report


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1)
