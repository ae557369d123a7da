"""The pure parts of ``scripts/bench dispatch``: the fake's timing lines, percentiles, the table.

The OpenAI fake in dispatch mode (``fakes.openai_realtime.dispatch``) appends one JSON
line per answered tool call: ``{"call_id", "emitted_ns", "received_ns"}`` on its own
``perf_counter_ns`` clock. A dispatch's overhead is ``received_ns − emitted_ns``: from the last
frame of the function-call response on the socket to the arrival of its ``function_call_output``,
so it covers the target's whole turn-around (read, decide, run the no-op, answer) and not the
client. No sockets or processes here; tested in ``tests/unit/bench/test_dispatch_stats.py``.

The HTTP tool row (``bench.dispatch.http_tool``) is two lists of durations, ``direct`` and
``http_tool``, timed in one process: ``summarize_http`` makes their distributions and what the
HTTP tool adds at p50 and p99, ``render_http`` its table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from bench.relay.stats import Spread, percentile

__all__ = [
    "HTTP_TARGET_P50_MS",
    "TARGET_P99_MS",
    "Timing",
    "call_number",
    "distribution",
    "parse_timings",
    "render",
    "render_http",
    "render_report",
    "summarize",
    "summarize_http",
]

TARGET_P99_MS = 1.0  # the target for the gateway at 100 background sessions
HTTP_TARGET_P50_MS = 1.0  # what an HTTP tool may add to a direct call of the API, at p50
_HTTP_PATHS = {"direct": "direct (aiohttp)", "http_tool": "HTTP tool (tool runner)"}


@dataclass(frozen=True)
class Timing:
    call_id: str
    emitted_ns: int
    received_ns: int

    @property
    def duration_ms(self) -> float:
        return (self.received_ns - self.emitted_ns) / 1e6


def call_number(call_id: str) -> int:
    """The fake numbers each connection's calls from 1 (``call_<connection>_<n>``): ``n``, or 0
    for an id of another shape."""
    try:
        return int(call_id.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return 0


def parse_timings(text: str) -> tuple[list[Timing], int]:
    """The complete lines of ``text`` as timings, and how many lines could not be read.

    A last line without its newline is still being written: it is neither read nor counted.
    """
    timings: list[Timing] = []
    unreadable = 0
    for line in text.split("\n")[:-1]:
        if not line.strip():
            continue
        try:
            raw = orjson.loads(line)
            timings.append(
                Timing(str(raw["call_id"]), int(raw["emitted_ns"]), int(raw["received_ns"]))
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            unreadable += 1
    return timings, unreadable


def distribution(durations_ms: Sequence[float]) -> dict[str, float | int | None]:
    """n, p50, p90, p99 and max of the durations (``None`` when there are none)."""
    if not durations_ms:
        return {"n": 0, "p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "n": len(durations_ms),
        "p50_ms": round(percentile(durations_ms, 50), 4),
        "p90_ms": round(percentile(durations_ms, 90), 4),
        "p99_ms": round(percentile(durations_ms, 99), 4),
        "max_ms": round(max(durations_ms), 4),
    }


def _spread(values: Iterable[Any]) -> dict[str, float] | None:
    present = [float(v) for v in values if v is not None]
    if not present:
        return None
    spread = Spread.of(present)
    return {"median": round(spread.median, 4), "min": spread.low, "max": spread.high}


def summarize(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (target, background sessions), in first-seen order: the distribution of
    every dispatch of every repetition pooled, and the per-repetition p50 and p99 as median
    [min–max]. Each run holds ``target``, ``background``, ``durations_ms``, ``sent``,
    ``lost``, ``background_sent``, ``background_back``, ``target_cores`` and
    ``other_cores``."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for run in runs:
        groups.setdefault((str(run["target"]), int(run["background"])), []).append(run)
    rows = []
    for (target, background), group in groups.items():
        pooled = [d for run in group for d in run["durations_ms"]]
        per_rep = [distribution(run["durations_ms"]) for run in group]
        rows.append(
            {
                "target": target,
                "background": background,
                **distribution(pooled),
                "reps": len(group),
                "rep_p50_ms": _spread(rep["p50_ms"] for rep in per_rep),
                "rep_p99_ms": _spread(rep["p99_ms"] for rep in per_rep),
                "sent": sum(int(run["sent"]) for run in group),
                "lost": sum(int(run["lost"]) for run in group),
                "background_delivered": _delivered(group),
                "target_cores": _spread(run["target_cores"] for run in group),
                "other_cores": _spread(run["other_cores"] for run in group),
                "noisy_reps": sum(1 for run in group if run.get("noisy")),
            }
        )
    return rows


def _delivered(group: Sequence[Mapping[str, Any]]) -> float | None:
    """The share of the background's frames whose echo came back (``None``: no background)."""
    sent = sum(int(run["background_sent"]) for run in group)
    if not sent:
        return None
    return round(sum(int(run["background_back"]) for run in group) / sent, 4)


def _ms(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}"


def _spread_cell(spread: Mapping[str, float] | None, decimals: int = 3) -> str:
    if spread is None:
        return "–"
    return (
        f"{spread['median']:.{decimals}f} [{spread['min']:.{decimals}f}–"
        f"{spread['max']:.{decimals}f}]"
    )


def render(rows: Sequence[Mapping[str, Any]], title: str) -> str:
    """A markdown table, one line per row of ``summarize``."""
    lines = [
        f"### {title}",
        "",
        "| target | background sessions | n | p50 ms | p90 ms | p99 ms | max ms | p99 per rep, "
        "median [min–max] | lost | background echo back | target CPU (cores) | other cores |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|",
    ]
    for row in rows:
        delivered = row["background_delivered"]
        lines.append(
            f"| {row['target']} | {row['background']} | {row['n']} | {_ms(row['p50_ms'])} | "
            f"{_ms(row['p90_ms'])} | {_ms(row['p99_ms'])} | {_ms(row['max_ms'])} | "
            f"{_spread_cell(row['rep_p99_ms'])} | {row['lost']} | "
            f"{'–' if delivered is None else f'{delivered:.1%}'} | "
            f"{_spread_cell(row['target_cores'], 2)} | {_spread_cell(row['other_cores'], 2)} |"
        )
    lines += [
        "",
        "Dispatch overhead on the fake's clock: the function-call response's last frame written "
        "→ its `function_call_output` read, with a no-op tool; every repetition pooled. lost: "
        "calls made and never answered. background echo back: the share of the background "
        "sessions' frames echoed back to them (under 100 %: the target is saturated and its "
        "dispatch figure is not that of a working session). target CPU: the measured process "
        "(the fake for direct) during the run; near 1 core it is saturated.",
    ]
    return "\n".join(lines)


def summarize_http(durations: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """The distribution of each path and the HTTP tool's added p50 and p99 (ms)."""
    rows = {path: distribution(durations.get(path, ())) for path in _HTTP_PATHS}
    added: dict[str, float | None] = {}
    for key in ("p50_ms", "p99_ms"):
        tool, direct = rows["http_tool"][key], rows["direct"][key]
        added[key] = None if tool is None or direct is None else round(tool - direct, 4)
    return {"paths": rows, "added_p50_ms": added["p50_ms"], "added_p99_ms": added["p99_ms"]}


def render_http(section: Mapping[str, Any]) -> str:
    """The HTTP tool row's table, or why it is missing."""
    title = "### HTTP tool dispatch (care_api_get_appointments against the example care API)"
    if "error" in section:
        return f"{title}\n\nNot measured: {section['error']}"
    lines = [
        title,
        "",
        "| path | n | p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for path, label in _HTTP_PATHS.items():
        row = section["paths"][path]
        lines.append(
            f"| {label} | {row['n']} | {_ms(row['p50_ms'])} | {_ms(row['p90_ms'])} | "
            f"{_ms(row['p99_ms'])} | {_ms(row['max_ms'])} |"
        )
    added = section["added_p50_ms"]
    verdict = "–" if added is None else ("met" if added <= HTTP_TARGET_P50_MS else "missed")
    lines += [
        "",
        f"The HTTP tool adds {_ms(added)} ms at p50 (target ≤ {HTTP_TARGET_P50_MS:.0f} ms: "
        f"{verdict}): the tool runner's whole path (arguments, validation, URL, the shared "
        "client, bounded read, status mapping, envelope, allowlist, audit line) against the same "
        "GET made with aiohttp, alternately, from one process on uvloop, to the same server. "
        "The p99s are each path's own tail (the server's and the machine's noise included); "
        "their difference is in dispatch.json (added_p99_ms).",
    ]
    return "\n".join(lines)


def render_report(report: Mapping[str, Any]) -> str:
    """The table of a ``dispatch.json`` report, flagged when its processes were not pinned
    (then they shared whatever cores they were given: not comparable with a pinned run)."""
    text = render(report["summary"], "Tool dispatch overhead (no-op tool, OpenAI fake)")
    if "http_tool" in report:
        text += "\n\n" + render_http(report["http_tool"])
    machine = report.get("machine") or {}
    pinning = machine.get("pinning") or {}
    if not pinning.get("pinned", False):
        text += (
            f"\n\n**Not pinned** ({pinning.get('note', 'no pinning recorded')}; allowed cores "
            f"{machine.get('allowed_cpus', '?')})."
        )
    return text
