"""``docs/bench/latency.png``: what the gateway adds to voice-to-voice latency, per path.

Two panels: the added p50 per path (bars, one per upstream; the added p99 written above each)
with the 10 ms target as a line; and per path and upstream the CDF of every turn through the
gateway minus the direct lane's p50 (where the gateway's turns fall against the direct median;
the axis spans the middle 99 % of all turns). The data
selection is pure (``added_bars``, ``added_cdfs``); only ``render_latency_plot`` draws
(matplotlib, the ``bench`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.latency.stats import (
    PATH_TITLES,
    PATHS,
    TARGET_ADDED_P50_MS,
    UPSTREAM_TITLES,
    UPSTREAMS,
    measured,
)

__all__ = ["added_bars", "added_cdfs", "plotted_paths", "render_latency_plot"]

_COLORS = {"openai": "C0", "gemini": "C1"}
_STYLES: dict[str, Any] = {
    "browser_24k": "-",
    "browser_16k": "--",
    "browser_48k": ":",
    "phone": "-.",
    "phone_telnyx": (0, (5, 1)),
    "phone_plivo": (0, (3, 1, 1, 1, 1, 1)),
    "phone_vonage": (0, (1, 3)),
    "phone_exotel": (0, (8, 2, 1, 2)),
}


def _tick(path: str) -> str:
    """A path's title on two short lines: "phone (Telnyx, µ-law 8 kHz)" → "Telnyx phone" over
    "µ-law 8 kHz", "browser 16 kHz" → "browser" over "16 kHz"."""
    title = PATH_TITLES[path]
    if title.startswith("phone (") and title.endswith(")"):
        carrier, _, line = title[len("phone (") : -1].partition(", ")
        return f"{carrier} phone\n{line}"
    kind, _, rate = title.partition(" ")
    return f"{kind}\n{rate}"


def plotted_paths(rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The paths the run measured (some phases may not have run), in table order."""
    measured_paths = {row["path"] for row in rows}
    return tuple(path for path in PATHS if path in measured_paths)


def added_bars(
    rows: Sequence[Mapping[str, Any]], paths: Sequence[str] = PATHS
) -> dict[str, list[tuple[int, float, float | None]]]:
    """upstream → (index of the path in ``paths``, added p50, added p99) for every row it has."""
    bars: dict[str, list[tuple[int, float, float | None]]] = {}
    for row in rows:
        if row["added_p50_ms"] is None or row["path"] not in paths:
            continue
        at = list(paths).index(row["path"])
        bars.setdefault(row["upstream"], []).append(
            (at, float(row["added_p50_ms"]), row["added_p99_ms"])
        )
    return bars


def added_cdfs(
    rows: Sequence[Mapping[str, Any]], lanes: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(upstream, path) → CDF points of (gateway turn − direct p50), in ms."""
    gateway = {
        (lane["upstream"], lane["path"]): lane for lane in lanes if lane["target"] == "gateway"
    }
    series: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for row in rows:
        key = (row["upstream"], row["path"])
        lane = gateway.get(key)
        if lane is None or row["direct_p50_ms"] is None:
            continue
        values = sorted(v - float(row["direct_p50_ms"]) for v in measured(lane["latencies_ms"]))
        if values:
            count = len(values)
            series[key] = [(value, (i + 1) / count) for i, value in enumerate(values)]
    return series


def render_latency_plot(report: Mapping[str, Any], path: Path, caption: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["summary"]
    paths = plotted_paths(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    wide = len(paths) > 4  # the carriers' phones too: room for eight groups of bars
    figure, (bars_axis, cdf_axis) = plt.subplots(
        1, 2, figsize=(17, 5.6) if wide else (13, 4.8), width_ratios=(1.3, 1) if wide else None
    )
    width = 0.8 / len(UPSTREAMS)
    bars = added_bars(rows, paths)
    p50s = [p50 for points in bars.values() for _, p50, _ in points]
    top = 1.6 * max([TARGET_ADDED_P50_MS, *p50s])
    for slot, upstream in enumerate(UPSTREAMS):
        points = bars.get(upstream, [])
        if not points:
            continue
        xs = [at - 0.4 + width * (slot + 0.5) for at, _, _ in points]
        bars_axis.bar(
            xs,
            [p50 for _, p50, _ in points],
            width,
            color=_COLORS[upstream],
            label=f"{UPSTREAM_TITLES[upstream]}",
        )
        for x, (_, p50, p99) in zip(xs, points, strict=True):
            if p99 is not None:  # as text: one slow turn must not flatten every bar
                label = f"p99\n{p99:+.1f}"
                bars_axis.text(x, max(p50, 0) + top * 0.02, label, ha="center", fontsize="x-small")
    bars_axis.set_ylim(bottom=min([0.0, *p50s]) * 1.3 - 1, top=top)
    bars_axis.axhline(TARGET_ADDED_P50_MS, color="red", linewidth=1, linestyle="--")
    bars_axis.text(-0.45, TARGET_ADDED_P50_MS, " target p50", color="red", va="bottom")
    bars_axis.axhline(0, color="black", linewidth=0.6)
    bars_axis.set_xticks(range(len(paths)), [_tick(p) for p in paths], fontsize="small")
    bars_axis.set_ylabel("added p50, ms (gateway − direct)")
    bars_axis.set_title("Added voice-to-voice latency per path (p99 above each bar)")
    bars_axis.grid(True, axis="y", alpha=0.3)
    bars_axis.legend(fontsize="small", loc="upper right")
    cdfs = added_cdfs(rows, report["lanes"])
    for (upstream, name), cdf in cdfs.items():
        cdf_axis.plot(
            [ms for ms, _ in cdf],
            [q for _, q in cdf],
            color=_COLORS[upstream],
            linestyle=_STYLES[name],
            label=f"{upstream} · {PATH_TITLES[name]}",
        )
    everything = sorted(ms for cdf in cdfs.values() for ms, _ in cdf)
    if everything:  # the middle 99 %: a rare stall would squeeze every curve into a line
        low = everything[int(0.005 * (len(everything) - 1))]
        high = everything[int(0.995 * (len(everything) - 1))]
        cdf_axis.set_xlim(min(low, -5.0) - 2, max(high, 25.0) + 2)
    cdf_axis.axvline(0, color="black", linewidth=0.6)
    cdf_axis.set_xlabel("turn through the gateway − direct p50, ms")
    cdf_axis.set_ylabel("fraction of turns")
    cdf_axis.set_title("Every turn through the gateway against the direct median")
    cdf_axis.grid(True, alpha=0.3)
    cdf_axis.legend(fontsize="xx-small" if wide else "x-small", ncol=2 if wide else 1)
    figure.suptitle(
        f"Voice-to-voice latency, end of speech → first reply audio — {caption}",
        fontsize="medium",
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
