"""The summary of ``scripts/bench relay``: spreads over repetitions, the table, the machine.

Pure: takes the records of ``bench.relay.bench`` and returns values or text.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from bench.relay.procs import CLOCK_TICKS_PER_S, CorePlan
from bench.relay.stats import NOISY_OTHER_CORES, Spread, paired_differences
from bench.relay.targets import ProviderSpec, Target

__all__ = ["TARGETS", "machine", "render", "summarize", "title"]

TARGETS: tuple[Target, ...] = ("direct", "gateway")
DROPPED = "gateway_audio_frames_dropped_total"


def summarize(records: list[dict[str, Any]], session_counts: list[int]) -> list[dict[str, Any]]:
    """One row per target × sessions: spreads over repetitions, added latency paired by rep."""

    def values(rows: list[dict[str, Any]], key: str) -> list[float]:
        return [row[key] for row in rows if row.get(key) is not None]

    def spread(numbers: list[float]) -> dict[str, float] | None:
        return Spread.of(numbers).as_dict() if numbers else None

    summary = []
    for sessions in session_counts:
        by_target = {
            target: sorted(
                (r for r in records if r["target"] == target and r["sessions"] == sessions),
                key=lambda r: int(r["rep"]),
            )
            for target in TARGETS
        }
        for target in TARGETS:
            rows = by_target[target]
            row: dict[str, Any] = {"target": target, "sessions": sessions, "reps": len(rows)}
            for key in (
                "p50_ms",
                "p99_ms",
                "max_ms",
                "first_second_max_ms",
                "relay_cpu_us_per_frame",
                "other_cores",
            ):
                row[key] = spread(values(rows, key))
            for key in ("p50_ms", "p99_ms"):
                added = None
                if target != "direct":
                    gateway, direct = values(rows, key), values(by_target["direct"], key)
                    if gateway and len(gateway) == len(direct):
                        added = spread(paired_differences(gateway, direct))
                row[f"added_{key}"] = added
            for key in ("frames_sent", "lost", "corrupt", "stray"):
                row[key] = sum(int(r[key]) for r in rows)
            row["noisy_reps"] = sum(1 for r in rows if r["noisy"])
            row["gateway_audio_dropped"] = sum(
                int(r.get("gateway_counters", {}).get(DROPPED, 0)) for r in rows
            )
            summary.append(row)
    return summary


def _cell(spread: dict[str, float] | None, decimals: int) -> str:
    if spread is None:
        return "–"
    return Spread(spread["median"], spread["min"], spread["max"]).render(decimals)


def title(provider: ProviderSpec) -> str:
    return (
        f"relay bench, provider {provider.name}: {provider.title}; "
        f"{provider.frame_bytes}-byte frames of PCM16, {provider.input_rate / 1000:g} kHz in, "
        f"{provider.output_rate / 1000:g} kHz out"
    )


def render(summary: list[dict[str, Any]], provider: ProviderSpec) -> str:
    header = (
        f"{'target':<8} {'sessions':>8}  {'p50 ms':<21} {'p99 ms':<21} {'max ms':<21} "
        f"{'1st s max ms':<21} {'CPU µs/frame':<18} {'added p50 ms':<21} {'added p99 ms':<21} "
        f"{'lost':>5}  {'other cores':<19} noisy"
    )
    lines = [title(provider), "", header, "-" * len(header)]
    for row in summary:
        lines.append(
            f"{row['target']:<8} {row['sessions']:>8}  {_cell(row['p50_ms'], 3):<21} "
            f"{_cell(row['p99_ms'], 3):<21} {_cell(row.get('max_ms'), 2):<21} "
            f"{_cell(row.get('first_second_max_ms'), 2):<21} "
            f"{_cell(row['relay_cpu_us_per_frame'], 0):<18} "
            f"{_cell(row['added_p50_ms'], 3):<21} {_cell(row['added_p99_ms'], 3):<21} "
            f"{row['lost']:>5}  {_cell(row['other_cores'], 2):<19} "
            f"{row['noisy_reps']}/{row['reps']}"
        )
    lines += [
        "",
        "median [min–max] over repetitions; round trip = send → the same frame back, from each "
        "session's first frame; 1st s max: the slowest of the sessions' first seconds. added = "
        "gateway − direct at the same session count, paired by repetition.",
        "CPU µs/frame: the relaying process per frame pair (gateway; for direct, the fake's own "
        f"CPU, for information). noisy: other processes used > {NOISY_OTHER_CORES} cores.",
    ]
    corrupt = sum(int(row["corrupt"]) for row in summary)
    stray = sum(int(row["stray"]) for row in summary)
    if corrupt or stray:
        lines.append(f"WARNING: {corrupt} frame(s) came back altered, {stray} stray frame(s).")
    dropped = sum(int(row["gateway_audio_dropped"]) for row in summary)
    if dropped:
        lines.append(
            f"WARNING: the gateway counted {dropped} audio frame(s) dropped (slow client)."
        )
    return "\n".join(lines)


def machine(
    allowed_cpus: list[int], cores: CorePlan | None, pinned: bool, pin_note: str
) -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "allowed_cpus": allowed_cpus,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "clock_ticks_per_s": CLOCK_TICKS_PER_S,
        "pinning": {
            "pinned": pinned,
            "note": pin_note,
            "relay_core": cores.relay_core if cores else None,
            "load_core": cores.load_core if cores else None,
            "placement": {
                "direct": "fake alone on the relay core; load generator on the load core",
                "gateway": "gateway alone on the relay core; fake and load generator on the "
                "load core",
            },
        },
    }
