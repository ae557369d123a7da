"""``scripts/bench console``: what the operator console's live updates cost the relay.

Two gateway nodes (``bench-a``, ``bench-b``) on one ``redis-server``, the same code and the same
settings as a console needs them: ``GATEWAY_ADMIN=true`` (each node publishes its live
sessions' summaries to Redis once a second, and every session's control events go through the
console's observer), JWT auth with a secret the bench holds, the OpenAI fake in echo mode as
the upstream (a subprocess). The relay load (``bench.relay.ab``: ``sessions`` sessions of 20 ms
frames for ``seconds``, the Python load generator of ``bench.relay``, a user JWT) always goes to
``bench-a``, pinned alone to one core; ``bench-b``, the fake and Redis are on the other core.
Three rows, interleaved, the order turning each repetition:

- ``console``: an operator's console open on each node while the load runs
  (``bench.console.clients``: ``/admin/v1/console/stream`` read from ``bench-a`` and from
  ``bench-b``, and one timeline a second of a live session of ``bench-a``, asked of ``bench-a``);
- ``none``: no console client;
- ``none_again``: the A/A row, no console client, ``bench-a`` measured again. The rows differ by
  what runs beside the same process, not by configuration, so the fair A/A is that process
  again, not another one (which would add two processes' difference the comparison has not).

What the observer and the publications cost is in every row (they run whenever the admin API
is on); what ``console`` adds is the streams, the directory each reads once a second, and the
timeline polls. Target: ``console`` within 5 % of ``none`` in relay CPU per frame pair, judged
by the median of per-repetition ratios beside the A/A ratios (``none_again`` ÷ ``none``); each
``console`` run must have heard from every node's stream at least every 1.5 s.

Results: a table, and ``<out>/console.json`` with every run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from bench.console.clients import LIVE_GAP_S, consoles
from bench.relay.ab import RelayLoad, Report, Row, median_of, per_rep, ratios, relay_rows
from bench.relay.procs import (
    ChildProcess,
    gateway_env_openai,
    pin_process,
    plan_cores,
    start_fake_upstream,
)
from bench.setup.procs import start_gateway_with_auth
from gateway.security import TokenAuthority
from soak.redis_server import RedisServer, redis_path

__all__ = ["ConsolePlan", "main", "render", "summarize"]

ROWS = ("console", "none", "none_again")
NODES = ("bench-a", "bench-b")
MEASURED = NODES[0]
TARGET_RATIO = 1.05
TOKEN_TTL_S = 6 * 3600.0


@dataclasses.dataclass(frozen=True)
class ConsolePlan:
    reps: int = 5
    sessions: int = 50
    seconds: float = 30.0

    @classmethod
    def quick(cls) -> ConsolePlan:
        return cls(reps=1, sessions=10, seconds=5.0)


def _env(upstream: str, redis_url: str, secret: str, node: str) -> dict[str, str]:
    return {
        **gateway_env_openai(upstream),
        "GATEWAY_AUTH": "jwt",
        "GATEWAY_AUTH_SECRET": secret,
        "GATEWAY_ADMIN": "true",
        "GATEWAY_REDIS_URL": redis_url,
        "GATEWAY_REDIS_PREFIX": "bench-console",
        "GATEWAY_NODE_ID": node,
        # the bench's clients send no Origin: listed only to keep the log quiet
        "GATEWAY_ALLOWED_ORIGINS": "http://localhost",
    }


async def _relay(plan: ConsolePlan, redis: RedisServer, work: Path) -> dict[str, Any]:
    secret = secrets.token_urlsafe(48)
    authority = TokenAuthority(secret, max_lifetime_s=TOKEN_TTL_S)
    now = time.time()
    user = authority.mint_user("bench-load", now=now, ttl_s=TOKEN_TTL_S)
    admin = authority.mint_user("ops", now=now, ttl_s=TOKEN_TTL_S, roles=("admin",))
    cores, why = plan_cores()
    with contextlib.ExitStack() as children:
        echo, upstream = start_fake_upstream(work)
        children.callback(echo.stop)
        nodes: dict[str, tuple[ChildProcess, str]] = {}
        for node in NODES:
            data = work / node
            data.mkdir()
            child, url = start_gateway_with_auth(
                _env(upstream, redis.url, secret, node), data, work, f"gateway-{node}"
            )
            children.callback(child.stop)
            nodes[node] = (child, url)
        if cores is not None:
            pin_process(nodes[MEASURED][0].pid, cores.relay_core)
            others = [echo.pid, nodes[NODES[1]][0].pid]
            if redis.process is not None:
                others.append(redis.process.pid)
            for pid in others:
                pin_process(pid, cores.load_core)
        urls = {node: url for node, (_, url) in nodes.items()}

        def beside() -> AbstractAsyncContextManager[Report]:
            return consoles(urls, MEASURED, admin)

        child, url = nodes[MEASURED]
        rows = [
            Row("console", url, child.pid, beside),
            Row("none", url, child.pid),
            Row("none_again", url, child.pid),
        ]
        records = await relay_rows(
            rows, plan.reps, RelayLoad(plan.sessions, plan.seconds, bearer=user)
        )
        for node_child, _ in nodes.values():
            node_child.ensure_alive()
    pinned = (
        {"measured_core": cores.relay_core, "others_core": cores.load_core}
        if cores is not None
        else {"pinned": why}
    )
    return {"records": records, "cores": pinned}


# -- the verdict --------------------------------------------------------------------------------


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    cpu = per_rep(records, "relay", "cpu_us_per_frame")
    p99 = per_rep(records, "relay", "p99_ms")
    cpu_ratios, cpu_aa = ratios(cpu, "console", "none"), ratios(cpu, "none_again", "none")
    p99_ratios, p99_aa = ratios(p99, "console", "none"), ratios(p99, "none_again", "none")
    heard = [r["console"] for r in records if r["target"] == "console"]
    streams: dict[str, dict[str, float]] = {}
    for node in NODES:
        runs = [h["streams"][node] for h in heard]
        streams[node] = {
            "events_min": min(r["events"] for r in runs),
            "per_s_min": min(r["per_s"] for r in runs),
            "longest_gap_s_max": max(r["longest_gap_s"] for r in runs),
        }
    ratio = statistics.median(cpu_ratios)
    live = all(h["live"] for h in heard)
    return {
        "relay_cpu_us_per_frame": {row: median_of(cpu, row) for row in ROWS},
        "p99_ms": {row: median_of(p99, row) for row in ROWS},
        "relay_cpu_ratio": {"median": ratio, "reps": cpu_ratios},
        "relay_cpu_ratio_aa": {"median": statistics.median(cpu_aa), "reps": cpu_aa},
        "p99_ratio": {"median": statistics.median(p99_ratios), "reps": p99_ratios},
        "p99_ratio_aa": {"median": statistics.median(p99_aa), "reps": p99_aa},
        "console_streams": streams,
        "timeline_polls_200_min": min(h["timeline_polls_200"] for h in heard),
        "sessions_listed_max": max(h["sessions_listed_max"] for h in heard),
        "console_live": live,
        "target": {"relay_cpu_ratio_at_most": TARGET_RATIO, "longest_gap_s_at_most": LIVE_GAP_S},
        "met": live and ratio <= TARGET_RATIO,
    }


def render(summary: Mapping[str, Any]) -> str:
    c, caa = summary["relay_cpu_ratio"], summary["relay_cpu_ratio_aa"]
    p, paa = summary["p99_ratio"], summary["p99_ratio_aa"]
    cpu, p99 = summary["relay_cpu_us_per_frame"], summary["p99_ms"]
    lines = [
        "| measure | console | none | none again | console ÷ none, median (A/A: none again ÷ none)"
        "; per repetition |",
        "|---|---|---|---|---|",
        f"| relay CPU per frame pair (µs) | {cpu['console']:.1f} | {cpu['none']:.1f}"
        f" | {cpu['none_again']:.1f} | ×{c['median']:.3f} (×{caa['median']:.3f});"
        f" {_list(c['reps'])} ({_list(caa['reps'])}) |",
        f"| round trip p99 (ms) | {p99['console']:.2f} | {p99['none']:.2f}"
        f" | {p99['none_again']:.2f} | ×{p['median']:.3f} (×{paa['median']:.3f});"
        f" {_list(p['reps'])} ({_list(paa['reps'])}) |",
        "",
        "| console stream of | events in a run, fewest | per second, lowest | longest gap, s |",
        "|---|---|---|---|",
    ]
    for node, s in summary["console_streams"].items():
        lines.append(
            f"| {node} | {s['events_min']} | {s['per_s_min']:.2f} | {s['longest_gap_s_max']:.2f} |"
        )
    verdict = "met" if summary["met"] else "NOT met"
    lines += [
        "",
        f"timeline polls answered per run, fewest: {summary['timeline_polls_200_min']}; "
        f"sessions of {MEASURED} listed: up to {summary['sessions_listed_max']}; "
        f"consoles live in every run: {'yes' if summary['console_live'] else 'NO'}",
        f"target: console ÷ none ≤ ×{TARGET_RATIO:.2f} (median of repetitions): {verdict}",
    ]
    return "\n".join(lines)


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


def _commit() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return found.stdout.strip() or None
    return None


def main(out_dir: Path, plan: ConsolePlan) -> int:
    binary = redis_path()
    if binary is None:
        print("console bench: needs redis-server (apt-get install redis-server)", file=sys.stderr)
        return 2
    began, load_before = time.monotonic(), os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        work = Path(tmp)
        redis = RedisServer(binary, work)
        redis.start()
        try:
            run = asyncio.run(_relay(plan, redis, work))
        finally:
            redis.stop()
    records = run["records"]
    summary = summarize(records)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {
        "settings": {**dataclasses.asdict(plan), "nodes": list(NODES), "measured": MEASURED},
        "commit": _commit(),
        "cores": run["cores"],
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "runs": records,
        "summary": summary,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    (out_dir / "console.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(summary))
    lost = sum(int(r.get("lost", 0)) for r in records)
    return 1 if lost or not summary["console_live"] else 0
