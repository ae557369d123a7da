"""The pure parts of ``scripts/bench dispatch``: timing lines, distributions, rows, the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.dispatch.load import DispatchPlan
from bench.dispatch.procs import TimingsReader
from bench.dispatch.stats import (
    Timing,
    call_number,
    distribution,
    parse_timings,
    render,
    render_http,
    render_report,
    summarize,
    summarize_http,
)


def line(call_id: str, emitted: int, received: int) -> str:
    return f'{{"call_id":"{call_id}","emitted_ns":{emitted},"received_ns":{received}}}\n'


def test_complete_lines_are_read_and_a_partial_last_one_waits() -> None:
    text = line("call_1_1", 1_000_000, 1_500_000) + "not json\n\n" + '{"call_id":"call_1_2",'
    timings, unreadable = parse_timings(text)
    assert timings == [Timing("call_1_1", 1_000_000, 1_500_000)]
    assert timings[0].duration_ms == pytest.approx(0.5)
    assert unreadable == 1


def test_a_line_without_its_fields_is_unreadable() -> None:
    assert parse_timings('{"call_id":"x"}\n') == ([], 1)


def test_the_call_number_is_the_last_part_of_the_fakes_id() -> None:
    assert call_number("call_12_7") == 7
    assert call_number("call_x") == 0
    assert call_number("nothing") == 0


def test_the_reader_returns_only_new_lines_and_keeps_a_partial_one(tmp_path: Path) -> None:
    path = tmp_path / "timings.jsonl"
    reader = TimingsReader(path)
    assert reader.read_new() == []  # no file yet
    first = line("call_1_1", 0, 10)
    path.write_text(first + first[:10])
    assert [t.call_id for t in reader.read_new()] == ["call_1_1"]
    path.write_text(first + first + line("call_1_2", 0, 20))
    assert [t.call_id for t in reader.read_new()] == ["call_1_1", "call_1_2"]
    assert reader.read_new() == []


def test_distribution_of_durations() -> None:
    values = [float(v) for v in range(1, 101)]
    stats = distribution(values)
    assert stats["n"] == 100
    assert stats["p50_ms"] == pytest.approx(50.5)
    assert stats["p90_ms"] == pytest.approx(90.1)
    assert stats["p99_ms"] == pytest.approx(99.01)
    assert stats["max_ms"] == 100.0
    assert distribution([]) == {
        "n": 0,
        "p50_ms": None,
        "p90_ms": None,
        "p99_ms": None,
        "max_ms": None,
    }


def run(target: str, background: int, durations: list[float], **extra: object) -> dict[str, object]:
    return {
        "target": target,
        "background": background,
        "durations_ms": durations,
        "sent": len(durations) + 1,
        "lost": 1,
        "background_sent": 100 * background,
        "background_back": 90 * background,
        "target_cores": 0.5,
        "other_cores": 0.05,
        **extra,
    }


def test_rows_pool_the_repetitions_of_each_target_and_background() -> None:
    runs = [
        run("gateway", 0, [1.0, 2.0, 3.0]),
        run("direct", 0, [0.1, 0.2]),
        run("gateway", 0, [4.0, 5.0], noisy=True),
        run("gateway", 100, []),
    ]
    rows = summarize(runs)
    assert [(r["target"], r["background"]) for r in rows] == [
        ("gateway", 0),
        ("direct", 0),
        ("gateway", 100),
    ]
    gateway = rows[0]
    assert (gateway["n"], gateway["p50_ms"], gateway["max_ms"]) == (5, 3.0, 5.0)
    assert gateway["reps"] == 2
    assert gateway["rep_p50_ms"] == {"median": 3.25, "min": 2.0, "max": 4.5}
    assert (gateway["sent"], gateway["lost"], gateway["noisy_reps"]) == (7, 2, 1)
    assert rows[2]["p99_ms"] is None
    assert rows[2]["rep_p99_ms"] is None
    assert (gateway["background_delivered"], rows[2]["background_delivered"]) == (None, 0.9)


def test_the_table_has_one_line_per_row_and_dashes_for_nothing() -> None:
    table = render(summarize([run("gateway", 100, [0.5, 0.7]), run("pipecat", 100, [])]), "T")
    lines = table.splitlines()
    assert lines[0] == "### T"
    gateway = next(row for row in lines if row.startswith("| gateway"))
    assert "| 100 | 2 | 0.600 |" in gateway
    assert "| 90.0% |" in gateway
    pipecat = next(row for row in lines if row.startswith("| pipecat"))
    assert "| – |" in pipecat


def test_a_report_whose_processes_shared_one_core_says_so() -> None:
    rows = summarize([run("gateway", 100, [0.5, 0.7])])
    pinned = {"allowed_cpus": [0, 1], "pinning": {"pinned": True, "note": "pinned"}}
    unpinned = {"allowed_cpus": [1], "pinning": {"pinned": False, "note": "only 1 core(s) allowed"}}
    assert "Not pinned" not in render_report({"summary": rows, "machine": pinned})
    flagged = render_report({"summary": rows, "machine": unpinned})
    assert flagged.startswith(render(rows, "Tool dispatch overhead (no-op tool, OpenAI fake)"))
    assert flagged.endswith("**Not pinned** (only 1 core(s) allowed; allowed cores [1]).")


def test_a_plan_counts_frames_and_seconds() -> None:
    plan = DispatchPlan(dispatches=75, every=4)
    assert (plan.frames, plan.seconds) == (300, 6.0)


def test_the_http_row_says_what_the_tool_adds() -> None:
    section = summarize_http({"direct": [1.0, 2.0, 3.0], "http_tool": [1.5, 2.25, 3.5]})
    assert section["paths"]["direct"]["p50_ms"] == 2.0
    assert section["paths"]["http_tool"]["p50_ms"] == 2.25
    assert section["added_p50_ms"] == 0.25
    assert section["added_p99_ms"] == pytest.approx(0.495)
    table = render_http(section)
    assert "| direct (aiohttp) | 3 | 2.000 |" in table
    assert "| HTTP tool (tool runner) | 3 | 2.250 |" in table
    assert "adds 0.250 ms at p50 (target ≤ 1 ms: met)" in table


def test_an_http_row_that_failed_or_is_empty_says_so() -> None:
    assert "Not measured: RuntimeError: no API" in render_http({"error": "RuntimeError: no API"})
    empty = summarize_http({})
    assert empty["added_p50_ms"] is None
    assert "adds – ms at p50" in render_http(empty)
