"""``docs/bench/failover.png``: per kind of fault, how long the user waited for the fallback's
first audio byte, with the target drawn.

One panel per kind: a histogram of every recovered voice fault's ``fault_to_audio_ms``, the
target (a p95 limit) as a red dashed line, the measured p95 as a black one, a stall's deadline
as a grey dotted one; an inset zooms to the faults' own spread (a few ms wide, where the
target is seconds away). The data selection
is pure (``fallback_audio``); only ``render_failover_plot`` draws (matplotlib, the ``bench``
extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.failover.stats import KINDS, targets_for
from bench.relay.stats import percentile

__all__ = ["fallback_audio", "render_failover_plot"]

_TITLES = {
    "connect_refused": "connection refused at the start",
    "connect_429": "429 at the start's upgrade",
    "lost": "connection lost as the turn ends",
    "stall_first": "no first output after the turn",
    "stall_mid": "answer stops mid-way",
}


def fallback_audio(
    samples: Sequence[Mapping[str, Any]], deadlines: Mapping[str, float]
) -> dict[str, tuple[list[float], float, float]]:
    """kind → (every recovered voice fault's fault → first fallback audio, sorted; its p95;
    the target's limit), in ms, for the kinds that have any."""
    series: dict[str, tuple[list[float], float, float]] = {}
    for kind in KINDS:
        values = sorted(
            float(s["fault_to_audio_ms"])
            for s in samples
            if s["kind"] == kind
            and s["variant"] == "voice"
            and s.get("ok")
            and s.get("fault_to_audio_ms") is not None
        )
        if not values:
            continue
        limit = next(
            t.limit_ms for t in targets_for(kind, deadlines) if t.measure == "fault_to_audio_ms"
        )
        series[kind] = (values, percentile(values, 95), limit)
    return series


def _deadline_ms(kind: str, deadlines: Mapping[str, float]) -> float | None:
    if kind == "stall_first":
        return 1000 * deadlines["first_output_voice_s"]
    if kind == "stall_mid":
        return 1000 * deadlines["output_gap_s"]
    return None


def render_failover_plot(report: Mapping[str, Any], path: Path, caption: str) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    plan = report["plan"]["gateway"]
    deadlines = {k: plan[k] for k in ("first_output_voice_s", "output_gap_s")}
    series = fallback_audio(report["samples"], deadlines)
    if not series:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(1, len(series), figsize=(3.4 * len(series), 4.2), squeeze=False)
    for axis, (kind, (values, p95, limit)) in zip(axes[0], series.items(), strict=True):
        high = max(limit, values[-1]) * 1.08
        axis.hist(values, bins=[high * i / 60 for i in range(61)], color="C0")
        axis.axvline(
            limit, color="red", linestyle="--", linewidth=1.2, label=f"target p95 ≤ {limit:.0f}"
        )
        axis.axvline(p95, color="black", linewidth=1.0, label=f"p95 {p95:.0f}")
        deadline = _deadline_ms(kind, deadlines)
        if deadline is not None:
            axis.axvline(
                deadline,
                color="grey",
                linestyle=":",
                linewidth=1.0,
                label=f"deadline {deadline:.0f}",
            )
        axis.set_xlim(0, high)
        axis.set_title(f"{kind}: {len(values)} faults\n{_TITLES.get(kind, '')}", fontsize="small")
        axis.set_xlabel("fault → fallback's first audio, ms", fontsize="small")
        axis.grid(True, axis="x", alpha=0.3)
        axis.legend(fontsize="x-small", loc="lower right")
        # the same faults, zoomed to their own spread
        zoom = axis.inset_axes((0.4, 0.5, 0.47, 0.36))
        pad = max((values[-1] - values[0]) * 0.08, 1.0)
        low, top = values[0] - pad, values[-1] + pad
        zoom.hist(values, bins=[low + (top - low) * i / 30 for i in range(31)], color="C0")
        zoom.axvline(p95, color="black", linewidth=1.0)
        zoom.set_xlim(low, top)
        zoom.xaxis.set_major_locator(MaxNLocator(4))
        zoom.tick_params(labelsize="xx-small")
        zoom.set_title("zoomed", fontsize="xx-small", pad=2)
    axes[0][0].set_ylabel("faults")
    g = report["plan"]["gateway"]
    figure.suptitle(
        f"Failover within a voice session, OpenAI Realtime → Gemini Live (fakes); deadlines: "
        f"first output {g['first_output_voice_s']:g} s, gap {g['output_gap_s']:g} s — {caption}",
        fontsize="medium",
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
