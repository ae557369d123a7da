"""The pure parts of ``scripts/bench console`` and of the relay loop it shares with
``scripts/bench budgets`` (``bench.relay.ab``): the events read off a stream, what the consoles
heard over a window, the rows' order, the per-repetition ratios, the verdict."""

from __future__ import annotations

from typing import Any

import pytest

from bench.console.bench import render, summarize
from bench.console.clients import SseParser, Watch, longest_gap
from bench.relay.ab import per_rep, ratios, turning


def test_events_are_read_across_chunks_and_comments_are_skipped() -> None:
    parser = SseParser()
    assert parser.feed(b'event: sessions\ndata: {"a"') == []
    assert parser.feed(b": 1}\n\n: ping\n\nevent: sessions\r\ndata: [2]\r\n\r\n") == [
        ("sessions", b'{"a": 1}'),
        ("sessions", b"[2]"),
    ]
    assert parser.feed(b"data: x\n\n") == [("message", b"x")]


def test_the_longest_gap_counts_the_windows_edges() -> None:
    assert longest_gap([0.5, 1.5, 2.5, 9.0], 1.0, 3.0) == pytest.approx(1.0)
    assert longest_gap([1.2], 1.0, 4.0) == pytest.approx(2.8)
    assert longest_gap([], 1.0, 2.0) == pytest.approx(1.0)


def directory(*sessions: tuple[str, str, str]) -> dict[str, Any]:
    return {"sessions": [{"session_id": s, "node": n, "state": st} for s, n, st in sessions]}


def test_the_watch_follows_a_live_session_of_the_measured_node_and_reports_a_window() -> None:
    watch = Watch({"bench-a": "http://a", "bench-b": "http://b"}, "bench-a")
    watch.heard("bench-b", directory(("s1", "bench-a.abc123", "live")))  # not the measured stream
    assert watch.live_session is None
    watch.heard(
        "bench-a", directory(("s2", "bench-b.def456", "live"), ("s3", "bench-ab.0", "live"))
    )
    assert watch.live_session is None  # another node's, and a node whose name only begins alike
    watch.heard(
        "bench-a", directory(("s4", "bench-a.abc123", "parked"), ("s5", "bench-a.abc123", "live"))
    )
    assert watch.live_session == "s5"
    watch.events = {"bench-a": [10.0, 11.0, 12.0, 13.0], "bench-b": [10.5, 12.5]}
    watch.polls = [(11.0, 200, 3), (12.0, 404, 0), (20.0, 200, 9)]
    report = watch.report(10.0, 13.0)["console"]
    assert report["streams"]["bench-a"] == {"events": 4, "per_s": 1.333, "longest_gap_s": 1.0}
    assert report["streams"]["bench-b"]["longest_gap_s"] == 2.0
    assert (report["timeline_polls"], report["timeline_polls_200"]) == (2, 1)
    assert report["timeline_entries_max"] == 3
    assert not report["live"]  # bench-b's stream went 2 s without an event


def test_the_rows_turn_and_the_ratios_are_per_repetition() -> None:
    assert list(turning(["console", "none", "none_again"], 1)) == ["none_again", "none", "console"]
    records = [
        {"part": "relay", "rep": rep, "target": t, "cpu": v}
        for rep, values in enumerate([(105, 100, 98), (99, 100, 103)])
        for t, v in zip(("console", "none", "none_again"), values, strict=True)
    ]
    records.append({"part": "other", "rep": 0, "target": "console", "cpu": 1})
    by_rep = per_rep(records, "relay", "cpu")
    assert ratios(by_rep, "console", "none") == [1.05, 0.99]
    assert ratios(by_rep, "none_again", "none") == [0.98, 1.03]


def record(rep: int, target: str, cpu: float, live: bool = True) -> dict[str, Any]:
    found: dict[str, Any] = {
        "part": "relay",
        "rep": rep,
        "target": target,
        "cpu_us_per_frame": cpu,
        "p99_ms": 2.0,
        "lost": 0,
    }
    if target == "console":
        stream = {"events": 30, "per_s": 1.0, "longest_gap_s": 1.01}
        found["console"] = {
            "streams": {"bench-a": stream, "bench-b": stream},
            "timeline_polls_200": 30,
            "sessions_listed_max": 50,
            "live": live,
        }
    return found


def test_the_verdict_needs_the_median_ratio_within_5_percent_and_live_consoles() -> None:
    cpus = [(104, 100, 101), (110, 100, 99), (100, 100, 100)]
    records = [
        record(rep, t, v)
        for rep, values in enumerate(cpus)
        for t, v in zip(("console", "none", "none_again"), values, strict=True)
    ]
    summary = summarize(records)
    assert summary["relay_cpu_ratio"]["median"] == pytest.approx(1.04)
    assert summary["relay_cpu_ratio_aa"]["median"] == pytest.approx(1.0)
    assert summary["met"]
    assert "×1.040 (×1.000)" in render(summary)
    records[0] = record(0, "console", 104, live=False)
    assert not summarize(records)["met"]
