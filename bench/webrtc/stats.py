"""The numbers of ``scripts/bench webrtc``. Pure: lane records and CPU dicts in, rows out.

A lane record (``bench.webrtc.worker.record``) holds per measured turn its latency in ms, or
``None`` (see ``bench.latency.turns``), and, for WebRTC, the same turn measured at the reply's
first RTP packet (before aiortc's jitter buffer).

- **latency**: per group (``webrtc``, ``ws`` and their A/A twins ``webrtc_aa``, ``ws_aa``) the
  p50 and p99 of every turn of every repetition pooled; per repetition the p50 and p99 of each
  group, and the differences of a pair (``webrtc − ws``; A/A: ``webrtc_aa − webrtc``,
  ``ws_aa − ws``), judged by their median over repetitions with [min–max];
- **cpu**: per run the gateway's CPU per session (cores / sessions), per repetition the ratio
  WebRTC / WebSocket and the A/A ratio of two WebRTC runs, judged by the median;
- **ramp**: per level the p50/p99, and the p99 added by load (the level's p99 − the
  unloaded WebRTC p99 of the latency part); the knee is the first level that adds more than
  ``RAMP_LIMIT_MS``;
- **memory**: RSS growth from the end of the warm-up to the end.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench.relay.stats import Spread, percentile

__all__ = [
    "PAIRS",
    "RAMP_LIMIT_MS",
    "TARGET_ADDED_P50_MS",
    "TARGET_RSS_GROWTH",
    "bound_by",
    "cpu_rows",
    "latency_summary",
    "pooled",
    "ramp_knee",
    "ramp_row",
    "rss_growth",
]

TARGET_ADDED_P50_MS = 20.0
RAMP_LIMIT_MS = 50.0
SATURATED_CORES = 0.85  # a core this busy over a window is taken as full
LATE_CLIENT_MS = 20.0
LOST_TURNS = 0.05  # a level that cannot measure more of its turns than this has broken down
TARGET_RSS_GROWTH = 0.05
# (name, minuend group, subtrahend group): the comparison, then the two A/A rows
PAIRS = (
    ("webrtc − ws", "webrtc", "ws"),
    ("A/A: webrtc_aa − webrtc", "webrtc_aa", "webrtc"),
    ("A/A: ws_aa − ws", "ws_aa", "ws"),
)


def _values(records: Sequence[Mapping[str, Any]], group: str, key: str) -> list[float]:
    return [
        value
        for record in records
        if record["group"] == group
        for value in record.get(key) or []
        if value is not None
    ]


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def pooled(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "p50_ms": None, "p99_ms": None}
    return {
        "n": len(values),
        "p50_ms": _round(percentile(values, 50)),
        "p99_ms": _round(percentile(values, 99)),
    }


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {key: round(value, 5) for key, value in Spread.of(values).as_dict().items()}


def latency_summary(reps: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """``reps``: per repetition, the records of every lane."""
    groups = sorted({record["group"] for rep in reps for record in rep})
    summary: dict[str, Any] = {"groups": {}, "pairs": [], "per_rep": []}
    for group in groups:
        every = [v for rep in reps for v in _values(rep, group, "latencies_ms")]
        summary["groups"][group] = pooled(every)
        rtp = [v for rep in reps for v in _values(rep, group, "rtp_latencies_ms")]
        if rtp:
            summary["groups"][group]["rtp"] = pooled(rtp)
    per_rep = [
        {group: pooled(_values(rep, group, "latencies_ms")) for group in groups} for rep in reps
    ]
    summary["per_rep"] = per_rep
    for name, high, low in PAIRS:
        if high not in groups or low not in groups:
            continue
        row: dict[str, Any] = {"pair": name, "high": high, "low": low}
        for q in ("p50_ms", "p99_ms"):
            diffs = [
                rep[high][q] - rep[low][q]
                for rep in per_rep
                if rep[high][q] is not None and rep[low][q] is not None
            ]
            row[f"diff_{q}"] = _spread(diffs)
            row[f"diff_{q}_per_rep"] = [round(d, 2) for d in diffs]
            row[f"ratio_{q}"] = _spread(
                [
                    rep[high][q] / rep[low][q]
                    for rep in per_rep
                    if rep[high][q] is not None and rep[low][q]
                ]
            )
        summary["pairs"].append(row)
    summary["client_jitter_buffer"] = _jitter_share(reps)
    return summary


def _jitter_share(reps: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, Any] | None:
    """What the client's own receiver holds back: per WebRTC turn, (reply frame out of the
    track) − (reply's first RTP packet in), the median per repetition, then over repetitions;
    and what is left of ``webrtc − ws`` at the RTP packet (the gateway's side and the wire)."""
    held, at_rtp = [], []
    for rep in reps:
        deltas = [
            frame - packet
            for record in rep
            if record["kind"] == "webrtc"
            for frame, packet in zip(
                record["latencies_ms"], record.get("rtp_latencies_ms") or [], strict=False
            )
            if frame is not None and packet is not None
        ]
        if deltas:
            held.append(statistics.median(deltas))
        rtp = _values(rep, "webrtc", "rtp_latencies_ms")
        ws = _values(rep, "ws", "latencies_ms")
        if rtp and ws:
            at_rtp.append(percentile(rtp, 50) - percentile(ws, 50))
    if not held:
        return None
    return {"held_p50_ms": _spread(held), "rtp_minus_ws_p50_ms": _spread(at_rtp)}


def cpu_rows(reps: Sequence[Mapping[str, Mapping[str, Any]]], sessions: int) -> dict[str, Any]:
    """``reps``: per repetition, per run name (``webrtc``, ``ws``, ``webrtc_aa``), its CPU dict
    (``bench.webrtc.fleet.PhaseResult.cpu``). Per session: cores / ``sessions``."""
    runs = sorted({name for rep in reps for name in rep})
    per_session: dict[str, dict[str, list[float]]] = {
        name: {"gateway": [], "clients": []} for name in runs
    }
    for rep in reps:
        for name, cpu in rep.items():
            for role in ("gateway", "clients"):
                per_session[name][role].append(cpu["cores"][role] / sessions)
    rows: dict[str, Any] = {
        "sessions": sessions,
        "per_session_cores": {
            name: {role: _spread(values) for role, values in roles.items()}
            for name, roles in per_session.items()
        },
        "other_cores": _spread([cpu["other_cores"] for rep in reps for cpu in rep.values()]),
    }
    for key, high, low in (
        ("webrtc/ws", "webrtc", "ws"),
        ("A/A webrtc_aa/webrtc", "webrtc_aa", "webrtc"),
    ):
        ratios = [
            rep[high]["cores"]["gateway"] / rep[low]["cores"]["gateway"]
            for rep in reps
            if high in rep and low in rep and rep[low]["cores"]["gateway"] > 0
        ]
        rows[key] = {"ratios": [round(r, 3) for r in ratios], "spread": _spread(ratios)}
    return rows


def ramp_row(
    sessions: int,
    records: Sequence[Mapping[str, Any]],
    cpu: Mapping[str, Any],
    reference_p99_ms: float | None,
) -> dict[str, Any]:
    values = _values(records, "webrtc", "latencies_ms")
    row: dict[str, Any] = {"sessions": sessions, **pooled(values)}
    counts = [record["counts"] for record in records]
    row["turns"] = sum(c["turns"] for c in counts)
    row["not_measured"] = sum(c["turns"] - c["measured"] for c in counts)
    row["opened"] = len(records)
    row["closed_early"] = sum(bool(record["closed_early"]) for record in records)
    lags = [r["send_lag_max_ms"] for r in records if r["send_lag_max_ms"] is not None]
    row["client_send_lag_max_ms"] = max(lags) if lags else None
    tails = [r["send_lag_p99_ms"] for r in records if r["send_lag_p99_ms"] is not None]
    row["client_send_lag_p99_ms"] = max(tails) if tails else None  # the worst lane's p99
    row["load_added_p99_ms"] = (
        None
        if row["p99_ms"] is None or reference_p99_ms is None
        else round(row["p99_ms"] - reference_p99_ms, 2)
    )
    row["gateway_cores"] = cpu["cores"]["gateway"]
    row["client_cores"] = cpu["cores"]["clients"]
    row["fake_cores"] = cpu["cores"]["fake"]
    row["other_cores"] = cpu["other_cores"]
    row["gateway_cores_per_session"] = round(cpu["cores"]["gateway"] / sessions, 4)
    row["bound"] = bound_by(row)
    return row


def bound_by(row: Mapping[str, Any]) -> str:
    """What ran out of CPU at a level: the gateway's core; the core the clients share with the
    fake; the box as a whole (other people's processes are not pinned: they take from both
    cores); or the clients' clock (a lane's microphone frames handed over more than
    ``LATE_CLIENT_MS`` late at p99). "" when none did."""
    full = []
    if row["gateway_cores"] >= SATURATED_CORES:
        full.append("gateway")
    if row["client_cores"] + row["fake_cores"] >= SATURATED_CORES:
        full.append("clients")
    ours = row["gateway_cores"] + row["client_cores"] + row["fake_cores"]
    if ours + row["other_cores"] >= 2 * SATURATED_CORES:
        full.append("box")
    late = row["client_send_lag_p99_ms"]
    if late is not None and late > LATE_CLIENT_MS:
        full.append("clients late")
    return ", ".join(full)


def ramp_knee(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first level whose load-added p99 passes ``RAMP_LIMIT_MS``, or that could not
    measure more than ``LOST_TURNS`` of its turns (a reply later than the slot allows) or lost
    a session; else the largest tested."""
    for row in rows:
        added = row["load_added_p99_ms"]
        lost = row["not_measured"] > LOST_TURNS * max(1, row["turns"])
        broken = row["closed_early"] or row["p99_ms"] is None or lost
        if broken or (added is not None and added > RAMP_LIMIT_MS):
            return {"passed_at": row["sessions"], "largest_tested": rows[-1]["sessions"]}
    return {"passed_at": None, "largest_tested": rows[-1]["sessions"] if rows else None}


def rss_growth(samples: Sequence[Mapping[str, Any]], warmup_s: float) -> dict[str, Any]:
    """RSS growth from the first sample at or after ``warmup_s`` to the last one."""
    after = [s for s in samples if s["t_s"] >= warmup_s]
    if len(after) < 2:
        return {"growth": None}
    first, last = after[0]["rss_kb"], after[-1]["rss_kb"]
    return {
        "from_s": after[0]["t_s"],
        "to_s": after[-1]["t_s"],
        "rss_kb_from": first,
        "rss_kb_to": last,
        "rss_kb_max": max(s["rss_kb"] for s in after),
        "growth": round((last - first) / first, 4),
        "target": TARGET_RSS_GROWTH,
    }
