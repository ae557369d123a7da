"""The soak's faults: at a rate per minute during the fault phase, a kind drawn at random and
aimed at a live session that can meet it; and, on a schedule of their own, a rolling restart of
one node every few minutes (SIGTERM, started again once it exited) and one Redis restart.

Session faults are handed to the session (``SessionContext.pending_fault``), which meets them
at its next turn and logs them when they happen; upstream faults go to the fakes' control API
at once, aimed at a session that is in a turn; fleet faults are the fleet's. Every fault is
logged with its time (``FaultEntry``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass

from soak.context import SessionContext, SoakLogs
from soak.fleet import Fleet
from soak.records import Clock, FaultEntry

__all__ = ["FaultPlan", "fleet_faults", "plan_fleet_faults", "session_faults"]

TEXT_CLIENT = "text"
# kind → which sessions can meet it ("client": a session on /v1/session, "phone", a provider)
SESSION_KINDS: dict[str, str] = {
    "drop_resume": "client",
    "malformed": "client",
    "oversized": "client",
    "oversized_close": "client",
    "stop_reading": "client",
    "tool_slow": "client",
    "tool_hang": "client",
    "tool_raise": "client",
    "confirm_late": "client",
    "confirm_twice": "client",
    "confirm_expired": "client",
    "dtmf_twice": "phone",
}
UPSTREAM_KINDS: dict[str, str] = {
    "openai_drop": "openai",
    "openai_expire": "openai",
    "gemini_drop": "gemini",
    "gemini_goaway": "gemini",
    "gemini_duplicate": "gemini",
}
DUPLICATE_WINDOW_S = 15.0
REDIS_DOWN_S = 2.0
END_MARGIN_S = 15.0  # no fleet fault this close to the end: it must play out


@dataclass(frozen=True)
class FaultPlan:
    restarts: tuple[tuple[float, str], ...]  # (when, node)
    redis_at: float | None


def plan_fleet_faults(
    calm_end: float, end: float, restart_every_s: float, redis: bool
) -> FaultPlan:
    """Restarts alternate between the nodes from half an interval into the fault phase; Redis
    restarts between the first two (or at 60 % of the phase when there is one)."""
    restarts: list[tuple[float, str]] = []
    at = calm_end + restart_every_s / 2
    while restart_every_s > 0 and at < end - END_MARGIN_S:
        restarts.append((at, "ab"[len(restarts) % 2]))
        at += restart_every_s
    redis_at: float | None = None
    if redis:
        if len(restarts) >= 2:
            redis_at = (restarts[0][0] + restarts[1][0]) / 2
        else:
            redis_at = calm_end + 0.6 * (end - calm_end)
            if restarts and abs(redis_at - restarts[0][0]) < 10:
                redis_at = restarts[0][0] + 10
        if redis_at > end - END_MARGIN_S:
            redis_at = None
    return FaultPlan(tuple(restarts), redis_at)


def _fits(ctx: SessionContext, need: str) -> bool:
    record = ctx.record
    if record.started_at is None or record.lost or ctx.pending_fault or ctx.stopping.is_set():
        return False
    if need == "client":
        return record.kind != "phone"
    if need == "phone":
        return record.kind == "phone"
    return record.provider == need and record.kind != "phone"


async def session_faults(
    live: Callable[[], list[SessionContext]],
    fleet: Fleet,
    logs: SoakLogs,
    clock: Clock,
    rng: random.Random,
    rate_per_min: float,
    until: float,
) -> None:
    kinds = [*SESSION_KINDS, *UPSTREAM_KINDS]
    while rate_per_min > 0:
        await asyncio.sleep(rng.expovariate(rate_per_min / 60))
        if clock.now() >= until:
            return
        for kind in rng.sample(kinds, len(kinds)):  # the first kind that has a target
            if await _aim(kind, live(), fleet, logs, clock, rng):
                break


async def _aim(
    kind: str,
    sessions: list[SessionContext],
    fleet: Fleet,
    logs: SoakLogs,
    clock: Clock,
    rng: random.Random,
) -> bool:
    if kind in SESSION_KINDS:
        fitting = [s for s in sessions if _fits(s, SESSION_KINDS[kind])]
        if not fitting:
            return False
        rng.choice(fitting).pending_fault = kind  # logged by the session when it meets it
        return True
    fitting = [s for s in sessions if _fits(s, UPSTREAM_KINDS[kind])]
    busy = [s for s in fitting if s.in_turn] or fitting
    if not busy:
        return False
    target = rng.choice(busy)
    body = {"kind": kind, "tag": target.record.tag, "seconds": DUPLICATE_WINDOW_S}
    try:
        answer = await fleet.control("/fault", body)
    except Exception as error:  # the fakes' process is part of the soak: say what failed
        answer = {"ok": False, "detail": f"control API: {error!r}"}
    now = clock.now()
    if kind != "gemini_duplicate":
        target.record.own_faults.append(kind)
        target.record.disturb(now)
    name = "gemini" if kind == "gemini_duplicate" else f"s{target.record.number}"
    logs.fault(FaultEntry(now, kind, name, bool(answer.get("ok")), str(answer.get("detail", ""))))
    return bool(answer.get("ok"))


async def fleet_faults(plan: FaultPlan, fleet: Fleet, logs: SoakLogs, clock: Clock) -> None:
    events: list[tuple[float, str]] = [(at, f"node:{name}") for at, name in plan.restarts]
    if plan.redis_at is not None:
        events.append((plan.redis_at, "redis"))
    for at, what in sorted(events):
        await asyncio.sleep(max(0.0, at - clock.now()))
        began = clock.now()
        if what == "redis":
            await fleet.restart_redis(REDIS_DOWN_S)
            logs.fault(
                FaultEntry(began, "redis_restart", "redis", True, f"down {REDIS_DOWN_S:g} s, empty")
            )
            continue
        name = what.split(":", 1)[1]
        try:
            stopped = await fleet.restart_node(name, began)
        except RuntimeError as error:
            logs.fault(FaultEntry(began, "sigterm_restart", name, False, str(error)))
            continue
        detail = (
            f"exit {stopped.exit_code} {stopped.stop_s:.1f} s after SIGTERM; "
            f"ready again at {clock.now():.1f} s"
        )
        logs.fault(FaultEntry(began, "sigterm_restart", name, stopped.exit_code == 0, detail))
