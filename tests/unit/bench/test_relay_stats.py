"""The pure parts of ``scripts/bench relay``: stamps, reassembly, percentiles, spreads, CPU."""

from __future__ import annotations

import pytest

from bench.relay.report import render, summarize
from bench.relay.stats import (
    FRAME_BYTES,
    MAGIC,
    CpuSnapshot,
    FrameReassembler,
    Spread,
    Stall,
    StampedFrame,
    SystemCpuTicks,
    counter_deltas,
    cpu_us_per_frame,
    cpu_usage,
    paired_differences,
    parse_counters,
    parse_frame,
    parse_process_cpu_ticks,
    parse_system_cpu_ticks,
    percentile,
    stall_episodes,
    stamp_frame,
)

# --- frame stamps ------------------------------------------------------------------------------


def test_a_stamped_frame_is_20_ms_of_24_khz_pcm16_and_parses_back() -> None:
    frame = stamp_frame(49, 123_456)
    assert len(frame) == FRAME_BYTES == 960
    assert frame.startswith(MAGIC)
    assert parse_frame(frame) == StampedFrame(session=49, sequence=123_456, intact=True)


def test_frames_differ_only_in_their_stamp() -> None:
    assert stamp_frame(1, 2)[12:] == stamp_frame(3, 4)[12:]
    assert stamp_frame(1, 2)[:12] != stamp_frame(1, 3)[:12]


def test_the_magic_never_occurs_in_the_filler() -> None:
    assert MAGIC not in stamp_frame(0, 0)[4:]


def test_an_altered_or_truncated_frame_is_not_intact() -> None:
    altered = bytearray(stamp_frame(2, 7))
    altered[500] ^= 0xFF
    assert parse_frame(bytes(altered)) == StampedFrame(2, 7, intact=False)
    assert parse_frame(stamp_frame(2, 7)[:900]) == StampedFrame(2, 7, intact=False)


def test_a_frame_may_have_any_size_with_the_same_filler_pattern() -> None:
    frame = stamp_frame(3, 9, frame_bytes=640)  # 20 ms of 16 kHz PCM16
    assert len(frame) == 640
    assert frame[12:] == stamp_frame(3, 9)[12:640]
    assert parse_frame(frame, frame_bytes=640) == StampedFrame(3, 9, intact=True)
    assert parse_frame(frame) == StampedFrame(3, 9, intact=False)  # not the default 960
    with pytest.raises(ValueError, match="at least 12"):
        stamp_frame(0, 0, frame_bytes=8)


def test_an_unstamped_frame_is_none() -> None:
    assert parse_frame(bytes(FRAME_BYTES)) is None
    assert parse_frame(MAGIC) is None


# --- reassembly --------------------------------------------------------------------------------


def test_whole_frames_pass_straight_through() -> None:
    reassembler = FrameReassembler()
    assert reassembler.feed(stamp_frame(0, 1)) == [stamp_frame(0, 1)]
    assert reassembler.rechunked == 0


def test_split_and_merged_frames_are_cut_back_into_frames() -> None:
    stream = b"".join(stamp_frame(0, n) for n in range(3))
    reassembler = FrameReassembler()
    pieces = [stream[:100], stream[100:1500], stream[1500:]]
    frames = [frame for piece in pieces for frame in reassembler.feed(piece)]
    assert frames == [stamp_frame(0, n) for n in range(3)]
    assert reassembler.rechunked == 3
    assert reassembler.skipped_bytes == 0


def test_frames_of_another_size_are_cut_at_that_size() -> None:
    reassembler = FrameReassembler(frame_bytes=640)
    assert reassembler.feed(stamp_frame(1, 0, 640)) == [stamp_frame(1, 0, 640)]
    stream = stamp_frame(1, 1, 640) + stamp_frame(1, 2, 640)
    assert reassembler.feed(stream) == [stamp_frame(1, 1, 640), stamp_frame(1, 2, 640)]
    assert reassembler.rechunked == 1


def test_garbage_before_a_frame_is_skipped_and_counted() -> None:
    reassembler = FrameReassembler()
    assert reassembler.feed(b"\x00" * 10 + stamp_frame(5, 6)) == [stamp_frame(5, 6)]
    assert reassembler.skipped_bytes == 10


# --- percentiles and spreads -------------------------------------------------------------------


def test_percentile_interpolates_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 2.5
    assert percentile(values, 100) == 4.0
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0


def test_percentile_refuses_nothing_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="out of range"):
        percentile([1.0], 101)


def test_spread_is_median_min_max() -> None:
    spread = Spread.of([0.30, 0.10, 0.25])
    assert spread == Spread(median=0.25, low=0.10, high=0.30)
    assert spread.render(2) == "0.25 [0.10–0.30]"
    assert spread.as_dict() == {"median": 0.25, "min": 0.10, "max": 0.30}
    assert Spread.of([1.0, 3.0]).median == 2.0


def test_paired_differences_pair_by_position() -> None:
    assert paired_differences([0.5, 0.7], [0.2, 0.3]) == pytest.approx([0.3, 0.4])
    with pytest.raises(ValueError, match="as many"):
        paired_differences([1.0], [])


# --- CPU arithmetic ----------------------------------------------------------------------------


def test_cpu_per_frame_pair() -> None:
    assert cpu_us_per_frame(1.25, 10_000) == pytest.approx(125.0)
    assert cpu_us_per_frame(0.5, 0) is None


def test_process_ticks_are_utime_plus_stime_even_with_spaces_in_the_name() -> None:
    fields = ["S", *[str(n) for n in range(4, 14)], "250", "70", *["0"] * 30]
    assert parse_process_cpu_ticks(f"1234 (python -m x) {' '.join(fields)}") == 320


def test_system_ticks_from_proc_stat() -> None:
    text = "cpu  100 5 40 9000 7 3 11 2 0 0\ncpu0 50 2 20 4500 3 1 5 1 0 0\n"
    assert parse_system_cpu_ticks(text) == SystemCpuTicks(tasks=145, interrupts=14, steal=2)
    with pytest.raises(ValueError, match="not the text"):
        parse_system_cpu_ticks("intr 1 2 3\n")


def _snapshot(wall: float, gateway: int, load: int, tasks: int) -> CpuSnapshot:
    system = SystemCpuTicks(tasks=tasks, interrupts=tasks // 10, steal=0)
    return CpuSnapshot(wall_s=wall, processes={"gateway": gateway, "load": load}, system=system)


def test_cpu_usage_splits_ours_from_other_processes() -> None:
    before = _snapshot(10.0, gateway=1000, load=500, tasks=20_000)
    after = _snapshot(12.0, gateway=1050, load=570, tasks=20_140)  # 2 s, 100 ticks/s
    usage = cpu_usage(before, after, clock_ticks_per_s=100)
    assert usage.wall_s == pytest.approx(2.0)
    assert usage.process_s == {"gateway": 0.5, "load": 0.7}
    assert usage.other_cores == pytest.approx(0.1)  # 140 − 120 ticks over 2 s
    assert usage.interrupt_cores == pytest.approx(0.07)
    assert not usage.noisy
    busier = _snapshot(12.0, gateway=1050, load=570, tasks=20_200)
    assert cpu_usage(before, busier, clock_ticks_per_s=100).noisy


def test_other_processes_never_go_negative() -> None:
    before = _snapshot(0.0, gateway=0, load=0, tasks=0)
    after = _snapshot(1.0, gateway=60, load=60, tasks=100)  # tick rounding: ours > the total
    assert cpu_usage(before, after, clock_ticks_per_s=100).other_cores == 0.0
    with pytest.raises(ValueError, match="after the first"):
        cpu_usage(after, before, clock_ticks_per_s=100)


# --- summary over repetitions ------------------------------------------------------------------


def _run(target: str, rep: int, p50: float, p99: float, cpu: float) -> dict[str, object]:
    return {
        "target": target,
        "sessions": 50,
        "rep": rep,
        "p50_ms": p50,
        "p99_ms": p99,
        "relay_cpu_us_per_frame": cpu,
        "other_cores": 0.01,
        "frames_sent": 12_500,
        "lost": 0,
        "corrupt": 0,
        "stray": 0,
        "noisy": rep == 2,
    }


def test_summary_pairs_gateway_with_direct_by_repetition() -> None:
    runs = [
        _run("direct", 0, 0.20, 0.50, 40.0),
        _run("gateway", 0, 0.60, 1.50, 150.0),
        _run("gateway", 1, 0.55, 1.20, 140.0),
        _run("direct", 1, 0.25, 0.60, 42.0),
        _run("direct", 2, 0.30, 0.70, 44.0),
        _run("gateway", 2, 0.50, 1.00, 160.0),
    ]
    direct, gateway = summarize(runs, [50])
    assert direct["added_p50_ms"] is None
    assert direct["relay_cpu_us_per_frame"] == {"median": 42.0, "min": 40.0, "max": 44.0}
    assert gateway["added_p50_ms"] == pytest.approx({"median": 0.30, "min": 0.20, "max": 0.40})
    assert gateway["added_p99_ms"] == pytest.approx({"median": 0.60, "min": 0.30, "max": 1.00})
    assert gateway["noisy_reps"] == 1
    assert gateway["frames_sent"] == 37_500


def test_the_gemini_table_shows_the_slowest_frames_beside_the_cpu() -> None:
    from bench.relay.targets import PROVIDERS

    runs = [
        {**_run("gateway", rep, 0.5, 1.5, 150.0), "max_ms": 9.0 + rep, "first_second_max_ms": 8.0}
        for rep in range(3)
    ]
    _, row = summarize(runs, [50])  # direct (no runs here), gateway
    assert row["max_ms"] == {"median": 10.0, "min": 9.0, "max": 11.0}
    assert row["first_second_max_ms"] == {"median": 8.0, "min": 8.0, "max": 8.0}
    table = render([row], PROVIDERS["gemini"])
    header = next(line for line in table.splitlines() if line.startswith("target"))
    assert header.index("p99 ms") < header.index("max ms") < header.index("1st s max ms")
    assert header.index("1st s max ms") < header.index("CPU µs/frame")
    assert "10.00 [9.00–11.00]" in table


def test_slow_frames_close_in_time_make_one_stall() -> None:
    slow = [(1.000, 0, 0.004), (1.005, 1, 0.009), (1.010, 2, 0.006), (3.0, 0, 0.005)]
    assert stall_episodes(slow, gap_s=0.02) == [
        Stall(at_s=1.0, frames=3, sessions=3, worst_s=0.009),
        Stall(at_s=3.0, frames=1, sessions=1, worst_s=0.005),
    ]
    assert stall_episodes([], gap_s=0.02) == []


def test_counters_are_read_from_the_metrics_page_and_diffed() -> None:
    page = (
        "# HELP gateway_frames_in_total Frames from clients\n"
        'gateway_frames_in_total{kind="binary"} 350.0\n'
        'gateway_frames_in_created{kind="binary"} 1.79e+09\n'
        "gateway_audio_frames_dropped_total 0.0\n"
        "gateway_active_sessions 2.0\n"
        "process_cpu_seconds_total 3.0\n"
    )
    before = parse_counters(page)
    assert before == {
        'gateway_frames_in_total{kind="binary"}': 350.0,
        "gateway_audio_frames_dropped_total": 0.0,
    }
    after = parse_counters(page.replace("350.0", "600.0"))
    assert counter_deltas(before, after) == {'gateway_frames_in_total{kind="binary"}': 250.0}
