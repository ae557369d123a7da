"""The soak's schedule, from its seed. Pure.

Every random choice of the soak draws from a stream of its own (``stream``), named after what it
decides: the session faults' plan, each session slot (the kinds of the sessions it runs, one
after another, and each session's own stream for its turns and for the node it connects to).
One part drawing more or less never shifts another, so what the seed fixes stays fixed when the
timing of a run differs.

Fixed by the seed and the settings, computed before the load starts:

- the fleet faults (``plan_fleet_faults``: no randomness at all, a function of the timeline);
- the session faults (``plan_session_faults``): at which second, which kind, aimed at which
  slot;
- the kind of the n-th session of each slot, and the stream of its turns.

Not fixed, because it depends on the moment: which of a slot's sessions is alive when a fault
is due, and whether it can meet it (started, the right kind, not already asked to misbehave).
That choice is deterministic given the state (``choose_target``): the planned slot's session if
it can, else the next slot up that can; an upstream fault prefers a session in a turn. The
server-wide faults (``SERVER_WIDE``: the OpenAI fake refuses or fails its next connections, or
stalls its next response) are aimed at no session: whichever comes next meets them, and the
report names it afterwards (``soak.failovers``); their planned slot is not used.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FAULT_KINDS",
    "SERVER_WIDE",
    "SESSION_KINDS",
    "UPSTREAM_KINDS",
    "Candidate",
    "FaultHit",
    "FaultPlan",
    "PlannedFault",
    "SessionDraw",
    "choose_target",
    "draw_session",
    "plan_fleet_faults",
    "plan_session_faults",
    "planned_schedule",
    "schedule_digest",
    "schedule_report",
    "stream",
]

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
    # Server-wide: the fake's next connections or its next response, whoever's they are.
    "openai_refuse": "openai",
    "openai_429": "openai",
    "openai_stall_first": "openai",
    "openai_stall_mid": "openai",
}
SERVER_WIDE = frozenset({"openai_refuse", "openai_429", "openai_stall_first", "openai_stall_mid"})
FAULT_KINDS = (*SESSION_KINDS, *UPSTREAM_KINDS)
END_MARGIN_S = 15.0  # no fleet fault this close to the end: it must play out


def stream(seed: int, name: str) -> random.Random:
    """The random stream ``name`` of a run with ``seed``: the same numbers in every process and
    on every machine (a string seed goes through SHA-512, not through ``hash``)."""
    return random.Random(f"soak:{seed}:{name}")


@dataclass(frozen=True)
class PlannedFault:
    at: float  # seconds on the soak's clock
    kind: str
    slot: int  # the session slot it is aimed at

    def as_dict(self) -> dict[str, Any]:
        return {"at_s": self.at, "kind": self.kind, "slot": self.slot}


def plan_session_faults(
    seed: int, start: float, end: float, rate_per_min: float, slots: int
) -> tuple[PlannedFault, ...]:
    """Faults at ``rate_per_min`` (exponential gaps) from ``start`` until ``end``: each a kind
    drawn uniformly, aimed at a slot drawn uniformly."""
    if rate_per_min <= 0 or slots < 1:
        return ()
    rng = stream(seed, "session-faults")
    planned: list[PlannedFault] = []
    at = start
    while True:
        at += rng.expovariate(rate_per_min / 60)
        if at >= end:
            return tuple(planned)
        planned.append(PlannedFault(round(at, 3), rng.choice(FAULT_KINDS), rng.randrange(slots)))


@dataclass(frozen=True)
class Candidate:
    """A live session that can meet a fault now."""

    slot: int
    in_turn: bool


def choose_target(
    planned: PlannedFault, slots: int, candidates: Sequence[Candidate]
) -> Candidate | None:
    """The planned slot's session when it can meet the fault, else the first slot after it
    (wrapping) whose session can; an upstream fault goes to a session in a turn when there is
    one. None when no session can."""
    pool = list(candidates)
    if planned.kind in UPSTREAM_KINDS:
        pool = [c for c in pool if c.in_turn] or pool
    if not pool:
        return None
    return min(pool, key=lambda c: ((c.slot - planned.slot) % max(slots, 1), c.slot))


@dataclass(frozen=True)
class FaultHit:
    """What became of a planned session fault: the session it was handed to, or why none."""

    planned: PlannedFault
    at: float  # when it was aimed
    session: int | None = None  # SessionRecord.number
    slot: int | None = None
    ordinal: int | None = None  # the slot's n-th session
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.planned.as_dict(),
            "aimed_at_s": round(self.at, 3),
            "hit": None if self.session is None else f"s{self.session}",
            "hit_slot": self.slot,
            "hit_ordinal": self.ordinal,
            "note": self.note,
        }


@dataclass(frozen=True)
class FaultPlan:
    restarts: tuple[tuple[float, str], ...]  # (when, node)
    redis_at: float | None

    def events(self) -> list[tuple[float, str, str]]:
        """(when, kind, target) in order."""
        found = [(at, "sigterm_restart", name) for at, name in self.restarts]
        if self.redis_at is not None:
            found.append((self.redis_at, "redis_restart", "redis"))
        return sorted(found)


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


@dataclass(frozen=True)
class SessionDraw:
    """A slot's next session: its kind, and the seeds of its own streams."""

    kind: str
    provider: str
    turns_seed: int  # its turns, pauses, choices
    nodes_seed: int  # which node it connects (and resumes) to


def draw_session(rng: random.Random, mix: Sequence[tuple[str, str, float]]) -> SessionDraw:
    """Draw a slot's next session from its stream: always the same number of draws, so the n-th
    session of a slot is the same whatever the ones before it did."""
    index = rng.choices(range(len(mix)), weights=[weight for _, _, weight in mix])[0]
    kind, provider, _ = mix[index]
    return SessionDraw(kind, provider, rng.getrandbits(64), rng.getrandbits(64))


def planned_schedule(fleet: FaultPlan, faults: Sequence[PlannedFault]) -> dict[str, Any]:
    """The schedule as planned from the seed and the settings, before the run."""
    return {
        "fleet": [
            {"at_s": round(at, 3), "kind": kind, "target": target}
            for at, kind, target in fleet.events()
        ],
        "session_faults": [fault.as_dict() for fault in faults],
    }


def schedule_digest(planned: dict[str, Any]) -> str:
    """A short fingerprint of a planned schedule: two runs whose plans match show the same."""
    text = json.dumps(planned, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def schedule_report(
    seed: int,
    fleet: FaultPlan,
    faults: Sequence[PlannedFault],
    hits: Sequence[FaultHit],
    fleet_done: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The planned schedule beside what became of it: each fleet fault with when it began and
    whether it was carried out (``fleet_done``: its fault log entries, in order), each session
    fault with the session it was handed to (``aimed_at_s`` None: the run ended first)."""
    planned = planned_schedule(fleet, faults)
    done = [entry for entry in fleet_done if entry["kind"] in ("sigterm_restart", "redis_restart")]
    fleet_rows = []
    for i, row in enumerate(planned["fleet"]):  # carried out one after another, in order
        entry = done[i] if i < len(done) else None
        began, ok = (None, None) if entry is None else (entry["at_s"], entry["ok"])
        fleet_rows.append({**row, "began_s": began, "ok": ok})
    fault_rows = [  # aimed one after another, in order
        hits[i].as_dict() if i < len(hits) else {**fault.as_dict(), "aimed_at_s": None}
        for i, fault in enumerate(faults)
    ]
    return {
        "seed": seed,
        "digest": schedule_digest(planned),
        "fleet": fleet_rows,
        "session_faults": fault_rows,
    }
