"""``scripts/bench setup``: session set-up time with the gateway's warm connection pool against
without, the upstream (the OpenAI Realtime fake, a subprocess) taking 200 ms to set up each
connection.

**The connect delay.** ``python -m fakes.openai_realtime --created-delay-ms 200``: the fake
accepts TCP and the WebSocket upgrade at once and sends ``session.created`` 200 ms later (it has
no way to delay the accept itself), so the 200 ms sits between the upgrade and
``session.created``: what a warm connection (``transports.openai_realtime.warm``) has already
waited for. A session on one only sends ``session.update`` and waits for ``session.updated``.

**Three gateway processes**, the same code and settings but ``GATEWAY_POOL_SIZE``: ``pool``
(``POOL_SIZE``), ``no_pool`` (0) and ``pool_again`` (``POOL_SIZE`` again, a process of its own:
the A/A row, ``pool_again`` ÷ ``pool``). Auth is on as in production: a user JWT opens
``/v1/session``; a call's stream token comes from the signed voice webhook's TwiML.

**Pool size 2.** Sessions start one after another; each ``take`` makes the pool's keeper open
one replacement, which is ready ~200 ms later (the fake's delay plus a local handshake). With
one connection, every session would need the previous one's replacement to be ready, with no
margin for a late refill (a slow scheduler tick on this 2-core box): a miss costs the whole
200 ms. With two, the second covers a late refill, and at the pause below both are ready at each
start in steady state. More would change nothing for sessions that arrive one at a time.

**The pause** between sessions, ``PAUSE_S`` = 0.3 s, the same for every configuration: longer
than one refill (~0.2 s), so the pool is back to full before each start and every pooled sample
measures a session on a ready connection (the pool's claim), not one racing its refill; and the
previous session's teardown (its upstream closing) is over before the next clock starts.

Two measures, each ``reps`` repetitions (≥ 5) of ``sessions`` sessions per configuration,
interleaved (each repetition runs the three in turn, the order reversed every other one):

1. ``session``: from ``session.start`` sent to ``session.started`` received (text mode);
   target: with the pool, p50 ≤ 30 ms;
2. ``call``: a phone call, from Twilio's ``start`` sent to the first ``media`` frame of the
   greeting (``GATEWAY_TWILIO_GREETING``: the model speaks first).

Judged by the median of per-repetition ratios (p50 and p99, ``pool`` ÷ ``no_pool``) with the
A/A ratio beside it. Samples that took at least the connect delay are counted (with the pool on:
sessions that found no connection ready). Results: a table, and ``<out>/setup.json`` with every
sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.relay.procs import ChildProcess, collector_paused
from bench.setup.clients import SetupFailed, time_call, time_session
from bench.setup.procs import gateway_env, start_delayed_fake, start_gateway_with_auth
from bench.setup.stats import PARTS, TARGETS, Sample, order_of, render, summarize
from gateway.security.tokens import TokenAuthority

__all__ = ["SetupPlan", "main"]

POOL_SIZE = 2
PAUSE_S = 0.3
CREATED_DELAY_MS = 200.0
TARGET_P50_MS = 30.0
MAX_FAILURES = 5  # sessions refused or dropped before the bench gives up
WARMUP = 2  # unrecorded sessions of each kind per gateway first (imports, first connections)


@dataclass(frozen=True)
class SetupPlan:
    reps: int = 5
    sessions: int = 50
    pause_s: float = PAUSE_S
    pool_size: int = POOL_SIZE
    created_delay_ms: float = CREATED_DELAY_MS

    @classmethod
    def quick(cls) -> SetupPlan:
        return cls(sessions=5)

    def budget_s(self) -> float:
        """An upper bound on the whole run (every session at its slowest plausible), after
        which it stops where it is."""
        per_session = self.pause_s + 2.0
        runs = self.reps * len(PARTS) * len(TARGETS)
        return 120.0 + runs * self.sessions * per_session


@dataclass
class _Gateway:
    child: ChildProcess
    url: str


Timer = Callable[[aiohttp.ClientSession, str], Awaitable[float]]


async def _measure(
    plan: SetupPlan,
    gateways: dict[str, _Gateway],
    user_token: str,
    twilio_token: str,
    failures: list[dict[str, Any]],
) -> list[Sample]:
    deadline = time.monotonic() + plan.budget_s()
    timers: dict[str, Timer] = {
        "session": lambda http, url: time_session(http, url, user_token),
        "call": lambda http, url: time_call(http, url, twilio_token),
    }
    samples: list[Sample] = []
    async with aiohttp.ClientSession() as http:

        async def one(part: str, target: str, rep: int, index: int) -> float | None:
            gateway = gateways[target]
            gateway.child.ensure_alive()
            try:
                return await timers[part](http, gateway.url)
            except (SetupFailed, TimeoutError, aiohttp.ClientError) as error:
                failures.append(
                    {
                        "part": part,
                        "target": target,
                        "rep": rep,
                        "index": index,
                        "error": str(error),
                    }
                )
                print(f"  failed: {part} on {target}: {error}", file=sys.stderr, flush=True)
                if len(failures) >= MAX_FAILURES:
                    raise RuntimeError(f"{len(failures)} sessions failed; giving up") from error
                return None

        await asyncio.sleep(1.0)  # the pools fill (two connections, ~0.2 s each)
        for part in PARTS:  # warm each path once, not recorded
            for target in TARGETS:
                for _ in range(WARMUP):
                    await one(part, target, -1, -1)
                    await asyncio.sleep(plan.pause_s)
        for rep in range(plan.reps):
            for part in PARTS:
                for target in order_of(rep):
                    if time.monotonic() > deadline:
                        print("  the run's time budget is spent: stopping", file=sys.stderr)
                        return samples
                    taken: list[float] = []
                    with collector_paused():
                        for index in range(plan.sessions):
                            seconds = await one(part, target, rep, index)
                            if seconds is not None:
                                sample = Sample(part, target, rep, index, seconds * 1000)
                                samples.append(sample)
                                taken.append(sample.ms)
                            await asyncio.sleep(plan.pause_s)
                    middle = statistics.median(taken) if taken else float("nan")
                    print(
                        f"  rep {rep} {part:7} {target:10} n={len(taken)}"
                        f" median {middle:.1f} ms max {max(taken, default=float('nan')):.1f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
    return samples


def _complaints(log_path: Path, keep: int = 10) -> dict[str, Any]:
    """How many lines of a child's log are warnings or errors, and the last ``keep`` of them."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return {"count": 0, "last": []}
    marks = ('"level": "warning"', '"level": "error"', '"level": "critical"', "Traceback")
    found = [line[:400] for line in lines if any(mark in line for mark in marks)]
    return {"count": len(found), "last": found[-keep:]}


def main(out_dir: Path, plan: SetupPlan) -> int:
    if plan.reps < 1 or plan.sessions < 1 or plan.pool_size < 1:
        raise ValueError("reps, sessions and the pool size must be ≥ 1")
    if plan.reps < 5:
        print("setup bench: fewer than 5 repetitions; not enough to judge", file=sys.stderr)
    began = time.monotonic()
    auth_secret = secrets.token_urlsafe(32)
    twilio_token = secrets.token_urlsafe(16)
    user_token = TokenAuthority(auth_secret, max_lifetime_s=86400.0).mint_user(
        "bench-setup", now=time.time(), ttl_s=3 * 3600.0
    )
    failures: list[dict[str, Any]] = []
    sizes = {"pool": plan.pool_size, "no_pool": 0, "pool_again": plan.pool_size}
    with tempfile.TemporaryDirectory(prefix="bench-setup-") as tmp, contextlib.ExitStack() as kids:
        work = Path(tmp)
        fake, upstream = start_delayed_fake(work, plan.created_delay_ms)
        kids.callback(fake.stop)
        gateways = {}
        for target in TARGETS:
            data = work / target
            data.mkdir()
            env = gateway_env(upstream, sizes[target], auth_secret, twilio_token)
            child, url = start_gateway_with_auth(env, data, work, f"gateway-{target}")
            kids.callback(child.stop)
            gateways[target] = _Gateway(child, url)
        try:
            samples = asyncio.run(_measure(plan, gateways, user_token, twilio_token, failures))
        except BaseException:
            for gateway in gateways.values():
                print(f"--- {gateway.child.name}:\n{gateway.child.log_tail()}", file=sys.stderr)
            raise
        kids.close()  # every child stopped: its log is complete
        logs = {g.child.name: _complaints(g.child.log_path) for g in gateways.values()}
        logs["fake upstream"] = _complaints(fake.log_path)
    summary = summarize(samples, plan.created_delay_ms)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {
        "plan": asdict(plan),
        "connect_delay": "session.created sent created_delay_ms after the WebSocket accept "
        "(the fake cannot delay the accept itself)",
        "targets": {t: {"GATEWAY_POOL_SIZE": sizes[t]} for t in TARGETS},
        "samples": [s.as_dict() for s in samples],
        "failures": failures,
        "summary": summary,
        "log_complaints": logs,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    (out_dir / "setup.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(summary, plan.created_delay_ms, TARGET_P50_MS))
    print(f"\n{len(samples)} samples, {len(failures)} failed; {out_dir / 'setup.json'}")
    return 1 if failures or not samples else 0
