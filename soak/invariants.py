"""The soak's invariants, checked on what the run left behind. Pure: records in, violations and
summaries out.

1. ``tool_once``: each tool execution (journal ``start`` line) ran at most once per call; and
   once per request: the driver labels each call it asks for, uniquely, so a label that ran
   under two call ids is one request run twice (a model asked again calls again).
2. ``result_once``: no upstream session was given one result twice; the model answered each
   result at most once; each result the client saw finish, and the model answered something
   after, reached the model (on every provider but ``local``, which runs inside the gateway
   where no fake sees it).
3. ``session_end``: every session that began ended with ``session.ended`` and a reason its kind
   expects (``client``; phone calls also ``shutdown`` when their node drained), resuming where
   its socket went; nothing the driver saw go wrong (``SessionRecord.problems``).
4. ``isolation``: no session got an error for bad input it did not send.
5. ``logs``: no traceback, asyncio complaint or non-JSON line in any log.
6. ``resources``: RSS and open files grow < 10 % over the measured window (``resources``);
   sockets are released once the load stops (``cleanup``).
7. ``latency``: relay latency p99 under faults (turns no fault touched) within 2× the calm p99.
8. ``failover``: each stall of the OpenAI fake moved the session it met in time; no session on
   an alias with a healthy target ended for want of an upstream (``soak.failovers``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soak.records import LatencySample, SessionRecord

__all__ = [
    "GROWTH_LIMIT",
    "LATENCY_FACTOR",
    "Violation",
    "check_latency",
    "check_sessions",
    "check_tools",
    "percentile",
]

GROWTH_LIMIT = 0.10
SHARED_LABELS = frozenset({"phone", "None"})  # every call's greeting asks with this label
LATENCY_FACTOR = 2.0
MIN_LATENCY_SAMPLES = 100  # below, a p99 is just the slowest turn
DISTURBED_WITHIN_S = 2.0
EXPECTED_ENDS = {"phone": {"client", "shutdown"}}
DEFAULT_ENDS = {"client"}


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"invariant": self.invariant, "detail": self.detail}


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-fraction * len(ordered) // 1))))
    return ordered[rank - 1]


def check_tools(
    journal: Iterable[Mapping[str, Any]],
    tally: Mapping[str, Any],
    records: Sequence[SessionRecord],
) -> tuple[list[Violation], dict[str, Any]]:
    violations: list[Violation] = []
    starts: Counter[str] = Counter()
    ends: set[str] = set()
    by_tool: Counter[str] = Counter()
    by_label: dict[str, list[str]] = {}
    for line in journal:
        if line.get("phase") == "start":
            starts[str(line["run"])] += 1
            by_tool[str(line.get("tool"))] += 1
            by_label.setdefault(str(line.get("label")), []).append(str(line["run"]))
        elif line.get("phase") == "end":
            ends.add(str(line["run"]))
    for run, count in starts.items():
        if count > 1:
            violations.append(Violation("tool_once", f"{run} ran {count} times"))
    for label, runs in by_label.items():
        if label not in SHARED_LABELS and len(set(runs)) > 1:
            violations.append(
                Violation("tool_once", f"the request {label} ran as {len(set(runs))} calls: {runs}")
            )
    given: Mapping[str, int] = tally.get("given", {})
    answered: Mapping[str, int] = tally.get("answered", {})
    for duplicate in tally.get("duplicates", []):
        violations.append(
            Violation(
                "result_once",
                f"{duplicate['run']} given twice to one {duplicate['upstream']} session "
                f"({duplicate.get('tag')}): first {duplicate.get('first')!r}, again "
                f"{duplicate.get('again')!r}",
            )
        )
    for run, count in answered.items():
        if count > 1:
            violations.append(Violation("result_once", f"the model answered {run} {count} times"))
    seen_finished = 0
    for record in records:
        for call_id, call in record.calls.items():
            if not (call.ok and call.run):
                continue
            seen_finished += 1
            if call.run not in ends:
                violations.append(
                    Violation("tool_once", f"s{record.number} {call_id}: finished, never ran")
                )
            # The local model runs inside the gateway: no fake sees what it is given.
            if call.answered_after and call.run not in given and record.provider != "local":
                violations.append(
                    Violation(
                        "result_once",
                        f"s{record.number} {call_id} ({call.name}): the client saw it finish "
                        "and the model reply after, but the result never reached the model",
                    )
                )
    summary = {
        "executions": sum(starts.values()),
        "executions_by_tool": dict(by_tool),
        "finished": len(ends),
        "results_given": len(given),
        "results_answered": len(answered),
        "finished_seen_by_clients": seen_finished,
    }
    return violations, summary


def check_sessions(records: Sequence[SessionRecord]) -> tuple[list[Violation], dict[str, Any]]:
    violations: list[Violation] = []
    began = [r for r in records if r.started_at is not None]
    for record in began:
        name = f"s{record.number} ({record.kind}, {record.session_id})"
        if record.lost is not None:
            violations.append(Violation("session_end", f"{name} lost: {record.lost}"))
        elif record.end_reason is None:
            violations.append(Violation("session_end", f"{name} never ended"))
        elif record.end_reason not in EXPECTED_ENDS.get(record.kind, DEFAULT_ENDS):
            violations.append(
                Violation("session_end", f"{name} ended with reason {record.end_reason}")
            )
    for record in records:
        for problem in record.problems:
            kind = "isolation" if "without bad input" in problem else "session_end"
            name = f"s{record.number} ({record.kind}, {record.session_id})"
            violations.append(Violation(kind, f"{name}: {problem}"))
    by_kind: Counter[str] = Counter(r.kind for r in began)
    reasons: Counter[str] = Counter(r.end_reason or "none" for r in began)
    summary = {
        "sessions": len(records),
        "began": len(began),
        "by_kind": dict(by_kind),
        "refused": dict(Counter(r.refused for r in records if r.refused)),
        "end_reasons": dict(reasons),
        "lost": sum(1 for r in began if r.lost),
        "turns": sum(r.turns for r in records),
        "turns_by_kind": _sum_by_kind(records, lambda r: r.turns),
        "tool_calls": sum(len(r.calls) for r in records),
        "tool_calls_by_tool": dict(Counter(c.name for r in records for c in r.calls.values())),
        "barge_ins": sum(r.barge_ins for r in records),
        "resumes": sum(r.resumes for r in records),
        "recoveries": sum(r.recoveries for r in records),
        "errors_by_code": dict(Counter(code for r in records for _, code in r.errors)),
    }
    return violations, summary


def _sum_by_kind(records: Sequence[SessionRecord], value: Any) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for record in records:
        totals[record.kind] += int(value(record))
    return dict(totals)


def _disturbed(sample: LatencySample, record: SessionRecord | None) -> bool:
    if record is None:
        return False
    low, high = sample.sent_at - DISTURBED_WITHIN_S, sample.at + DISTURBED_WITHIN_S
    return any(low <= at <= high for at in record.disturbed)


def check_latency(
    samples: Sequence[LatencySample],
    records: Sequence[SessionRecord],
    calm_end: float,
    calm_from: float = 0.0,
    fleet_windows: Sequence[tuple[float, float]] = (),
) -> tuple[list[Violation], list[dict[str, Any]]]:
    """Per kind of latency: the calm phase from ``calm_from`` (once the sessions have started:
    the ramp is not the same load), the fault phase (all, and only turns that no fault of
    their own session touched: these are judged); p50 and p99 in ms. Shown too: the untouched
    turns away from the fleet's faults (``fleet_windows``: a node's restart moves its sessions
    to the other node at once, a Redis restart makes every node record its sessions again),
    to tell their cost from the rest."""
    by_number = {r.number: r for r in records}
    violations: list[Violation] = []
    rows: list[dict[str, Any]] = []
    for kind in sorted({s.kind for s in samples}):
        mine = [s for s in samples if s.kind == kind]
        calm = [s.ms for s in mine if calm_from <= s.sent_at < calm_end]
        faulty = [s for s in mine if s.sent_at >= calm_end]
        untouched = [s for s in faulty if not _disturbed(s, by_number.get(s.session))]
        clean = [s.ms for s in untouched]
        away = [
            s.ms
            for s in untouched
            if not any(low <= s.sent_at <= high for low, high in fleet_windows)
        ]
        row: dict[str, Any] = {
            "kind": kind,
            "calm": _stats(calm),
            "faults_all": _stats([s.ms for s in faulty]),
            "faults_undisturbed": _stats(clean),
            "faults_away_from_fleet": _stats(away),
        }
        calm_p99, clean_p99 = percentile(calm, 0.99), percentile(clean, 0.99)
        enough = len(calm) >= MIN_LATENCY_SAMPLES and len(clean) >= MIN_LATENCY_SAMPLES
        if enough and calm_p99 is not None and clean_p99 is not None:
            row["ratio_p99"] = round(clean_p99 / calm_p99, 2) if calm_p99 > 0 else None
            row["checked"] = True
            if clean_p99 > LATENCY_FACTOR * calm_p99:
                violations.append(
                    Violation(
                        "latency",
                        f"{kind}: p99 {clean_p99:.0f} ms under faults > "
                        f"{LATENCY_FACTOR:g} x {calm_p99:.0f} ms calm",
                    )
                )
        else:
            row["checked"] = False
        rows.append(row)
    return violations, rows


def _stats(values: Sequence[float]) -> dict[str, Any]:
    p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
    return {
        "n": len(values),
        "p50_ms": None if p50 is None else round(p50, 1),
        "p99_ms": None if p99 is None else round(p99, 1),
    }
