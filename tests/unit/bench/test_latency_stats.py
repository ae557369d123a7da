"""The latency bench's rows, table and plot data, from made-up lanes."""

from __future__ import annotations

from typing import Any

import pytest

from bench.latency.plot import added_bars, added_cdfs
from bench.latency.stats import gap_16k_vs_24k, render, summarize, summarize_pair


def lane(upstream: str, path: str, target: str, values: list[float | None]) -> dict[str, Any]:
    measured = sum(v is not None for v in values)
    return {
        "upstream": upstream,
        "path": path,
        "target": target,
        "latencies_ms": values,
        "counts": {"turns": len(values), "measured": measured},
    }


def test_added_is_the_difference_of_percentiles_and_paired_is_per_turn() -> None:
    direct = [500.0 + i for i in range(101)]  # p50 550, p99 599
    gateway = [v + 3.0 for v in direct[::-1]]  # the same shape, 3 ms later, in reverse order
    row = summarize_pair(direct, gateway)
    assert row["direct_p50_ms"] == 550.0
    assert row["direct_p99_ms"] == 599.0
    assert row["gateway_p50_ms"] == 553.0
    assert row["added_p50_ms"] == 3.0
    assert row["added_p99_ms"] == 3.0
    assert row["paired_n"] == 101
    assert row["paired_delta_p50_ms"] == 3.0  # median of (gateway i − direct i)


def test_turns_not_measured_are_left_out_of_both_figures() -> None:
    row = summarize_pair([500.0, None, 502.0], [None, 510.0, 505.0])
    assert (row["n_direct"], row["n_gateway"]) == (2, 2)
    assert row["paired_n"] == 1
    assert row["paired_delta_p50_ms"] == 3.0
    empty = summarize_pair([None], [])
    assert empty["direct_p50_ms"] is None
    assert empty["added_p50_ms"] is None
    assert empty["paired_delta_p50_ms"] is None


def lanes() -> list[dict[str, Any]]:
    return [
        lane("gemini", "phone", "gateway", [330.0, 331.0]),
        lane("gemini", "phone", "direct", [300.0, 301.0]),
        lane("openai", "browser_16k", "gateway", [540.0, None]),
        lane("openai", "browser_16k", "direct", [500.0, 500.0]),
        lane("openai", "browser_24k", "gateway", [501.0, 501.0]),
        lane("openai", "browser_24k", "direct", [500.0, 500.0]),
        lane("openai", "browser_48k", "direct", [500.0]),  # its gateway lane is missing
    ]


def test_rows_come_in_table_order_and_need_both_lanes() -> None:
    rows = summarize(lanes())
    assert [(r["upstream"], r["path"]) for r in rows] == [
        ("openai", "browser_24k"),
        ("openai", "browser_16k"),
        ("gemini", "phone"),
    ]
    assert rows[1]["gateway_not_measured"] == 1
    assert rows[1]["direct_not_measured"] == 0
    assert gap_16k_vs_24k(rows) == {"openai": 39.0}


def test_the_table_shows_each_row_its_verdict_and_the_16k_gap() -> None:
    text = render(summarize(lanes()), {"turns": 2, "warmup": 1})
    assert "| OpenAI Realtime fake | browser 24 kHz | 2 / 2 | 500.0 / 500.0 | 501.0 / 501.0 | " in (
        text
    )
    assert "**1.0** / 1.0 | 1.0 | met |" in text
    assert "**40.0** / 40.0 | 40.0 | **not met** |" in text
    assert "Gemini Live fake | phone (Twilio, µ-law 8 kHz)" in text
    assert "16 kHz behind 24 kHz (gateway p50 difference): OpenAI Realtime fake +39.0 ms" in text
    assert "openai/browser_16k: direct 0, gateway 1" in text


def test_plot_data_bars_per_upstream_and_cdfs_against_the_direct_median() -> None:
    rows = summarize(lanes())
    bars = added_bars(rows)
    assert bars["openai"] == [(0, 1.0, 1.0), (1, 40.0, 40.0)]
    assert bars["gemini"] == [(3, 30.0, 30.0)]
    cdfs = added_cdfs(rows, lanes())
    assert cdfs[("openai", "browser_16k")] == [(40.0, 1.0)]
    assert cdfs[("gemini", "phone")] == [
        (pytest.approx(29.5), 0.5),
        (pytest.approx(30.5), 1.0),
    ]
