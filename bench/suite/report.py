"""Markdown tables of the suite, from its summaries: pure text.

Cells are medians with [min–max] over repetitions (``Spread``); "added" is target − ``direct``
paired by repetition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.relay.stats import NOISY_OTHER_CORES, Spread
from bench.suite.stats import KNEE_ADDED_P99_MS
from bench.suite.targets import SPECS

__all__ = [
    "capacity_table",
    "cpu_table",
    "latency_table",
    "markdown_table",
    "ratios_block",
    "target_notes",
]


def cell(spread: Mapping[str, float] | None, decimals: int) -> str:
    if spread is None:
        return "–"
    return Spread(spread["median"], spread["min"], spread["max"]).render(decimals)


def _value(value: float | None, decimals: int = 0, suffix: str = "") -> str:
    return "–" if value is None else f"{value:.{decimals}f}{suffix}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _lost(row: Mapping[str, Any]) -> str:
    bad = int(row["lost"]) + int(row["mismatched"]) + int(row["connect_failed"])
    allowed = int(row.get("lost_allowed", 0))
    shown = f"{bad}/{row['sent']}" if bad else "0"
    if allowed:
        shown += f" (≤ {allowed} held back)"
    failed = int(row.get("failed_runs", 0))
    return f"{shown}; {failed} run(s) failed" if failed else shown


def latency_table(title: str, rows: Sequence[Mapping[str, Any]], *, load: bool = False) -> str:
    """Round trips (p50, p99 and the slowest) beside the CPU per frame pair, and what each
    target adds over ``direct``; lost, noisy runs. ``load``: also the slowest frame of the
    sessions' first seconds and the sessions' set-up (what a first frame is compared with)."""
    header = ["target", "p50 ms", "p99 ms", "max ms"]
    if load:
        header += ["1st s max ms", "setup p50 / max ms"]
    header += ["CPU µs/frame pair", "added p50 ms", "added p99 ms", "lost", "noisy/reps"]
    body = []
    for row in rows:
        line = [row["target"], cell(row["p50_ms"], 3), cell(row["p99_ms"], 3)]
        line.append(cell(row.get("max_ms"), 2))
        if load:
            line.append(cell(row.get("first_second_max_ms"), 2))
            line.append(f"{cell(row.get('setup_p50_ms'), 1)} / {cell(row.get('setup_max_ms'), 1)}")
        line += [
            cell(row["relay_cpu_us_per_frame"], 0),
            cell(row["added_p50_ms"], 3),
            cell(row["added_p99_ms"], 3),
            _lost(row),
            f"{row['noisy_reps']}/{row['reps']}"
            + (f" ({row['reruns']} rerun)" if row["reruns"] else ""),
        ]
        body.append(line)
    return f"**{title}**\n\n" + markdown_table(header, body)


def ratios_block(ratios: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]]) -> str:
    """Per session count, each compared pair's ratio in every repetition (``paired_ratios``)."""
    lines = ["**Ratios per repetition** (each measured side by side in the same repetition)", ""]
    for sessions, pairs in ratios.items():
        for name, values in pairs.items():
            shown = ", ".join(f"{v['ratio']:.2f}" for v in values) or "–"
            lines.append(f"- {sessions} sessions, {name}: {shown}")
    return "\n".join(lines)


def cpu_table(by_sessions: Mapping[int, Sequence[Mapping[str, Any]]]) -> str:
    """CPU µs per frame pair of the relaying process, one column per session count."""
    counts = sorted(by_sessions)
    targets = [
        t for t in SPECS if any(r["target"] == t for rows in by_sessions.values() for r in rows)
    ]
    header = ["target", *(f"{n} sessions" for n in counts)]
    body = []
    for target in targets:
        line = [target]
        for count in counts:
            match = [r for r in by_sessions[count] if r["target"] == target]
            line.append(cell(match[0]["relay_cpu_us_per_frame"], 0) if match else "–")
        body.append(line)
    title = "**CPU µs per frame pair of the relaying process** (for direct: the fake's own)"
    return f"{title}\n\n" + markdown_table(header, body)


def capacity_table(rows: Sequence[Mapping[str, Any]], fps: float, top_level: int) -> str:
    """``top_level``: the ramp's last level; a knee there is only a lower bound."""
    header = [
        "target",
        "knee (sessions per core)",
        "by CPU: sessions per core",
        "levels passed",
        "setup p50 / p99 ms",
        "RSS per session KiB",
        "at sessions",
    ]
    body = []
    for row in rows:
        levels = row["levels"]
        shown = " ".join(f"{step['sessions']}{'✓' if step['passed'] else '✗'}" for step in levels)
        body.append(
            [
                row["target"],
                _knee(row["knee_sessions"], top_level),
                _value(row["sessions_per_core_by_cpu"]),
                shown,
                f"{_value(row['setup_p50_ms'], 2)} / {_value(row['setup_p99_ms'], 2)}",
                _value(row["rss_per_session_kb"], 1),
                str(row["at_sessions"]),
            ]
        )
    title = (
        f"**Capacity: ramp at {fps:g} frames/s per session** (knee: the last level with every "
        f"frame back and p99 added ≤ {KNEE_ADDED_P99_MS:g} ms; the relaying process has one core)"
    )
    return f"{title}\n\n" + markdown_table(header, body)


def _knee(sessions: int | None, top_level: int) -> str:
    if sessions is None:
        return "none"
    return f"≥ {sessions}" if sessions >= top_level else str(sessions)


def target_notes(targets: Sequence[str]) -> str:
    lines = [f"- `{t}`: {SPECS[t].title}" for t in targets]
    lines.append(
        f"- noisy: other processes used > {NOISY_OTHER_CORES:g} cores during the window; "
        "such a run is rerun once and the quieter kept."
    )
    return "\n".join(lines)
