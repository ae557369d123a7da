"""Memory and open files over the run, per process (each node incarnation apart: a restarted
node is a new process). Pure.

A process is measured from ``window_from`` seconds into its own life or into the run, whichever
is later (the load has ramped up by then), to the moment the load stops; a window shorter than
``min_span_s`` is not measured (a node restarted near the end). The load is constant overall,
but not per node: while one node drains, the other takes all the sessions, and its memory rises
to what that peak needs and stays there (Python keeps its arenas). So a node's window starts
after the most sessions it held, too: from there on, memory that grows is memory that leaks.
Growth compares the mean of the window's first and last ``edge`` samples, so one sample caught
between sessions does not decide.
A window too short to mean anything (under ``JUDGED_MIN_SPAN_S`` or ``JUDGED_MIN_SAMPLES``:
a burst, a Redis restart or sessions moving weigh more in it than any leak could) is measured
and shown, but not judged: "not judged (window too short)", never a violation.
Nodes are judged (< 10 %); the driver, the fakes and Redis are shown (the driver keeps every
session's record, the Gemini fake every resumption handle: they grow by design). A node's open
files are judged without its pooled connections (Redis, the chat API: a pool keeps what its
busiest moment opened, and a Redis restart renews it), and they follow its open sessions (a
socket to the client, one upstream): the load is constant overall, but a rolling restart moves
sessions between the nodes, so a node's files are judged by how much more they grew than its
sessions did (``fds_growth_beyond_sessions``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from soak.invariants import GROWTH_LIMIT, Violation
from soak.monitor import ResourceSample

__all__ = ["growth_rows"]

JUDGED_PREFIX = "node-"
EDGE_SAMPLES = 3
PEAK_SETTLE_S = 5.0  # the peak's sessions are set up
# A peak this far above the node's median load is a surge (a drain about doubles it), not the
# ups and downs of a steady load.
SURGE = 1.6
SURGE_MIN = 5
# The shortest window judged: a leak needs time to show, a burst settles within it (the Redis
# pool closes what a burst opened after GATEWAY_REDIS_IDLE_S, 30 s by default).
JUDGED_MIN_SPAN_S = 60.0
JUDGED_MIN_SAMPLES = 10


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _peak(
    node_sessions: Sequence[tuple[float, str, int]], node: str, born: float, load_end: float
) -> float | None:
    """When the node held the most sessions of its life (the last such moment), if that was a
    surge (the other node drained), not the ups and downs of a steady load."""
    counts = [(c, at) for at, name, c in node_sessions if name == node and born <= at <= load_end]
    if not counts:
        return None
    typical = sorted(c for c, _ in counts)[len(counts) // 2]
    most, when = max(counts)
    return when if most >= max(SURGE * typical, typical + SURGE_MIN) else None


def _sessions_between(
    node_sessions: Sequence[tuple[float, str, int]], node: str, low: float, high: float
) -> float | None:
    counts = [count for at, name, count in node_sessions if name == node and low <= at <= high]
    return _mean(counts) if counts else None


def growth_rows(
    samples: Sequence[ResourceSample],
    node_sessions: Sequence[tuple[float, str, int]],
    window_from: float,
    load_end: float,
    min_span_s: float,
) -> tuple[list[Violation], list[dict[str, Any]]]:
    series: dict[tuple[str, int], list[ResourceSample]] = defaultdict(list)
    for sample in samples:
        series[(sample.role, sample.pid)].append(sample)
    violations: list[Violation] = []
    rows: list[dict[str, Any]] = []
    for (role, pid), points in sorted(series.items(), key=lambda kv: kv[1][0].at):
        born = points[0].at
        start = max(window_from, born + window_from)
        why = f"lived {points[-1].at - born:.0f} s"
        if role.startswith(JUDGED_PREFIX):
            peak = _peak(node_sessions, role.removeprefix(JUDGED_PREFIX), born, load_end)
            if peak is not None and peak + PEAK_SETTLE_S > start:
                start = peak + PEAK_SETTLE_S
                why = f"its surge of sessions at {peak:.0f} s"
        window = [p for p in points if start <= p.at <= load_end]
        row: dict[str, Any] = {"role": role, "pid": pid, "judged": role.startswith(JUDGED_PREFIX)}
        if len(window) < 2 * EDGE_SAMPLES or window[-1].at - window[0].at < min_span_s:
            row.update(measured=False, judged=False, note=f"not judged (window too short: {why})")
            rows.append(row)
            continue
        span = window[-1].at - window[0].at
        if row["judged"] and (span < JUDGED_MIN_SPAN_S or len(window) < JUDGED_MIN_SAMPLES):
            row.update(
                judged=False,
                note=f"not judged (window too short: {span:.0f} s, {len(window)} samples; "
                f"judged from {JUDGED_MIN_SPAN_S:.0f} s and {JUDGED_MIN_SAMPLES})",
            )
        edge = max(EDGE_SAMPLES, len(window) // 5)
        first, last = window[:edge], window[-edge:]
        rss = (_mean([p.rss_kb for p in first]), _mean([p.rss_kb for p in last]))
        fds = (_mean([p.fds - p.pooled for p in first]), _mean([p.fds - p.pooled for p in last]))
        node = role.removeprefix(JUDGED_PREFIX)
        sessions = (
            _sessions_between(node_sessions, node, first[0].at, first[-1].at),
            _sessions_between(node_sessions, node, last[0].at, last[-1].at),
        )
        row.update(
            measured=True,
            from_s=round(window[0].at, 1),
            to_s=round(window[-1].at, 1),
            rss_mb=[round(rss[0] / 1024, 1), round(rss[1] / 1024, 1)],
            rss_growth=round(rss[1] / rss[0] - 1, 4),
            fds=[round(fds[0], 1), round(fds[1], 1)],
            pooled=[
                round(_mean([p.pooled for p in first]), 1),
                round(_mean([p.pooled for p in last]), 1),
            ],
            fds_growth=round(fds[1] / fds[0] - 1, 4),
            cpu_s=round(points[-1].cpu_s - points[0].cpu_s, 1),
        )
        if sessions[0] is not None and sessions[1] is not None:
            row["sessions"] = [round(sessions[0], 1), round(sessions[1], 1)]
            sessions_growth = sessions[1] / sessions[0] - 1 if sessions[0] > 0 else 0.0
            row["fds_growth_beyond_sessions"] = round(
                row["fds_growth"] - max(0.0, sessions_growth), 4
            )
        rows.append(row)
        if not row["judged"]:
            continue
        for what, key in (("rss", "rss_growth"), ("fds", "fds_growth_beyond_sessions")):
            growth = row.get(key, row[f"{what}_growth"])
            if growth >= GROWTH_LIMIT:
                violations.append(
                    Violation(
                        "resources",
                        f"{role} (pid {pid}): {what} grew {growth:.1%} from "
                        f"{row['from_s']} s to {row['to_s']} s",
                    )
                )
    return violations, rows
