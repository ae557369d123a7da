"""PNG plots of ``scripts/bench all`` into ``docs/bench/`` (matplotlib, the ``bench`` extra).

- ``latency_cdf.png``: round-trip CDF per target, ping-pong and the first load level (for each
  target the repetition with the median p99);
- ``cpu_per_frame.png``: CPU µs per frame pair of the relaying process versus sessions;
- ``p99_vs_sessions.png``: p99 round trip versus sessions.

The last two come from the capacity ramp. The data selection is pure (``cdf_series``,
``ramp_series``); only ``render_plots`` draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.suite.targets import ALL_TARGETS

__all__ = ["cdf_series", "ramp_series", "render_plots"]


def _color(target: str) -> str:
    """The same color for a target in every plot (matplotlib's tab10, in table order)."""
    index = ALL_TARGETS.index(target) if target in ALL_TARGETS else len(ALL_TARGETS)
    return f"C{index % 10}"


def _median_rep(rows: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    ranked = sorted(
        (r for r in rows if r.get("p99_ms") is not None and r.get("cdf")),
        key=lambda r: float(r["p99_ms"]),
    )
    return ranked[len(ranked) // 2] if ranked else None


def cdf_series(
    runs: Sequence[Mapping[str, Any]], targets: Sequence[str], kind: str, sessions: int
) -> dict[str, list[tuple[float, float]]]:
    """target → CDF points of its median-p99 repetition of ``kind`` at ``sessions``."""
    series: dict[str, list[tuple[float, float]]] = {}
    for target in targets:
        rows = [
            r
            for r in runs
            if r["target"] == target
            and r["kind"] == kind
            and int(r["sessions"]) == sessions
            and not r.get("superseded")
        ]
        chosen = _median_rep(rows)
        if chosen is not None:
            series[target] = [(float(ms), float(q)) for ms, q in chosen["cdf"]]
    return series


def ramp_series(
    runs: Sequence[Mapping[str, Any]], targets: Sequence[str], key: str
) -> dict[str, list[tuple[int, float]]]:
    """target → (sessions, ``key``) along the capacity ramp."""
    series: dict[str, list[tuple[int, float]]] = {}
    for target in targets:
        points = sorted(
            (int(r["sessions"]), float(r[key]))
            for r in runs
            if r["target"] == target and not r.get("superseded") and r.get(key) is not None
        )
        if points:
            series[target] = points
    return series


def render_plots(
    relay: Mapping[str, Any] | None,
    capacity: Mapping[str, Any] | None,
    out_dir: Path,
    caption: str,
) -> list[Path]:
    """Draw what the reports allow; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if relay is not None:
        targets = list(relay["plan"]["targets"])
        loads = relay["plan"]["loads"]
        panels = [("pingpong", 1, "ping-pong (one session, serial)")]
        if loads:
            first = int(loads[0]["sessions"])
            panels.append(("load", first, f"{first} sessions × {relay['plan']['fps']:g} fps"))
        figure, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8))
        axes_list = list(axes) if len(panels) > 1 else [axes]
        for axis, (kind, sessions, title) in zip(axes_list, panels, strict=True):
            for target, points in cdf_series(relay["runs"], targets, kind, sessions).items():
                axis.plot(
                    [ms for ms, _ in points],
                    [q for _, q in points],
                    label=target,
                    color=_color(target),
                )
            axis.set_xscale("log")
            axis.set_xlabel("round trip, ms (log)")
            axis.set_ylabel("fraction of frames")
            axis.set_title(title)
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(fontsize="small")
        figure.suptitle(f"Round-trip latency CDF per target — {caption}", fontsize="medium")
        figure.tight_layout()
        written.append(_save(figure, out_dir / "latency_cdf.png"))
        plt.close(figure)
    if capacity is not None:
        targets = list(capacity["plan"]["targets"])
        for key, name, label, title in (
            (
                "relay_cpu_us_per_frame",
                "cpu_per_frame.png",
                "CPU µs per frame pair",
                "CPU per frame pair of the relaying process (direct: the fake's own)",
            ),
            ("p99_ms", "p99_vs_sessions.png", "p99 round trip, ms (log)", "p99 round trip"),
        ):
            figure, axis = plt.subplots(figsize=(7.5, 4.8))
            for target, ramp in ramp_series(capacity["runs"], targets, key).items():
                axis.plot(
                    [n for n, _ in ramp],
                    [v for _, v in ramp],
                    marker="o",
                    label=target,
                    color=_color(target),
                )
            if key == "p99_ms":
                axis.set_yscale("log")
            axis.set_xlabel(f"sessions at {capacity['plan']['fps']:g} frames/s")
            axis.set_ylabel(label)
            axis.set_title(f"{title} versus sessions\n{caption}", fontsize="medium")
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize="small")
            figure.tight_layout()
            written.append(_save(figure, out_dir / name))
            plt.close(figure)
    return written


def _save(figure: Any, path: Path) -> Path:
    figure.savefig(path, dpi=110)
    return path
