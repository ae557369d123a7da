"""``scripts/bench scale``: what sharing sessions through Redis costs, and what a second worker
gives, side by side in one run, every gateway on the OpenAI fake (echo mode).

1. Session setup: connect → ``session.started`` (text), one session after another, the memory
   store against Redis in alternating blocks; p50/p99. Nothing pinned (one client at a time).
2. Resume: a text session with one answered turn on node A, its socket closed, then resumed
   from an open socket, on node B (another process on the same Redis) and for reference on A:
   ``session.start`` with ``resume`` → the first event; p50/p99.
3. Relay CPU per frame pair at 100 sessions × 50 frames/s, Redis off (``gateway``) and on
   (``gateway_redis``): the relay suite's runs, pinned as it pins them (the gateway alone on one
   core, everything else on the other).
4. Saturation: one worker against ``--workers 2``, both on Redis, at rising session counts
   (every level for both, alternating order; latency added over ``direct`` at the same level),
   with *nothing pinned*: on a 2-core machine the Go load generator, the fake and Redis share
   the cores with the workers, so this is what this machine carries, not what two cores of
   gateway would.

Results: tables on stdout, ``<out>/scale.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.relay.procs import gateway_env_openai, start_fake_upstream, start_gateway, start_redis
from bench.suite.capacity import CapacityPlan
from bench.suite.relay import LoadLevel, RelayPlan, run_relay
from bench.suite.report import cell, markdown_table
from bench.suite.session import machine_info, open_suite, write_json
from bench.suite.stats import latest

__all__ = ["ScalePlan", "main"]


@dataclass(frozen=True)
class ScalePlan:
    setups: int = 400  # per store
    block: int = 25  # setups in a row on one store before switching
    resumes: int = 150  # per place (other node, same node)
    relay_reps: int = 5
    relay_seconds: float = 8.0
    relay_sessions: int = 100
    levels: tuple[int, ...] = (50, 100, 200, 300, 400)
    level_seconds: float = 5.0

    @classmethod
    def quick(cls) -> ScalePlan:
        return cls(
            setups=40,
            block=10,
            resumes=20,
            relay_reps=1,
            relay_seconds=3.0,
            relay_sessions=20,
            levels=(10, 20),
            level_seconds=3.0,
        )


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"n": len(ordered), "p50": at(0.5), "p99": at(0.99), "max": round(ordered[-1], 3)}


async def _first_event(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    while True:
        msg = await ws.receive(timeout=10)
        if msg.type == aiohttp.WSMsgType.TEXT:
            event: dict[str, Any] = orjson.loads(msg.data)
            return event
        if msg.type != aiohttp.WSMsgType.BINARY:
            raise RuntimeError(f"the socket closed: {msg.type}")


async def _until(ws: aiohttp.ClientWebSocketResponse, kind: str) -> dict[str, Any]:
    while True:
        event = await _first_event(ws)
        if event["type"] == kind:
            return event
        if event["type"] == "error":
            raise RuntimeError(f"{event['code']}: {event['message']}")


async def _end(ws: aiohttp.ClientWebSocketResponse) -> None:
    with contextlib.suppress(Exception):
        await ws.send_str('{"type":"session.end"}')
        await _until(ws, "session.ended")
    await ws.close()


async def _setup_ms(http: aiohttp.ClientSession, url: str) -> float:
    began = time.perf_counter()
    ws = await http.ws_connect(url)
    await ws.send_str('{"type":"session.start","mode":"text"}')
    started = await _first_event(ws)
    took = (time.perf_counter() - began) * 1000
    if started["type"] != "session.started":
        raise RuntimeError(f"session.start refused: {started}")
    await _end(ws)
    return took


async def measure_setup(urls: dict[str, str], plan: ScalePlan) -> dict[str, Any]:
    samples: dict[str, list[float]] = {name: [] for name in urls}
    async with aiohttp.ClientSession() as http:
        for url in urls.values():  # warm-up: imports, first upstream connections
            for _ in range(5):
                await _setup_ms(http, url)
        rounds = 0
        while min(len(v) for v in samples.values()) < plan.setups:
            order = list(urls) if rounds % 2 == 0 else list(urls)[::-1]
            for name in order:
                for _ in range(min(plan.block, plan.setups - len(samples[name]))):
                    samples[name].append(await _setup_ms(http, urls[name]))
            rounds += 1
    return {name: percentiles(values) for name, values in samples.items()}


async def _resume_ms(http: aiohttp.ClientSession, first: str, then: str) -> float:
    ws = await http.ws_connect(first)
    await ws.send_str('{"type":"session.start","mode":"text"}')
    started = await _until(ws, "session.started")
    await ws.send_str('{"type":"text.send","text":"remember the blue door"}')
    await _until(ws, "response.done")
    await ws.close()  # no session.end: the session waits for a resume
    again = await http.ws_connect(then)
    resume = {"session_id": started["session_id"], "resume_token": started["resume_token"]}
    start = orjson.dumps({"type": "session.start", "mode": "text", "resume": resume})
    began = time.perf_counter()
    await again.send_str(start.decode())
    answer = await _first_event(again)
    took = (time.perf_counter() - began) * 1000
    if answer["type"] != "session.started" or not answer.get("resumed"):
        raise RuntimeError(f"the resume failed: {answer}")
    await _end(again)
    return took


async def measure_resume(a: str, b: str, plan: ScalePlan) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"other node": [], "same node": []}
    async with aiohttp.ClientSession() as http:
        for _ in range(5):
            await _resume_ms(http, a, b)
        for index in range(plan.resumes * 2):
            place = "other node" if index % 2 == 0 else "same node"
            samples[place].append(await _resume_ms(http, a, b if place == "other node" else a))
    return {place: percentiles(values) for place, values in samples.items()}


def run_latency_parts(out: Path, plan: ScalePlan) -> dict[str, Any]:
    """Parts 1 and 2: their own processes (fake, Redis, a memory gateway, two Redis nodes)."""
    log_dir = out / "logs-scale"
    log_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        fake, fake_url = start_fake_upstream(log_dir)
        stack.callback(fake.stop)
        redis, redis_url = start_redis(log_dir)
        stack.callback(redis.stop)
        urls: dict[str, str] = {}
        for name, extra in (
            ("memory", {}),
            ("redis", {"GATEWAY_REDIS_URL": redis_url, "GATEWAY_NODE_ID": "node-a"}),
            ("redis_b", {"GATEWAY_REDIS_URL": redis_url, "GATEWAY_NODE_ID": "node-b"}),
        ):
            data = log_dir / f"{name}-data"
            data.mkdir(exist_ok=True)
            env = {**gateway_env_openai(fake_url), **extra}
            child, http_url = start_gateway(env, data, log_dir, name=f"gateway-{name}")
            stack.callback(child.stop)
            urls[name] = http_url.replace("http://", "ws://", 1) + "/v1/session"
        print("scale: session setup, memory store against Redis…", flush=True)
        setup = asyncio.run(measure_setup({k: urls[k] for k in ("memory", "redis")}, plan))
        print("scale: resume on another node…", flush=True)
        resume = asyncio.run(measure_resume(urls["redis"], urls["redis_b"], plan))
    return {"setup_ms": setup, "resume_ms": resume}


def run_scale(root: Path, out: Path, plan: ScalePlan) -> dict[str, Any]:
    began = time.monotonic()
    report: dict[str, Any] = {"plan": asdict(plan)}
    report |= run_latency_parts(out, plan)
    relay_plan = RelayPlan(
        targets=("direct", "gateway", "gateway_redis"),
        reps=plan.relay_reps,
        rounds=300,
        warmup=50,
        loads=(LoadLevel(plan.relay_sessions, plan.relay_seconds),),
    )
    with open_suite(root, out, list(relay_plan.targets)) as suite:
        relay = run_relay(suite, relay_plan)
    report["relay"] = {"machine": relay["machine"], "summary": relay["summary"]["load"]}
    sweep = CapacityPlan(
        targets=("direct", "gateway_redis", "gateway_w2"),
        levels=plan.levels,
        seconds=plan.level_seconds,
    )
    runs = [sweep.run(t, n) for n in plan.levels for t in sweep.targets]
    with open_suite(root, out, list(sweep.targets), pin=False) as suite:
        suite.runner.plan(runs)
        suite.total += len(runs)
        records: list[dict[str, Any]] = []
        for index, sessions in enumerate(plan.levels):
            racing = ["gateway_redis", "gateway_w2"]
            for target in ["direct", *(racing if index % 2 == 0 else racing[::-1])]:
                records += suite.measure(sweep.run(target, sessions))
        machine = machine_info(suite.fleet)
    report["workers"] = {"machine": machine, "levels": sweep_rows(records, plan.levels)}
    report["elapsed_s"] = round(time.monotonic() - began, 1)
    return report


def sweep_rows(records: list[dict[str, Any]], levels: tuple[int, ...]) -> list[dict[str, Any]]:
    """Per level and worker count: p50/p99 added over ``direct`` at that level, frames lost."""
    current = latest(records)
    rows = []
    for sessions in levels:
        at = {r["target"]: r for r in current if int(r["sessions"]) == sessions}
        direct = at.get("direct", {})
        for target in ("gateway_redis", "gateway_w2"):
            record = at.get(target)
            if record is None:
                continue
            row: dict[str, Any] = {"sessions": sessions, "target": target}
            for key in ("p50_ms", "p99_ms"):
                mine, base = record.get(key), direct.get(key)
                row[f"added_{key}"] = None if mine is None or base is None else mine - base
            row["lost"] = int(record.get("lost", 0)) + int(record.get("connect_failed", 0))
            row["sent"] = int(record.get("sent", 0))
            row["cpu_us_per_frame"] = record.get("relay_cpu_us_per_frame")
            rows.append(row)
    return rows


def _ms(stats: dict[str, float]) -> tuple[str, str]:
    return f"{stats['p50']:.2f}", f"{stats['p99']:.2f}"


def render(report: dict[str, Any]) -> str:
    setup, resume = report["setup_ms"], report["resume_ms"]
    added = setup["redis"]["p50"] - setup["memory"]["p50"]
    parts = [
        "**Session setup** (connect → session.started, text, OpenAI fake), one at a time\n\n"
        + markdown_table(
            ["store", "sessions", "p50 ms", "p99 ms"],
            [[name, str(s["n"]), *_ms(s)] for name, s in setup.items()],
        )
        + f"\n\nRedis adds {added:.2f} ms at p50.",
        "**Resume** (session.start with resume → first event; the session had one answered "
        "turn on node A)\n\n"
        + markdown_table(
            ["resumed on", "resumes", "p50 ms", "p99 ms"],
            [[place, str(s["n"]), *_ms(s)] for place, s in resume.items()],
        ),
    ]
    for sessions, rows in report["relay"]["summary"].items():
        by_target = {row["target"]: row for row in rows}
        cpu = {t: by_target[t]["relay_cpu_us_per_frame"] for t in ("gateway", "gateway_redis")}
        ratio = ""
        if cpu["gateway"] and cpu["gateway_redis"]:
            ratio = (
                f"\n\nRedis on ÷ off (medians): "
                f"{cpu['gateway_redis']['median'] / cpu['gateway']['median']:.3f}"
            )
        parts.append(
            f"**Relay CPU µs per frame pair, {sessions} sessions × 50 frames/s** "
            "(median [min–max] over repetitions; the gateway pinned alone to one core)\n\n"
            + markdown_table(
                ["target", "CPU µs / frame pair", "p99 added ms"],
                [
                    [
                        t,
                        cell(by_target[t]["relay_cpu_us_per_frame"], 0),
                        cell(by_target[t]["added_p99_ms"], 2),
                    ]
                    for t in ("gateway", "gateway_redis")
                ],
            )
            + ratio
        )
    workers = report["workers"]
    rows = []
    for row in workers["levels"]:
        added = [row["added_p50_ms"], row["added_p99_ms"]]
        shown = ["–" if value is None else f"{value:.2f}" for value in added]
        lost = f"{row['lost']}/{row['sent']}" if row["lost"] else "0"
        cpu = row["cpu_us_per_frame"]
        name = "1 worker" if row["target"] == "gateway_redis" else "2 workers"
        rows.append(
            [str(row["sessions"]), name, *shown, lost, "–" if cpu is None else f"{cpu:.0f}"]
        )
    parts.append(
        "**Saturation, 1 worker against 2** (both on Redis; nothing pinned: the Go load "
        "generator, the fake and Redis share this machine's "
        f"{workers['machine']['cpu_count']} cores with the workers)\n\n"
        + markdown_table(
            [
                "sessions × 50 frames/s",
                "gateway",
                "p50 added ms",
                "p99 added ms",
                "frames lost",
                "CPU µs / frame pair (all workers)",
            ],
            rows,
        )
        + f"\n\nadded: over direct at the same level, same run; {report['plan']['level_seconds']:g}"
        " s per level."
    )
    return "\n\n".join(parts)


def main(root: Path, out: Path, plan: ScalePlan) -> int:
    out.mkdir(parents=True, exist_ok=True)
    report = run_scale(root, out, plan)
    report["setup_p50_added_ms"] = round(
        report["setup_ms"]["redis"]["p50"] - report["setup_ms"]["memory"]["p50"], 3
    )
    write_json(out / "scale.json", report)
    print(render(report))
    print(f"\nraw results in {out / 'scale.json'}")
    return 0
