"""The soak's faults, carried out on the schedule planned from the seed (``soak.schedule``):
session and upstream faults at their planned seconds, each aimed at its planned slot's session
(or the next one that can meet it); and the fleet's: a rolling restart of one node every few
minutes (SIGTERM, started again once it exited) and one Redis restart.

Session faults are handed to the session (``SessionContext.pending_fault``), which meets them
at its next turn and logs them when they happen; upstream faults go to the fakes' control API
at once, aimed at the chosen session's upstream connection, or server-wide (``SERVER_WIDE``:
the OpenAI fake's next connections or next response, whoever's; the report names the session
that met each, ``soak.failovers``); fleet faults are the fleet's. Every fault is logged with its
time (``FaultEntry``), and every planned session fault with what became of it (``FaultHit``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from soak.context import SessionContext, SoakLogs
from soak.fleet import Fleet
from soak.records import Clock, FaultEntry
from soak.schedule import (
    SERVER_WIDE,
    SESSION_KINDS,
    UPSTREAM_KINDS,
    Candidate,
    FaultHit,
    FaultPlan,
    PlannedFault,
    choose_target,
)

__all__ = ["fleet_faults", "session_faults"]

DUPLICATE_WINDOW_S = 15.0
REDIS_DOWN_S = 2.0


def _fits(ctx: SessionContext, need: str) -> bool:
    record = ctx.record
    if record.started_at is None or record.lost or ctx.pending_fault or ctx.stopping.is_set():
        return False
    if need == "client":
        return record.kind != "phone"
    if need == "phone":
        return record.kind == "phone"
    # Its kind's provider, and still served by it: one that failed over (to Gemini or chat) is
    # not aimed at. (A browser voice session on Gemini Live after a failover is not a kind the
    # soak aims Gemini's faults at: the text_gemini sessions are.)
    return record.provider == need and record.upstream == need and record.kind != "phone"


async def session_faults(
    plan: Sequence[PlannedFault],
    slots: int,
    live: Callable[[], list[SessionContext]],
    fleet: Fleet,
    logs: SoakLogs,
    clock: Clock,
) -> None:
    for planned in plan:
        await asyncio.sleep(max(0.0, planned.at - clock.now()))
        logs.hits.append(await _aim(planned, slots, live(), fleet, logs, clock))


async def _aim(
    planned: PlannedFault,
    slots: int,
    sessions: list[SessionContext],
    fleet: Fleet,
    logs: SoakLogs,
    clock: Clock,
) -> FaultHit:
    kind = planned.kind
    if kind in SERVER_WIDE:
        return await _server_wide(planned, fleet, logs, clock)
    need = SESSION_KINDS.get(kind) or UPSTREAM_KINDS[kind]
    by_slot = {s.record.slot: s for s in sessions if _fits(s, need)}
    chosen = choose_target(
        planned, slots, [Candidate(slot, s.in_turn) for slot, s in by_slot.items()]
    )
    if chosen is None:
        return FaultHit(planned, clock.now(), note=f"no live session could meet it ({need})")
    target = by_slot[chosen.slot]
    record = target.record
    hit = FaultHit(planned, clock.now(), record.number, record.slot, record.ordinal)
    if kind in SESSION_KINDS:
        target.pending_fault = kind  # logged by the session when it meets it
        return hit
    body = {"kind": kind, "tag": record.tag, "seconds": DUPLICATE_WINDOW_S}
    try:
        answer = await fleet.control("/fault", body)
    except Exception as error:  # the fakes' process is part of the soak: say what failed
        answer = {"ok": False, "detail": f"control API: {error!r}"}
    now = clock.now()
    if kind != "gemini_duplicate":
        record.own_faults.append(kind)
        record.disturb(now)
    name = "gemini" if kind == "gemini_duplicate" else f"s{record.number}"
    detail = str(answer.get("detail", ""))
    logs.fault(FaultEntry(now, kind, name, bool(answer.get("ok")), detail))
    return (
        hit
        if answer.get("ok")
        else FaultHit(
            planned, hit.at, hit.session, hit.slot, hit.ordinal, f"not carried out: {detail}"
        )
    )


async def _server_wide(
    planned: PlannedFault, fleet: Fleet, logs: SoakLogs, clock: Clock
) -> FaultHit:
    """A fault of the OpenAI fake's own: its next connections or its next response, whichever
    session they are; aimed at none (the planned slot is not used)."""
    kind = planned.kind
    try:
        answer = await fleet.control("/fault", {"kind": kind})
    except Exception as error:  # the fakes' process is part of the soak: say what failed
        answer = {"ok": False, "detail": f"control API: {error!r}"}
    now = clock.now()
    ok, detail = bool(answer.get("ok")), str(answer.get("detail", ""))
    logs.fault(FaultEntry(now, kind, "openai", ok, detail))
    note = "server-wide: met by whoever comes next (see the failovers)"
    return FaultHit(planned, now, note=note if ok else f"not carried out: {detail}")


async def fleet_faults(plan: FaultPlan, fleet: Fleet, logs: SoakLogs, clock: Clock) -> None:
    for at, kind, target in plan.events():
        await asyncio.sleep(max(0.0, at - clock.now()))
        began = clock.now()
        if kind == "redis_restart":
            await fleet.restart_redis(REDIS_DOWN_S)
            logs.fault(
                FaultEntry(began, "redis_restart", "redis", True, f"down {REDIS_DOWN_S:g} s, empty")
            )
            continue
        try:
            stopped = await fleet.restart_node(target, began)
        except RuntimeError as error:
            logs.fault(FaultEntry(began, "sigterm_restart", target, False, str(error)))
            continue
        detail = (
            f"exit {stopped.exit_code} {stopped.stop_s:.1f} s after SIGTERM; "
            f"ready again at {clock.now():.1f} s"
        )
        logs.fault(FaultEntry(began, "sigterm_restart", target, stopped.exit_code == 0, detail))
