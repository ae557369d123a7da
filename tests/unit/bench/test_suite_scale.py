"""``scripts/bench scale``'s pure parts: percentiles, the workers sweep's rows, the report."""

from __future__ import annotations

from typing import Any

from bench.suite.scale import ScalePlan, percentiles, render, sweep_rows


def load(target: str, sessions: int, p50: float, p99: float, **extra: Any) -> dict[str, Any]:
    return {
        "target": target,
        "sessions": sessions,
        "rep": 0,
        "p50_ms": p50,
        "p99_ms": p99,
        "lost": 0,
        "sent": 100,
        "relay_cpu_us_per_frame": 100.0,
        **extra,
    }


def test_percentiles_are_taken_from_the_sorted_samples() -> None:
    stats = percentiles([float(n) for n in range(100, 0, -1)])
    assert stats == {"n": 100, "p50": 51.0, "p99": 100.0, "max": 100.0}
    assert percentiles([]) == {}


def test_the_sweep_reports_latency_added_over_direct_at_the_same_level() -> None:
    records = [
        load("direct", 50, 0.2, 1.0),
        load("gateway_redis", 50, 0.5, 3.0),
        load("gateway_w2", 50, 0.4, 2.0, lost=3),
        load("direct", 100, 0.3, 2.0),
        load("gateway_redis", 100, 30.0, 90.0),
    ]
    rows = sweep_rows(records, (50, 100))
    assert [(r["sessions"], r["target"]) for r in rows] == [
        (50, "gateway_redis"),
        (50, "gateway_w2"),
        (100, "gateway_redis"),
    ]
    assert round(rows[0]["added_p99_ms"], 6) == 2.0
    assert rows[1]["lost"] == 3
    assert round(rows[2]["added_p50_ms"], 6) == 29.7


def test_the_report_puts_the_rows_side_by_side() -> None:
    spread = {"median": 98.0, "min": 90.0, "max": 110.0}
    added = {"median": 1.0, "min": 0.5, "max": 2.0}
    report = {
        "plan": {"level_seconds": 5.0},
        "setup_ms": {
            "memory": {"n": 4, "p50": 3.0, "p99": 5.0},
            "redis": {"n": 4, "p50": 3.5, "p99": 6.0},
        },
        "resume_ms": {"other node": {"n": 2, "p50": 5.0, "p99": 8.0}},
        "relay": {
            "summary": {
                "100": [
                    {"target": "gateway", "relay_cpu_us_per_frame": spread, "added_p99_ms": added},
                    {
                        "target": "gateway_redis",
                        "relay_cpu_us_per_frame": {**spread, "median": 99.0},
                        "added_p99_ms": added,
                    },
                ]
            }
        },
        "workers": {
            "machine": {"cpu_count": 2},
            "levels": sweep_rows(
                [load("direct", 50, 0.1, 0.5), load("gateway_w2", 50, 0.2, 1)], (50,)
            ),
        },
    }
    text = render(report)
    assert "Redis adds 0.50 ms at p50." in text
    assert "| other node | 2 | 5.00 | 8.00 |" in text
    assert "Redis on ÷ off (medians): 1.010" in text
    assert "| 50 | 2 workers | 0.10 | 0.50 | 0 | 100 |" in text
    assert ScalePlan.quick().levels == (10, 20)
