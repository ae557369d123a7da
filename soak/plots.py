"""The soak's curves: resident memory and open files of each process over the run (a node's
incarnations in one colour, a gap where it restarted), its open sessions, the calm phase shaded
and every fleet fault marked. Needs matplotlib (the bench extra); without it, no plots."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from soak.monitor import ResourceSample

__all__ = ["render_plots"]

COLOURS = {
    "node-a": "tab:blue",
    "node-b": "tab:orange",
    "driver": "tab:green",
    "upstreams-openai": "tab:purple",
    "upstreams-gemini": "tab:pink",
    "upstreams-chat": "tab:brown",
    "redis": "tab:red",
}


def _rss_mb(sample: ResourceSample) -> float:
    return sample.rss_kb / 1024


def _fds(sample: ResourceSample) -> float:
    return float(sample.fds)


def render_plots(
    samples: Sequence[ResourceSample],
    node_sessions: Sequence[tuple[float, str, int]],
    faults: Sequence[dict[str, Any]],
    calm_end_s: float,
    folder: Path,
) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")  # a file, never a window
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    series: dict[tuple[str, int], list[ResourceSample]] = defaultdict(list)
    for sample in samples:
        series[(sample.role, sample.pid)].append(sample)
    written = []
    measures: tuple[tuple[str, str, Callable[[ResourceSample], float]], ...] = (
        ("rss", "resident memory (MB)", _rss_mb),
        ("fds", "open files", _fds),
    )
    for what, label, value in measures:
        figure, (top, bottom) = plt.subplots(
            2, 1, figsize=(10, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
        )
        seen: set[str] = set()
        for (role, _pid), points in sorted(series.items(), key=lambda kv: kv[1][0].at):
            top.plot(
                [p.at for p in points],
                [value(p) for p in points],
                color=COLOURS.get(role, "grey"),
                label=None if role in seen else role,
                linewidth=1.2,
            )
            seen.add(role)
        for name in ("a", "b"):
            points_ = [(at, count) for at, node, count in node_sessions if node == name]
            bottom.plot(
                [at for at, _ in points_],
                [count for _, count in points_],
                color=COLOURS[f"node-{name}"],
                label=f"node-{name}",
            )
        for axis in (top, bottom):
            axis.axvspan(0, calm_end_s, color="0.93", zorder=0)
            for fault in faults:
                if fault["kind"] in ("sigterm_restart", "redis_restart"):
                    axis.axvline(fault["at_s"], color="0.5", linestyle=":", linewidth=1)
        top.set_ylabel(label)
        top.set_title(f"soak: {label} per process (grey: calm phase; dotted: restarts)")
        top.legend(loc="upper left", fontsize=8)
        bottom.set_ylabel("open sessions")
        bottom.set_xlabel("seconds since the load began")
        bottom.legend(loc="upper left", fontsize=8)
        figure.tight_layout()
        path = folder / f"{what}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
    return written
