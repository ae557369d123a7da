"""The pure arithmetic of the suite: one run's record, spreads over repetitions, the knee.

No sockets, no processes: records in, values out (tested in ``tests/unit/bench/``). A record
is a plain dict (it goes to JSON as is): the goload report's numbers, the CPU of each role
over the measured window and the relaying process's resident memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bench.relay.stats import CpuUsage, Spread, cpu_us_per_frame, paired_differences
from bench.suite.targets import FRAME_MS

__all__ = [
    "KNEE_ADDED_P99_MS",
    "added_spread",
    "capacity_rows",
    "delivered_all",
    "latest",
    "level_passed",
    "paired_ratios",
    "run_record",
    "spread_of",
    "summarize_group",
]

KNEE_ADDED_P99_MS = 10.0  # a ramp level passes with every frame back and p99 added ≤ this


# Spreads over repetitions in a summary row: latency from each session's first frame (the
# tail: p99 and the slowest frame; a session's first second alone), set-up, CPU, noise.
_SPREAD_KEYS = (
    "p50_ms",
    "p99_ms",
    "max_ms",
    "first_second_max_ms",
    "setup_p50_ms",
    "setup_max_ms",
    "relay_cpu_us_per_frame",
    "other_cores",
)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_record(
    run: Mapping[str, Any],
    raw: Mapping[str, Any],
    usage: CpuUsage | None,
    rss_kb: Mapping[str, int],
    held_back_frames: int = 0,
) -> dict[str, Any]:
    """One run: ``run`` (what was asked), goload's report, CPU per role, memory.
    ``held_back_frames``: per session, tail frames a resampler may keep (not counted lost)."""
    rtt = raw.get("rtt_ms") or {}
    setup = raw.get("setup_ms") or {}
    first_second = raw.get("first_second_ms") or {}
    received = int(raw.get("received") or 0)
    sessions = int(run.get("sessions") or 1)
    record: dict[str, Any] = dict(run)
    record.update(
        {
            "sent": int(raw.get("sent") or 0),
            "received": received,
            "lost": int(raw.get("lost") or 0),
            "lost_allowed": held_back_frames * sessions,
            # frames held back also arrive late, by whole frames: the knee's limit allows it
            "latency_allowance_ms": held_back_frames * FRAME_MS,
            "mismatched": int(raw.get("mismatched") or 0),
            "errors": int(raw.get("errors") or 0),
            "connect_failed": int(raw.get("connect_failed") or 0),
            "unsent": int(raw.get("unsent") or 0),
            "timed_out": bool(raw.get("timed_out")),
            "p50_ms": _number(rtt.get("p50")),
            "p90_ms": _number(rtt.get("p90")),
            "p99_ms": _number(rtt.get("p99")),
            "p999_ms": _number(rtt.get("p999")),
            "max_ms": _number(rtt.get("max")),
            "mean_ms": _number(rtt.get("mean")),
            "setup_p50_ms": _number(setup.get("p50")),
            "setup_p99_ms": _number(setup.get("p99")),
            "setup_max_ms": _number(setup.get("max")),
            # each session's first second (its first fps frames), warm-up or not
            "first_second_p99_ms": _number(first_second.get("p99")),
            "first_second_max_ms": _number(first_second.get("max")),
            "window_s": _number(raw.get("window_s")),
            "cdf": raw.get("cdf") or [],
        }
    )
    if usage is not None:
        record["cpu_s"] = {role: round(seconds, 4) for role, seconds in usage.process_s.items()}
        relay_s = usage.process_s.get("relay", 0.0)
        record["relay_cpu_us_per_frame"] = cpu_us_per_frame(relay_s, received)
        record["relay_cores"] = round(relay_s / usage.wall_s, 4)
        record["load_cores"] = round(usage.process_s.get("load", 0.0) / usage.wall_s, 4)
        record["other_cores"] = round(usage.other_cores, 4)
        record["interrupt_cores"] = round(usage.interrupt_cores, 4)
        record["cpu_window_s"] = round(usage.wall_s, 3)
        record["noisy"] = usage.noisy
    else:  # goload never opened its window (nothing connected)
        record.update(relay_cpu_us_per_frame=None, other_cores=None, noisy=False)
    before, during = rss_kb.get("before"), rss_kb.get("window")
    record["rss_kb"] = dict(rss_kb)
    record["rss_per_session_kb"] = (
        round((during - before) / sessions, 1)
        if before is not None and during is not None and sessions
        else None
    )
    return record


def delivered_all(record: Mapping[str, Any]) -> bool:
    """Every measured frame back intact (but the tail a resampler may hold back: the record's
    ``lost_allowed``), every session connected, no error event."""
    return (
        int(record["sent"]) > 0
        and int(record["lost"]) <= int(record.get("lost_allowed", 0))
        and int(record["mismatched"]) == 0
        and int(record["errors"]) == 0
        and int(record["connect_failed"]) == 0
        and int(record.get("unsent", 0)) == 0
        and not record.get("timed_out")
        and not record.get("failed")
    )


def latest(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records a summary uses: those not superseded by a rerun."""
    return [record for record in records if not record.get("superseded")]


def spread_of(values: Sequence[float | None]) -> dict[str, float] | None:
    present = [value for value in values if value is not None]
    return Spread.of(present).as_dict() if present else None


def added_spread(
    target_rows: Sequence[Mapping[str, Any]], direct_rows: Sequence[Mapping[str, Any]], key: str
) -> dict[str, float] | None:
    """``target − direct`` for ``key``, paired by repetition (reps present on both sides)."""
    direct = {row["rep"]: row[key] for row in direct_rows if row.get(key) is not None}
    pairs = [
        (row[key], direct[row["rep"]])
        for row in target_rows
        if row.get(key) is not None and row["rep"] in direct
    ]
    if not pairs:
        return None
    return Spread.of(paired_differences([a for a, _ in pairs], [b for _, b in pairs])).as_dict()


def summarize_group(
    records: Sequence[Mapping[str, Any]], targets: Sequence[str]
) -> list[dict[str, Any]]:
    """One row per target for records of one kind and session count (several repetitions)."""
    current = latest(records)
    by_target = {t: [r for r in current if r["target"] == t] for t in targets}
    rows = []
    for target in targets:
        rows_t = sorted(by_target[target], key=lambda r: int(r["rep"]))
        if not rows_t:
            continue
        row: dict[str, Any] = {"target": target, "reps": len(rows_t)}
        for key in _SPREAD_KEYS:
            row[key] = spread_of([r.get(key) for r in rows_t])
        for key in ("p50_ms", "p99_ms"):
            direct = by_target.get("direct", [])
            row[f"added_{key}"] = None if target == "direct" else added_spread(rows_t, direct, key)
        for key in ("sent", "lost", "lost_allowed", "mismatched", "errors", "connect_failed"):
            row[key] = sum(int(r.get(key, 0)) for r in rows_t)
        row["failed_runs"] = sum(1 for r in rows_t if r.get("failed"))
        row["noisy_reps"] = sum(1 for r in rows_t if r.get("noisy"))
        row["reruns"] = sum(1 for r in records if r["target"] == target and r.get("superseded"))
        rows.append(row)
    return rows


def paired_ratios(
    records: Sequence[Mapping[str, Any]], numerator: str, denominator: str, key: str
) -> list[dict[str, Any]]:
    """``numerator ÷ denominator`` for ``key``, one per repetition both rows have (the kept
    record of a rerun): e.g. ``gateway_compat`` p99 over ``gateway``'s, or a row's CPU over its
    baseline's, measured side by side."""
    current = latest(records)
    below = {r["rep"]: r.get(key) for r in current if r["target"] == denominator}
    ratios = []
    for record in sorted(current, key=lambda r: int(r["rep"])):
        if record["target"] != numerator:
            continue
        top, bottom = record.get(key), below.get(record["rep"])
        if top is None or not bottom:
            continue
        ratios.append({"rep": record["rep"], "ratio": round(float(top) / float(bottom), 3)})
    return ratios


def level_passed(
    record: Mapping[str, Any],
    direct: Mapping[str, Any] | None,
    limit_ms: float = KNEE_ADDED_P99_MS,
) -> tuple[bool, float | None]:
    """Whether a ramp level passed, and its p99 added over ``direct`` at the same level.

    It passes with every frame back and p99 added ≤ ``limit_ms`` (plus the record's
    ``latency_allowance_ms`` for frames a resampler holds back). Without a ``direct`` p99 to
    compare with, only the frames count."""
    p99 = record.get("p99_ms")
    base = None if direct is None else direct.get("p99_ms")
    if p99 is None:
        return False, None
    if base is None or record["target"] == "direct":
        return delivered_all(record), None
    added = float(p99) - float(base)
    allowance = float(record.get("latency_allowance_ms", 0.0))
    return delivered_all(record) and added <= limit_ms + allowance, added


def capacity_rows(
    records: Sequence[Mapping[str, Any]],
    targets: Sequence[str],
    fps: float,
    limit_ms: float = KNEE_ADDED_P99_MS,
) -> list[dict[str, Any]]:
    """Per target: each ramp level (pass or fail), and the knee: the last level of the
    unbroken run of passing levels from the bottom. A level passes with every frame back and
    p99 added over ``direct`` (at the same level) ≤ ``limit_ms``."""
    current = latest(records)
    direct_at = {int(r["sessions"]): r for r in current if r["target"] == "direct"}
    rows = []
    for target in targets:
        levels = sorted(
            (r for r in current if r["target"] == target), key=lambda r: int(r["sessions"])
        )
        if not levels:
            continue
        steps: list[dict[str, Any]] = []
        knee: Mapping[str, Any] | None = None
        broken = False
        for record in levels:
            sessions = int(record["sessions"])
            passed, added = level_passed(record, direct_at.get(sessions), limit_ms)
            p99 = record.get("p99_ms")
            steps.append(
                {
                    "sessions": sessions,
                    "passed": passed,
                    "p99_ms": p99,
                    "added_p99_ms": None if added is None else round(added, 3),
                    "lost": record["lost"],
                    "relay_cpu_us_per_frame": record.get("relay_cpu_us_per_frame"),
                    "relay_cores": record.get("relay_cores"),
                    "noisy": record.get("noisy"),
                }
            )
            if passed and not broken:
                knee = record
            broken = broken or not passed
        top = knee if knee is not None else levels[0]
        cpu = top.get("relay_cpu_us_per_frame")
        rows.append(
            {
                "target": target,
                "knee_sessions": None if knee is None else int(knee["sessions"]),
                # relaying process pinned to one core: the knee is in sessions per core
                "sessions_per_core": None if knee is None else int(knee["sessions"]),
                "sessions_per_core_by_cpu": (
                    None if not cpu else round(1e6 / (cpu * fps))
                ),  # what one full core would carry at the measured cost per frame pair
                "at_sessions": int(top["sessions"]),
                "setup_p50_ms": top.get("setup_p50_ms"),
                "setup_p99_ms": top.get("setup_p99_ms"),
                "rss_per_session_kb": top.get("rss_per_session_kb"),
                "relay_cpu_us_per_frame": cpu,
                "levels": steps,
            }
        )
    return rows
