"""The pure parts of ``scripts/bench setup``: percentiles per repetition, the per-repetition
ratios and their median, the order of the targets, the table."""

from __future__ import annotations

import pytest

from bench.setup.bench import SetupPlan
from bench.setup.stats import (
    TARGETS,
    Sample,
    median_ratio,
    order_of,
    per_rep,
    ratios,
    render,
    summarize,
)


def run(part: str, target: str, rep: int, values: list[float]) -> list[Sample]:
    return [Sample(part, target, rep, i, v) for i, v in enumerate(values)]


def test_the_order_turns_every_other_repetition() -> None:
    assert order_of(0) == TARGETS
    assert order_of(1) == tuple(reversed(TARGETS))
    assert order_of(2) == TARGETS
    firsts = [order_of(rep)[0] for rep in range(4)]
    assert firsts.count("pool") == firsts.count("pool_again") == 2


def test_percentiles_interpolate_between_ranks_and_slow_samples_are_counted() -> None:
    samples = run("session", "pool", 0, [4.0, 5.0, 6.0, 7.0, 205.0])
    samples += run("call", "pool", 0, [1.0])  # another part: not mixed in
    row = per_rep(samples, "session", slow_ms=200.0)[0]["pool"]
    assert row["n"] == 5
    assert row["p50"] == 6.0
    # 99th of 5: position 3.96, between 7 and 205
    assert row["p99"] == pytest.approx(7.0 + (205.0 - 7.0) * 0.96)
    assert row["slow"] == 1


def test_ratios_are_per_repetition_in_order_and_skip_a_repetition_missing_a_side() -> None:
    reps = {
        1: {"pool": {"p50": 6.0}, "no_pool": {"p50": 200.0}},
        0: {"pool": {"p50": 5.0}, "no_pool": {"p50": 250.0}},
        2: {"pool": {"p50": 5.0}},  # its no_pool run failed
        3: {"pool": {"p50": 5.0}, "no_pool": {"p50": 0.0}},  # nothing to divide by
    }
    assert ratios(reps, "pool", "no_pool", "p50") == [0.02, 0.03]
    assert median_ratio([0.02, 0.03, 0.5]) == 0.03
    assert median_ratio([1.0, 2.0]) == 1.5
    assert median_ratio([]) is None


def test_summary_takes_the_median_of_per_repetition_ratios_with_the_a_a_beside_it() -> None:
    samples: list[Sample] = []
    for rep, (on, off, again) in enumerate(
        [(5.0, 200.0, 5.5), (4.0, 210.0, 4.0), (6.0, 205.0, 3.0)]
    ):
        samples += run("session", "pool", rep, [on, on, on])
        samples += run("session", "no_pool", rep, [off, off, off])
        samples += run("session", "pool_again", rep, [again, again, again])
    summary = summarize(samples, slow_ms=200.0)
    assert set(summary) == {"session"}  # no call samples: no call rows
    session = summary["session"]
    assert session["p50_ratio"]["reps"] == pytest.approx([5 / 200, 4 / 210, 6 / 205])
    assert session["p50_ratio"]["median"] == pytest.approx(5 / 200)
    assert session["p50_ratio_aa"]["reps"] == pytest.approx([1.1, 1.0, 0.5])
    assert session["p50_ratio_aa"]["median"] == pytest.approx(1.0)
    assert session["targets"]["pool"]["p50_median_of_reps"] == 5.0
    assert session["targets"]["no_pool"]["p50_all"] == 205.0
    assert session["targets"]["no_pool"]["slow"] == 9
    assert session["targets"]["pool"]["slow"] == 0
    assert session["targets"]["pool"]["samples"] == 9


def test_the_table_has_p50_and_p99_rows_and_the_verdict_on_the_target() -> None:
    samples: list[Sample] = []
    for rep in range(5):
        for part in ("session", "call"):
            samples += run(part, "pool", rep, [5.0, 6.0])
            samples += run(part, "no_pool", rep, [205.0, 206.0])
            samples += run(part, "pool_again", rep, [5.0, 6.0])
    table = render(summarize(samples, 200.0), 200.0, 30.0)
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 4  # header, then p50 and p99 of each part
    assert "×1.000" in rows[1]  # A/A
    assert "target: with the pool, session p50 ≤ 30 ms: met (5.5 ms)" in table
    assert "session: samples ≥ 200 ms: pool 0/10, no_pool 10/10, pool_again 0/10" in table
    slow = render(summarize(run("session", "pool", 0, [40.0]), 200.0), 200.0, 30.0)
    assert "NOT met (40.0 ms)" in slow


def test_the_plans_are_five_repetitions_of_fifty_or_five_sessions() -> None:
    assert (SetupPlan().reps, SetupPlan().sessions) == (5, 50)
    assert (SetupPlan.quick().reps, SetupPlan.quick().sessions) == (5, 5)
    assert SetupPlan().pool_size >= 2
    assert SetupPlan().pause_s > SetupPlan().created_delay_ms / 1000  # one refill fits
