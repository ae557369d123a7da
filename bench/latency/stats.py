"""The latency bench's numbers: per path and upstream, direct against through the gateway.

Pure. A lane's record holds its per-turn latencies in ms (``None`` for a turn not measured, see
``bench.latency.turns``). For each path and upstream the two lanes (``direct``, ``gateway``)
become one row:

- p50 and p99 of each lane's measured turns (linear interpolation, numpy's default);
- **added** = gateway − direct, as a **difference of percentiles** (gateway p50 − direct p50,
  gateway p99 − direct p99): the two distributions are measured side by side, not paired;
- **paired Δ p50**: the median over turns ``i`` measured in both lanes of
  (gateway turn ``i`` − direct turn ``i``), a check on the first that does not assume the two
  distributions have the same shape (turn ``i`` of both lanes ended within one slot).

``render`` is the markdown table printed and written to ``latency.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.relay.stats import percentile

__all__ = [
    "CARRIER_PATHS",
    "PATHS",
    "PATH_TITLES",
    "TARGET_ADDED_P50_MS",
    "UPSTREAMS",
    "UPSTREAM_TITLES",
    "gap_16k_vs_24k",
    "measured",
    "render",
    "summarize",
    "summarize_pair",
]

# "phone" is Twilio's (on /twilio/media, its name from before the other carriers); the other
# carriers' phones are "phone_<carrier>" (on /phone/media), measured in a phase of their own.
CARRIER_PATHS = ("phone_telnyx", "phone_plivo", "phone_vonage", "phone_exotel")
PATHS = ("browser_24k", "browser_16k", "browser_48k", "phone", *CARRIER_PATHS)
PATH_TITLES = {
    "browser_24k": "browser 24 kHz",
    "browser_16k": "browser 16 kHz",
    "browser_48k": "browser 48 kHz",
    "phone": "phone (Twilio, µ-law 8 kHz)",
    "phone_telnyx": "phone (Telnyx, µ-law 8 kHz)",
    "phone_plivo": "phone (Plivo, µ-law 8 kHz)",
    "phone_vonage": "phone (Vonage, PCM16 16 kHz)",
    "phone_exotel": "phone (Exotel, PCM16 8 kHz)",
}
UPSTREAMS = ("openai", "gemini")
UPSTREAM_TITLES = {"openai": "OpenAI Realtime fake", "gemini": "Gemini Live fake"}
TARGET_ADDED_P50_MS = 10.0


def measured(latencies: Sequence[float | None]) -> list[float]:
    return [value for value in latencies if value is not None]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def summarize_pair(
    direct: Sequence[float | None], gateway: Sequence[float | None]
) -> dict[str, Any]:
    """One row from the per-turn latencies (ms) of a direct lane and its gateway lane."""
    d, g = measured(direct), measured(gateway)
    row: dict[str, Any] = {"n_direct": len(d), "n_gateway": len(g)}
    for name, values in (("direct", d), ("gateway", g)):
        row[f"{name}_p50_ms"] = _rounded(percentile(values, 50)) if values else None
        row[f"{name}_p99_ms"] = _rounded(percentile(values, 99)) if values else None
    for q in ("p50", "p99"):
        low, high = row[f"direct_{q}_ms"], row[f"gateway_{q}_ms"]
        row[f"added_{q}_ms"] = None if low is None or high is None else round(high - low, 2)
    deltas = [
        high - low
        for low, high in zip(direct, gateway, strict=False)
        if low is not None and high is not None
    ]
    row["paired_n"] = len(deltas)
    row["paired_delta_p50_ms"] = _rounded(percentile(deltas, 50)) if deltas else None
    return row


def summarize(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (upstream, path) that has both lanes, in table order."""
    lanes = {(r["upstream"], r["path"], r["target"]): r for r in records}
    rows: list[dict[str, Any]] = []
    for upstream in UPSTREAMS:
        for path in PATHS:
            direct = lanes.get((upstream, path, "direct"))
            gateway = lanes.get((upstream, path, "gateway"))
            if direct is None or gateway is None:
                continue
            row = {"upstream": upstream, "path": path}
            row |= summarize_pair(direct["latencies_ms"], gateway["latencies_ms"])
            for target, lane in (("direct", direct), ("gateway", gateway)):
                counts = lane["counts"]
                row[f"{target}_not_measured"] = counts["turns"] - counts["measured"]
            rows.append(row)
    return rows


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _verdict(row: Mapping[str, Any]) -> str:
    added = row["added_p50_ms"]
    if added is None:
        return "–"
    return "met" if added <= TARGET_ADDED_P50_MS else "**not met**"


def gap_16k_vs_24k(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per upstream: gateway p50 at 16 kHz − gateway p50 at 24 kHz (ms)."""
    by_key = {(row["upstream"], row["path"]): row for row in rows}
    gaps: dict[str, float] = {}
    for upstream in UPSTREAMS:
        slow, base = by_key.get((upstream, "browser_16k")), by_key.get((upstream, "browser_24k"))
        if slow is None or base is None:
            continue
        if slow["gateway_p50_ms"] is not None and base["gateway_p50_ms"] is not None:
            gaps[upstream] = round(slow["gateway_p50_ms"] - base["gateway_p50_ms"], 2)
    return gaps


def render(rows: Sequence[Mapping[str, Any]], settings: Mapping[str, Any]) -> str:
    """The markdown table (and what it means) of one run."""
    lines = [
        f"Voice-to-voice latency, ms: end of user speech (last speech frame sent) → first reply "
        f"audio received; {settings['turns']} turns per lane after {settings['warmup']} "
        "unmeasured ones.",
        "",
        "| upstream | path | n (direct / gateway) | direct p50 / p99 | gateway p50 / p99 | "
        f"added p50 / p99 | paired Δ p50 | added p50 ≤ {TARGET_ADDED_P50_MS:g} ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {UPSTREAM_TITLES[row['upstream']]} | {PATH_TITLES[row['path']]} | "
            f"{row['n_direct']} / {row['n_gateway']} | "
            f"{_ms(row['direct_p50_ms'])} / {_ms(row['direct_p99_ms'])} | "
            f"{_ms(row['gateway_p50_ms'])} / {_ms(row['gateway_p99_ms'])} | "
            f"**{_ms(row['added_p50_ms'])}** / {_ms(row['added_p99_ms'])} | "
            f"{_ms(row['paired_delta_p50_ms'])} | {_verdict(row)} |"
        )
    gaps = gap_16k_vs_24k(rows)
    if gaps:
        lines += [
            "",
            "Through the gateway, 16 kHz behind 24 kHz (gateway p50 difference): "
            + "; ".join(f"{UPSTREAM_TITLES[u]} {gap:+.1f} ms" for u, gap in gaps.items())
            + ".",
        ]
    skipped = [
        f"{row['upstream']}/{row['path']}: direct {row['direct_not_measured']}, "
        f"gateway {row['gateway_not_measured']}"
        for row in rows
        if row["direct_not_measured"] or row["gateway_not_measured"]
    ]
    lines += [
        "",
        "added = gateway − direct as a difference of percentiles; paired Δ p50 = median over "
        "turns of (gateway turn i − direct turn i). Direct = the same fake in its own protocol "
        "at its native format (OpenAI: PCM16 24 kHz, and audio/pcmu for the µ-law phones: "
        "Twilio, Telnyx, Plivo; Gemini: PCM16 16 kHz in), with the session the gateway asks "
        "for. Each phone lane is driven as its carrier drives the gateway (Exotel: 100 ms "
        "chunks).",
        "Turns not measured (missed or overlapped): " + ("; ".join(skipped) or "none") + ".",
    ]
    return "\n".join(lines)
