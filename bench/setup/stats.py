"""The pure parts of ``scripts/bench setup``: the samples' percentiles per repetition, the
per-repetition ratios and their median (the project's rule), the table. No I/O, no clock."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.relay.stats import percentile

__all__ = [
    "PARTS",
    "TARGETS",
    "Sample",
    "median_ratio",
    "order_of",
    "per_rep",
    "ratios",
    "render",
    "summarize",
]

# The configurations: the pool on, off, and on again in a process of its own (the A/A row).
TARGETS = ("pool", "no_pool", "pool_again")
# What is timed: a native session's start, and a phone call's greeting.
PARTS = ("session", "call")
PART_TITLES = {
    "session": "native session.start → session.started (text)",
    "call": "Twilio start → first media frame of the greeting",
}


@dataclass(frozen=True, slots=True)
class Sample:
    part: str  # one of PARTS
    target: str  # one of TARGETS
    rep: int
    index: int  # its place in the repetition's run of sessions
    ms: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "target": self.target,
            "rep": self.rep,
            "index": self.index,
            "ms": round(self.ms, 3),
        }


def order_of(rep: int, targets: Sequence[str] = TARGETS) -> tuple[str, ...]:
    """The targets in repetition ``rep``'s order: as given, then reversed, and so on (each
    target is first as often as last)."""
    return tuple(targets) if rep % 2 == 0 else tuple(reversed(targets))


def per_rep(
    samples: Sequence[Sample], part: str, slow_ms: float
) -> dict[int, dict[str, dict[str, float]]]:
    """Per repetition, per target: ``n``, ``p50``, ``p99`` (ms) and ``slow`` (how many took at
    least ``slow_ms``: with the pool on, a session that found no connection ready)."""
    grouped: dict[int, dict[str, list[float]]] = {}
    for sample in samples:
        if sample.part == part:
            grouped.setdefault(sample.rep, {}).setdefault(sample.target, []).append(sample.ms)
    return {
        rep: {
            target: {
                "n": float(len(values)),
                "p50": percentile(values, 50),
                "p99": percentile(values, 99),
                "slow": float(sum(1 for v in values if v >= slow_ms)),
            }
            for target, values in sorted(by_target.items())
        }
        for rep, by_target in sorted(grouped.items())
    }


def ratios(
    reps: Mapping[int, Mapping[str, Mapping[str, float]]],
    numerator: str,
    denominator: str,
    stat: str,
) -> list[float]:
    """``stat`` of ``numerator`` ÷ that of ``denominator``, per repetition where both ran
    (in repetition order)."""
    found = []
    for rep in sorted(reps):
        row = reps[rep]
        if numerator in row and denominator in row and row[denominator][stat] > 0:
            found.append(row[numerator][stat] / row[denominator][stat])
    return found


def median_ratio(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(samples: Sequence[Sample], slow_ms: float) -> dict[str, Any]:
    """Per part: each target's median over repetitions of its p50 and p99, its p50 and p99 over
    every sample, the sessions at least ``slow_ms``; the ratios on ÷ off and the A/A ratios
    (on again ÷ on) per repetition and their medians."""
    summary: dict[str, Any] = {}
    for part in PARTS:
        reps = per_rep(samples, part, slow_ms)
        if not reps:
            continue
        targets = sorted({t for row in reps.values() for t in row}, key=TARGETS.index)
        every = {t: [s.ms for s in samples if s.part == part and s.target == t] for t in targets}
        entry: dict[str, Any] = {
            "reps": {str(rep): row for rep, row in reps.items()},
            "targets": {
                t: {
                    "samples": len(every[t]),
                    "p50_median_of_reps": statistics.median(
                        row[t]["p50"] for row in reps.values() if t in row
                    ),
                    "p99_median_of_reps": statistics.median(
                        row[t]["p99"] for row in reps.values() if t in row
                    ),
                    "p50_all": percentile(every[t], 50),
                    "p99_all": percentile(every[t], 99),
                    "slow": sum(int(row[t]["slow"]) for row in reps.values() if t in row),
                }
                for t in targets
            },
        }
        for stat in ("p50", "p99"):
            on_off = ratios(reps, "pool", "no_pool", stat)
            aa = ratios(reps, "pool_again", "pool", stat)
            entry[f"{stat}_ratio"] = {"median": median_ratio(on_off), "reps": on_off}
            entry[f"{stat}_ratio_aa"] = {"median": median_ratio(aa), "reps": aa}
        summary[part] = entry
    return summary


def render(summary: Mapping[str, Any], slow_ms: float, target_p50_ms: float) -> str:
    """The table: per part, p50 and p99 (ms, median over repetitions) per target, and the
    median of the per-repetition ratios on ÷ off with the A/A ratio (on again ÷ on) beside it;
    then the sessions that took at least ``slow_ms`` and the verdict on the p50 target."""
    lines = [
        "| measure | pool on | pool off | pool on again | on ÷ off, median of reps"
        " (A/A: again ÷ on) | per rep on ÷ off (A/A) |",
        "|---|---|---|---|---|---|",
    ]
    notes = []
    for part, entry in summary.items():
        t = entry["targets"]
        for stat in ("p50", "p99"):
            cells = [_ms(t.get(name, {}).get(f"{stat}_median_of_reps")) for name in TARGETS]
            ratio, aa = entry[f"{stat}_ratio"], entry[f"{stat}_ratio_aa"]
            lines.append(
                f"| {PART_TITLES.get(part, part)}, {stat} (ms) | {' | '.join(cells)}"
                f" | ×{_x(ratio['median'])} (×{_x(aa['median'])})"
                f" | {_list(ratio['reps'])} ({_list(aa['reps'])}) |"
            )
        slow = ", ".join(
            f"{name} {t[name]['slow']}/{t[name]['samples']}" for name in TARGETS if name in t
        )
        notes.append(f"{part}: samples ≥ {slow_ms:g} ms: {slow}")
        if part == "session" and "pool" in t:
            p50 = t["pool"]["p50_median_of_reps"]
            verdict = "met" if p50 <= target_p50_ms else "NOT met"
            notes.append(
                f"target: with the pool, session p50 ≤ {target_p50_ms:g} ms: {verdict}"
                f" ({p50:.1f} ms)"
            )
    return "\n".join([*lines, "", *notes])


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _list(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values) or "–"
