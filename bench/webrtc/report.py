"""The markdown of ``scripts/bench webrtc``: pure, from the JSON document it writes."""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.webrtc.stats import RAMP_LIMIT_MS, TARGET_ADDED_P50_MS, TARGET_RSS_GROWTH

__all__ = ["machine", "render", "render_memory"]


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        # what was measured: the commit, and the WebRTC edge's files changed from it
        "git_head": _git("rev-parse", "--short", "HEAD"),
        "edge_changes": _git(
            "status", "--porcelain", "--", "gateway/edges", "gateway/rtc_settings.py"
        ).splitlines(),
    }


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _spread(spread: Mapping[str, float] | None, scale: float = 1.0, digits: int = 1) -> str:
    if spread is None:
        return "–"
    median, low, high = (spread[k] * scale for k in ("median", "min", "max"))
    return f"{median:.{digits}f} [{low:.{digits}f} – {high:.{digits}f}]"


def _header(document: Mapping[str, Any]) -> list[str]:
    m = document["machine"]
    return [
        f"WebRTC against WebSocket, {m['date']} ({m['cpu_model']}, {m['cpu_count']} cores, "
        f"Python {m['python']}); placement {document['placement']}.",
        "",
    ]


def _latency(section: Mapping[str, Any], plan: Mapping[str, Any]) -> list[str]:
    summary = section["summary"]
    lines = [
        f"**Voice-to-voice latency**, ms (end of speech → first reply frame over the threshold; "
        f"{plan['reps']} repetitions × {plan['lanes_per_group']} lanes per group × "
        f"{plan['turns']} turns, after {plan['warmup']} unmeasured):",
        "",
        "| group | turns | p50 | p99 | at the first reply RTP packet: p50 / p99 |",
        "|---|---|---|---|---|",
    ]
    for group, row in summary["groups"].items():
        rtp = row.get("rtp")
        at_rtp = "–" if rtp is None else f"{_ms(rtp['p50_ms'])} / {_ms(rtp['p99_ms'])}"
        lines.append(
            f"| {group} | {row['n']} | {_ms(row['p50_ms'])} | {_ms(row['p99_ms'])} | {at_rtp} |"
        )
    lines += [
        "",
        "| difference, per repetition | p50: median [min – max] | p99: median [min – max] | "
        "p50 per repetition |",
        "|---|---|---|---|",
    ]
    for pair in summary["pairs"]:
        per_rep = ", ".join(f"{d:.1f}" for d in pair["diff_p50_ms_per_rep"])
        lines.append(
            f"| {pair['pair']} | **{_spread(pair['diff_p50_ms'])}** | "
            f"{_spread(pair['diff_p99_ms'])} | {per_rep} |"
        )
    main = summary["pairs"][0] if summary["pairs"] else None
    if main is not None and main["diff_p50_ms"] is not None:
        met = main["diff_p50_ms"]["median"] <= TARGET_ADDED_P50_MS
        verdict = "met" if met else "**not met**"
        lines += ["", f"Target (WebRTC adds ≤ {TARGET_ADDED_P50_MS:g} ms at p50): {verdict}."]
    jitter = summary.get("client_jitter_buffer")
    if jitter is not None:
        lines.append(
            "Of that, the client's own receiver (reply frame out of the track − reply RTP packet "
            f"in, median per repetition): {_spread(jitter['held_p50_ms'])} ms; webrtc at the RTP "
            f"packet − ws, p50: {_spread(jitter['rtp_minus_ws_p50_ms'])} ms."
        )
    return lines


def _cpu(section: Mapping[str, Any]) -> list[str]:
    rows = section["rows"]
    lines = [
        "",
        f"**CPU per session**, % of a core, {rows['sessions']} sessions per run, median over "
        "repetitions [min – max]:",
        "",
        "| run | gateway | clients (the bench's aiortc peers / websockets) |",
        "|---|---|---|",
    ]
    for name, roles in rows["per_session_cores"].items():
        gateway, clients = _spread(roles["gateway"], 100, 2), _spread(roles["clients"], 100, 2)
        lines.append(f"| {name} | {gateway} | {clients} |")
    ratio, aa = rows["webrtc/ws"], rows["A/A webrtc_aa/webrtc"]
    lines += [
        "",
        f"Gateway CPU, WebRTC / WebSocket per repetition: {ratio['ratios']} (median "
        f"{_spread(ratio['spread'], 1, 2)}); A/A (WebRTC / WebRTC): {aa['ratios']}. Other "
        f"processes: {_spread(rows['other_cores'], 1, 2)} cores.",
    ]
    return lines


def _ramp(section: Mapping[str, Any], ws_p99: float | None) -> list[str]:
    ref = section["reference"]
    lines = [
        "",
        f"**Ramp**: WebRTC sessions; load added p99 = the level's p99 − the unloaded WebRTC p99 "
        f"({_ms(ref['p99_ms'])} ms: {ref['sessions']} sessions, {ref['n']} turns, measured "
        f"first; p50 {_ms(ref['p50_ms'])}, gateway {ref['gateway_cores']:.2f} cores, others "
        f"{ref['other_cores']:.2f}); vs ws p99 = the level's p99 − WebSocket's p99 in part 1 "
        f"({_ms(ws_p99)} ms). Cores over the window; core full: what ran out (box: ours and "
        "other people's processes together used both cores).",
        "",
        "| sessions | p50 | p99 | load added p99 | vs ws p99 | gateway | per session | clients | "
        "fake | others | core full | turns not measured | closed early | mic lag p99 / max |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in section["rows"]:
        versus = None if ws_p99 is None or row["p99_ms"] is None else row["p99_ms"] - ws_p99
        lines.append(
            f"| {row['sessions']} | {_ms(row['p50_ms'])} | {_ms(row['p99_ms'])} | "
            f"{_ms(row['load_added_p99_ms'])} | {_ms(versus)} | {row['gateway_cores']:.2f} | "
            f"{row['gateway_cores_per_session'] * 100:.1f} % | {row['client_cores']:.2f} | "
            f"{row['fake_cores']:.2f} | {row['other_cores']:.2f} | {row['bound'] or '–'} | "
            f"{row['not_measured']} | {row['closed_early']} | "
            f"{_ms(row.get('client_send_lag_p99_ms'))} / {_ms(row['client_send_lag_max_ms'])} |"
        )
    knee = section["knee"]
    if knee["passed_at"] is None:
        largest = knee["largest_tested"]
        lines.append(f"\nLoad never added {RAMP_LIMIT_MS:g} ms at p99 up to {largest} sessions.")
    else:
        lines.append(
            f"\nLoad added more than {RAMP_LIMIT_MS:g} ms at p99 (or lost turns) at "
            f"{knee['passed_at']} sessions."
        )
    return lines


def render(document: Mapping[str, Any]) -> str:
    lines = _header(document)
    plan = document["plan"]
    ws_p99 = None
    if "latency" in document:
        lines += _latency(document["latency"], plan)
        ws_p99 = document["latency"]["summary"]["groups"].get("ws", {}).get("p99_ms")
    if "cpu" in document:
        lines += _cpu(document["cpu"])
    if "ramp" in document:
        lines += _ramp(document["ramp"], ws_p99)
    return "\n".join(lines)


def render_memory(document: Mapping[str, Any]) -> str:
    growth, plan = document["growth"], document["plan"]
    lines = _header(document)
    lines += [
        f"**Memory**: {plan['sessions']} WebRTC sessions held {plan['minutes']:g} min, a turn "
        f"every {plan['slot_ms'] / 1000:g} s each; gateway RSS every {plan['sample_s']:g} s.",
        "",
    ]
    if growth["growth"] is None:
        lines.append("Too few samples after the warm-up to say.")
    else:
        verdict = "met" if growth["growth"] < TARGET_RSS_GROWTH else "**not met**"
        lines.append(
            f"RSS {growth['rss_kb_from'] / 1024:.1f} MiB at {growth['from_s']:.0f} s → "
            f"{growth['rss_kb_to'] / 1024:.1f} MiB at {growth['to_s']:.0f} s (max "
            f"{growth['rss_kb_max'] / 1024:.1f}): **{growth['growth'] * 100:+.2f} %** "
            f"(target < {TARGET_RSS_GROWTH * 100:g} %: {verdict})."
        )
    lines += ["", "| | before | sessions open | after all closed |", "|---|---|---|---|"]
    before, during, after = document["before"], document["during"], document["after"]
    for key in ("rss_kb", "threads", "fds", "active_sessions", "webrtc_peer_connections"):
        lines.append(f"| {key} | {before.get(key)} | {during.get(key)} | {after.get(key)} |")
    probe_before, probe_after = document["probe_before"], document["probe_after"]
    lines.append(
        f"| asyncio tasks | {probe_before.get('tasks')} | – | {probe_after.get('tasks')} |"
    )
    for name, count in probe_after.get("objects", {}).items():
        earlier = probe_before.get("objects", {}).get(name, "not loaded")
        lines.append(f"| {name} | {earlier} | – | {count} |")
    for name, value in probe_after.get("gauges", {}).items():
        earlier = probe_before.get("gauges", {}).get(name, "not loaded")
        lines.append(f"| {name} (the edge's own count) | {earlier} | – | {value} |")
    lines += [
        "",
        f"Threads after: {probe_after.get('threads')}; tasks after: "
        f"{probe_after.get('task_coroutines')}.",
        f"Turns: {document['turns']}.",
    ]
    return "\n".join(lines)
