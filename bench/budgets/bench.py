"""``scripts/bench budgets``: what budgets cost, with Redis (one ``redis-server``).

Three gateway processes on the same Redis, the same code, differing only in
``GATEWAY_BUDGETS``: ``on`` (every session's user has limits, so each turn reads the counters
and each response is charged and read back in one Lua step, and a price table prices it),
``off``, and ``off_again`` (the A/A row: the same configuration as ``off``, a process of its
own). Repetitions are interleaved (the order turns each repetition).

1. **A charged response** (the OpenAI Realtime fake in this process, tapped): from the moment
   the fake sends ``response.done`` to the moment the client gets the gateway's
   ``response.done`` (both clocks are this process's ``perf_counter``), ``TURNS`` text turns
   of one session (this process is also the fake and the client: one session keeps its loop
   quiet). Target: ``on`` adds at most 0.5 ms to the p99 of ``off``.
2. **Relay CPU** (the fake in echo mode, a subprocess; the Python load generator of
   ``bench.relay``, in the loop ``bench.relay.ab`` shares with ``scripts/bench console``):
   gateway CPU per frame pair (``/proc/<pid>/stat``), 20 ms frames, the measured gateway
   pinned alone to one core. Target: ``on`` within 5 % of ``off``, judged by the median of
   per-repetition ratios beside the A/A ratio (``off_again`` / ``off``).

Results: a table, and ``<out>/budgets.json`` with every repetition.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from bench.relay.ab import RelayLoad, Row, median_of, per_rep, ratios, relay_rows, turning
from bench.relay.procs import (
    ChildProcess,
    collector_paused,
    gateway_env_openai,
    pin_process,
    plan_cores,
    start_fake_upstream,
    start_gateway,
)
from bench.relay.stats import percentile
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.budgets import Limits
from gateway.clock import SystemClock
from gateway.governance.redis import RedisGovernance
from gateway.keys import UserLimits
from gateway.store.redis import RedisStore
from soak.redis_server import RedisServer, redis_path

__all__ = ["main"]

TARGETS = ("on", "off", "off_again")
SESSIONS = 1
TURNS = 100
# A session's control events are rate limited (GATEWAY_CLIENT_EVENTS_PER_S, 20): turns this apart.
TURN_GAP_S = 0.06
PRICES = {"models": {"openai/*": {"input_text": 4.0, "output_text": 16.0, "output_audio": 64.0}}}
# Limits the bench never reaches: every turn and response goes through the whole check.
HIGH = Limits(
    tokens_per_day=1e11, spend_per_day=1e9, minutes_per_day=1e9, concurrent_sessions=10_000
)


def _env(target: str, redis_url: str, upstream: str, prices: Path) -> dict[str, str]:
    return {
        **gateway_env_openai(upstream),
        "GATEWAY_REDIS_URL": redis_url,
        "GATEWAY_REDIS_PREFIX": f"bench-{target}",
        "GATEWAY_BUDGETS": "true" if target == "on" else "false",
        "GATEWAY_PRICE_TABLE": str(prices),
    }


async def _give_limits(redis_url: str) -> None:
    """The anonymous user's limits, on the ``on`` gateway's prefix (the others count nothing)."""
    store = RedisStore.from_url(redis_url, prefix="bench-on", timeout_s=2.0, clock=SystemClock())
    governance = RedisGovernance(store, owns_store=True)
    await governance.put_user_limits(UserLimits("local", HIGH))
    await governance.close()


def _start_gateways(
    upstream: str, redis_url: str, work: Path, children: contextlib.ExitStack, tag: str
) -> dict[str, tuple[ChildProcess, str]]:
    prices = work / "prices.json"
    prices.write_text(json.dumps(PRICES))
    started = {}
    for target in TARGETS:
        data = work / f"{tag}-{target}"
        data.mkdir()
        child, url = start_gateway(
            _env(target, redis_url, upstream, prices), data, work, name=f"gateway-{tag}-{target}"
        )
        children.callback(child.stop)
        started[target] = (child, url)
    return started


# -- 1. a charged response ----------------------------------------------------------------------


async def _turns(url: str, sent_at: Mapping[str, float], gaps: list[float]) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(f"{url}/v1/session") as ws:
        await ws.send_json({"type": "session.start", "mode": "text"})
        while (await ws.receive_json())["type"] != "session.started":
            pass
        for _ in range(TURNS):
            await asyncio.sleep(TURN_GAP_S)
            await ws.send_json({"type": "text.send", "text": "say something"})
            while True:
                message = await ws.receive()
                if message.type != aiohttp.WSMsgType.TEXT:
                    if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                        raise RuntimeError(f"the gateway closed the session: {ws.close_code}")
                    continue
                event = json.loads(message.data)
                if event["type"] == "error":
                    raise RuntimeError(f"the gateway refused a turn: {event}")
                if event["type"] == "response.done":
                    arrived = time.perf_counter()
                    gaps.append(arrived - sent_at[event["response_id"]])
                    break
        await ws.send_json({"type": "session.end"})


async def _responses(reps: int, redis_url: str, work: Path) -> list[dict[str, Any]]:
    sent_at: dict[str, float] = {}

    def tap(_: object, direction: str, message: Mapping[str, Any]) -> None:
        if direction == "out" and message.get("type") == "response.done":
            sent_at[message["response"]["id"]] = time.perf_counter()

    records = []
    async with FakeRealtimeServer(FakeOptions(log_frames=False)) as fake:
        fake.tap = tap
        with contextlib.ExitStack() as children:
            gateways = _start_gateways(fake.ws_url, redis_url, work, children, "responses")
            for rep in range(reps):
                for target in turning(TARGETS, rep):
                    gaps: list[float] = []
                    url = gateways[target][1]
                    with collector_paused():
                        await asyncio.gather(*(_turns(url, sent_at, gaps) for _ in range(SESSIONS)))
                    record = {
                        "part": "response",
                        "rep": rep,
                        "target": target,
                        "responses": len(gaps),
                        "p50_ms": round(percentile(gaps, 50) * 1000, 4),
                        "p99_ms": round(percentile(gaps, 99) * 1000, 4),
                    }
                    records.append(record)
                    print(f"  {record}", file=sys.stderr, flush=True)
    return records


# -- 2. relay CPU -------------------------------------------------------------------------------


async def _relay(
    reps: int, sessions: int, seconds: float, redis_url: str, work: Path
) -> list[dict[str, Any]]:
    cores, _ = plan_cores()
    with contextlib.ExitStack() as children:
        echo, upstream = start_fake_upstream(work)
        children.callback(echo.stop)
        gateways = _start_gateways(upstream, redis_url, work, children, "relay")
        if cores is not None:
            pin_process(echo.pid, cores.load_core)
            for child, _ in gateways.values():
                pin_process(child.pid, cores.relay_core)
        rows = [Row(target, url, child.pid) for target, (child, url) in gateways.items()]
        return await relay_rows(rows, reps, RelayLoad(sessions, seconds))


# -- the verdict --------------------------------------------------------------------------------


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    response = per_rep(records, "response", "p99_ms")
    relay = per_rep(records, "relay", "cpu_us_per_frame")
    added = [rep["on"] - rep["off"] for rep in response.values()]
    added_aa = [rep["off_again"] - rep["off"] for rep in response.values()]
    cpu_ratios = ratios(relay, "on", "off")
    cpu_ratios_aa = ratios(relay, "off_again", "off")
    return {
        "response_p99_ms": {t: median_of(response, t) for t in TARGETS},
        "response_p99_added_ms": {"median": statistics.median(added), "reps": added},
        "response_p99_added_aa_ms": {"median": statistics.median(added_aa), "reps": added_aa},
        "relay_cpu_us_per_frame": {t: median_of(relay, t) for t in TARGETS},
        "relay_cpu_ratio": {"median": statistics.median(cpu_ratios), "reps": cpu_ratios},
        "relay_cpu_ratio_aa": {"median": statistics.median(cpu_ratios_aa), "reps": cpu_ratios_aa},
        "targets": {
            "response_p99_added_ms_at_most": 0.5,
            "relay_cpu_ratio_at_most": 1.05,
        },
    }


def render(summary: Mapping[str, Any]) -> str:
    r, a = summary["response_p99_added_ms"], summary["response_p99_added_aa_ms"]
    c, caa = summary["relay_cpu_ratio"], summary["relay_cpu_ratio_aa"]
    p99, cpu = summary["response_p99_ms"], summary["relay_cpu_us_per_frame"]
    return "\n".join(
        [
            "| measure | on | off | off again | on − off (A/A: off again − off) |",
            "|---|---|---|---|---|",
            f"| upstream response.done → client's, p99 (ms) | {p99['on']:.3f} | {p99['off']:.3f}"
            f" | {p99['off_again']:.3f} | {r['median']:+.3f} ({a['median']:+.3f});"
            f" reps {_list(r['reps'])} ({_list(a['reps'])}) |",
            f"| relay CPU per frame pair (µs) | {cpu['on']:.1f} | {cpu['off']:.1f}"
            f" | {cpu['off_again']:.1f} | ×{c['median']:.3f} (×{caa['median']:.3f});"
            f" reps {_list(c['reps'])} ({_list(caa['reps'])}) |",
        ]
    )


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


def main(reps: int, sessions: int, seconds: float, out_dir: Path) -> int:
    binary = redis_path()
    if binary is None:
        print("budgets bench: needs redis-server (apt-get install redis-server)", file=sys.stderr)
        return 2
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-budgets-") as tmp:
        work = Path(tmp)
        redis = RedisServer(binary, work)
        redis.start()
        try:
            asyncio.run(_give_limits(redis.url))
            records = asyncio.run(_responses(reps, redis.url, work))
            records += asyncio.run(_relay(reps, sessions, seconds, redis.url, work))
        finally:
            redis.stop()
    summary = summarize(records)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {
        "settings": {"reps": reps, "sessions": sessions, "seconds": seconds, "turns": TURNS},
        "runs": records,
        "summary": summary,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    (out_dir / "budgets.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(summary))
    lost = sum(int(r.get("lost", 0)) for r in records)
    return 1 if lost else 0
