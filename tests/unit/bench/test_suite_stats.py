"""The pure arithmetic of the suite: records, spreads, added latency, the knee, /proc parsing."""

from __future__ import annotations

from typing import Any

import pytest

from bench.relay.stats import CpuUsage
from bench.suite.procs import parse_comm_and_ppid, parse_vmrss_kb
from bench.suite.report import latency_table
from bench.suite.stats import (
    added_spread,
    capacity_rows,
    delivered_all,
    latest,
    level_passed,
    paired_ratios,
    run_record,
    summarize_group,
)


def _raw(**overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "sent": 1000,
        "received": 1000,
        "lost": 0,
        "mismatched": 0,
        "errors": 0,
        "connect_failed": 0,
        "setup_ms": {"p50": 2.0, "p99": 5.0, "max": 6.0},
        "rtt_ms": {"n": 1000, "mean": 0.4, "p50": 0.3, "p90": 0.5, "p99": 1.2, "p999": 2, "max": 3},
        "cdf": [[0.3, 0.5], [1.2, 0.99]],
        "window_s": 2.0,
    }
    raw.update(overrides)
    return raw


def _usage(relay_s: float = 0.1, other: float = 0.01) -> CpuUsage:
    return CpuUsage(
        wall_s=2.0,
        process_s={"relay": relay_s, "load": 0.4},
        other_cores=other,
        interrupt_cores=0.0,
        steal_cores=0.0,
    )


def _record(target: str, rep: int = 0, sessions: int = 10, **raw: Any) -> dict[str, Any]:
    run = {"target": target, "rep": rep, "sessions": sessions, "kind": "load"}
    return run_record(run, _raw(**raw), _usage(), {"before": 1000, "window": 2000})


def test_a_record_carries_the_report_the_cpu_per_frame_pair_and_memory_per_session() -> None:
    record = run_record(
        {"target": "gateway", "rep": 0, "sessions": 10},
        _raw(),
        _usage(relay_s=0.1),
        {"before": 50_000, "window": 51_000},
    )
    assert record["p50_ms"] == 0.3
    assert record["p999_ms"] == 2.0
    assert record["relay_cpu_us_per_frame"] == pytest.approx(100.0)  # 0.1 s / 1000 frames
    assert record["relay_cores"] == pytest.approx(0.05)
    assert record["load_cores"] == pytest.approx(0.2)
    assert record["rss_per_session_kb"] == 100.0
    assert record["setup_p99_ms"] == 5.0
    assert record["noisy"] is False
    assert record["lost_allowed"] == 0


def test_a_run_whose_window_never_opened_has_no_cpu_figures() -> None:
    record = run_record({"target": "x", "rep": 0, "sessions": 2}, _raw(received=0), None, {})
    assert record["relay_cpu_us_per_frame"] is None
    assert record["rss_per_session_kb"] is None
    assert record["noisy"] is False


def test_missing_statistics_stay_none() -> None:
    raw = _raw(rtt_ms={"n": 0, "p50": None, "p99": None}, setup_ms=None)
    record = run_record({"target": "x", "rep": 0, "sessions": 1}, raw, None, {})
    assert record["p50_ms"] is None
    assert record["setup_p50_ms"] is None


def test_held_back_frames_are_allowed_as_lost_and_as_latency() -> None:
    run = {"target": "gateway_16k", "rep": 0, "sessions": 5}
    record = run_record(run, _raw(lost=7), _usage(), {}, held_back_frames=2)
    assert record["lost_allowed"] == 10
    assert record["latency_allowance_ms"] == 40
    assert delivered_all(record)
    assert not delivered_all({**record, "lost": 11})


@pytest.mark.parametrize("field", ["lost", "mismatched", "errors", "connect_failed", "unsent"])
def test_anything_missing_or_wrong_is_not_delivered(field: str) -> None:
    assert delivered_all(_record("gateway"))
    assert not delivered_all({**_record("gateway"), field: 1})


def test_nothing_sent_is_not_delivered() -> None:
    assert not delivered_all(_record("gateway", sent=0))


def test_added_latency_pairs_repetitions_and_skips_unpaired_ones() -> None:
    target = [{"rep": 0, "p50_ms": 1.0}, {"rep": 1, "p50_ms": 2.0}, {"rep": 2, "p50_ms": 9.0}]
    direct = [{"rep": 0, "p50_ms": 0.5}, {"rep": 1, "p50_ms": 0.5}]
    assert added_spread(target, direct, "p50_ms") == {"median": 1.0, "min": 0.5, "max": 1.5}
    assert added_spread(target, [], "p50_ms") is None


def test_a_group_summary_uses_the_kept_record_of_a_rerun() -> None:
    noisy = {**_record("gateway"), "superseded": True, "p50_ms": 50.0}
    records = [
        _record("direct"),
        noisy,
        _record("gateway"),
        _record("direct", rep=1),
        _record("gateway", rep=1),
    ]
    rows = {row["target"]: row for row in summarize_group(records, ["direct", "gateway"])}
    assert rows["gateway"]["reps"] == 2
    assert rows["gateway"]["reruns"] == 1
    assert rows["gateway"]["p50_ms"] == {"median": 0.3, "min": 0.3, "max": 0.3}
    assert rows["gateway"]["added_p50_ms"] == {"median": 0.0, "min": 0.0, "max": 0.0}
    assert rows["direct"]["added_p50_ms"] is None
    assert rows["gateway"]["sent"] == 2000
    assert latest(records) == [r for r in records if r is not noisy]


def test_the_tail_and_the_first_second_sit_beside_the_cpu_in_every_row() -> None:
    first = {"n": 500, "p50": 0.4, "p99": 4.0, "max": 7.5}
    records = [
        _record("gateway", first_second_ms=first),
        _record("gateway", rep=1, first_second_ms={**first, "max": 9.5}),
    ]
    assert records[0]["first_second_max_ms"] == 7.5
    assert records[0]["first_second_p99_ms"] == 4.0
    (row,) = summarize_group(records, ["gateway"])
    assert row["max_ms"] == {"median": 3.0, "min": 3.0, "max": 3.0}
    assert row["first_second_max_ms"] == {"median": 8.5, "min": 7.5, "max": 9.5}
    assert row["setup_max_ms"] == {"median": 6.0, "min": 6.0, "max": 6.0}
    table = latency_table("t", [row], load=True).splitlines()
    assert table[2].split(" | ")[1:7] == [
        "p50 ms",
        "p99 ms",
        "max ms",
        "1st s max ms",
        "setup p50 / max ms",
        "CPU µs/frame pair",
    ]
    cells = table[4].split(" | ")
    assert cells[3:6] == ["3.00 [3.00–3.00]", "8.50 [7.50–9.50]", "2.0 [2.0–2.0] / 6.0 [6.0–6.0]"]
    assert cells[6] == "100 [100–100]"  # the CPU per frame pair
    # ping-pong rows have no first second nor set-up columns
    assert "1st s max ms" not in latency_table("t", [row])


def test_ratios_pair_repetitions_and_skip_what_one_side_lacks() -> None:
    records = [
        _record("gateway", rtt_ms={"p99": 2.0}),
        _record("gateway_compat", rtt_ms={"p99": 3.0}),
        _record("gateway", rep=1, rtt_ms={"p99": 4.0}),
        _record("gateway_compat", rep=1, rtt_ms={"p99": 5.0}),
        _record("gateway_compat", rep=2, rtt_ms={"p99": 5.0}),  # no gateway in rep 2
        {**_record("gateway_compat", rep=1, rtt_ms={"p99": 50.0}), "superseded": True},
    ]
    ratios = paired_ratios(records, "gateway_compat", "gateway", "p99_ms")
    assert ratios == [{"rep": 0, "ratio": 1.5}, {"rep": 1, "ratio": 1.25}]


def test_a_level_passes_within_the_added_p99_limit_only() -> None:
    direct = {"target": "direct", "p99_ms": 1.0}
    ok = {**_record("gateway"), "p99_ms": 11.0}
    late = {**_record("gateway"), "p99_ms": 11.5}
    assert level_passed(ok, direct) == (True, 10.0)
    assert level_passed(late, direct) == (False, 10.5)
    assert level_passed({**ok, "lost": 1}, direct)[0] is False
    assert level_passed({**ok, "p99_ms": None}, direct) == (False, None)


def test_the_knee_is_the_last_level_of_the_unbroken_passing_run() -> None:
    def level(target: str, sessions: int, p99: float, lost: int = 0) -> dict[str, Any]:
        return {**_record(target, sessions=sessions, lost=lost), "p99_ms": p99}

    records = [
        level("direct", 50, 1.0),
        level("direct", 100, 1.0),
        level("direct", 150, 1.0),
        level("gateway", 50, 2.0),
        level("gateway", 100, 3.0),
        level("gateway", 150, 30.0),
        level("litellm", 50, 2.0),
        level("litellm", 100, 2.0, lost=3),
        level("litellm", 150, 2.0),  # a pass after a failure does not count
        level("pipecat", 50, 40.0),
    ]
    rows = {
        row["target"]: row
        for row in capacity_rows(records, ["direct", "gateway", "litellm", "pipecat"], 50.0)
    }
    assert rows["gateway"]["knee_sessions"] == 100
    assert rows["gateway"]["sessions_per_core"] == 100
    assert [s["passed"] for s in rows["gateway"]["levels"]] == [True, True, False]
    assert rows["gateway"]["levels"][2]["added_p99_ms"] == 29.0
    assert rows["litellm"]["knee_sessions"] == 50
    assert rows["pipecat"]["knee_sessions"] is None
    assert rows["pipecat"]["at_sessions"] == 50
    # 100 µs per frame pair (see _usage) at 50 frames/s: 200 sessions fill one core
    assert rows["gateway"]["sessions_per_core_by_cpu"] == 200
    assert rows["gateway"]["rss_per_session_kb"] == 10.0  # 1000 kB over 100 sessions


def test_proc_stat_gives_the_command_name_and_the_parent() -> None:
    text = "4242 (my (odd) prog) S 17 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0"
    assert parse_comm_and_ppid(text) == ("my (odd) prog", 17)


def test_proc_status_gives_the_resident_memory() -> None:
    assert parse_vmrss_kb("Name:\tpython\nVmPeak:\t 9 kB\nVmRSS:\t   51234 kB\n") == 51234
    assert parse_vmrss_kb("Name:\tzombie\nState:\tZ (zombie)\n") == 0
