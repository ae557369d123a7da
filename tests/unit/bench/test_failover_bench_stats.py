"""The failover bench's pure parts: what the fallback heard, distributions, targets and their
verdicts, the run's order, the table and the plot's data, from made-up samples."""

from __future__ import annotations

from typing import Any

import pytest

from bench.failover.audio import frame_bytes, silence, tone
from bench.failover.bench import schedule
from bench.failover.plot import fallback_audio
from bench.failover.stats import (
    KINDS,
    Distribution,
    Target,
    audio_loss,
    heard_ms,
    judge,
    render,
    summarize,
    targets_for,
)

DEADLINES = {"first_output_voice_s": 1.0, "output_gap_s": 1.0}


def voice(kind: str, audio_ms: float, **fields: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {
        "kind": kind,
        "variant": "voice",
        "ok": True,
        "fault_to_audio_ms": audio_ms,
        "audio_lost_ms": 0,
        "audio_extra_ms": 0,
    }
    sample.update(fields)
    return sample


def tool(kind: str, mic: str, outcome: str, executions: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "variant": "tool",
        "ok": outcome == "answered",
        "mic": mic,
        "outcome": outcome,
        "executions": executions,
        "fault_to_audio_ms": 1400.0 if outcome == "answered" else None,
    }


def test_the_fakes_transcript_says_how_much_speech_was_heard() -> None:
    assert heard_ms("audio:310ms") == 310
    assert heard_ms(" audio:0ms ") == 0
    assert heard_ms("You said: hello") is None
    assert heard_ms(None) is None


@pytest.mark.parametrize(
    ("sent", "heard", "expected"),
    [
        (300, 300, (0, 0)),
        (300, 310, (0, 0)),  # one VAD frame more: all of it, nothing twice
        (300, 320, (0, 10)),  # beyond that frame: heard twice
        (300, 240, (60, 0)),
        (300, 0, (300, 0)),
    ],
)
def test_audio_lost_is_what_was_said_and_not_heard(
    sent: int, heard: int, expected: tuple[int, int]
) -> None:
    assert audio_loss(sent, heard) == expected


def test_a_distribution_has_the_percentiles_of_its_values() -> None:
    dist = Distribution.of([float(v) for v in range(1, 101)])
    assert dist is not None
    assert (dist.n, dist.p50, dist.max) == (100, 50.5, 100.0)
    assert dist.p95 == pytest.approx(95.05)
    assert dist.p99 == pytest.approx(99.01)
    assert Distribution.of([]) is None


def test_a_target_is_judged_at_its_percentile_or_on_every_sample() -> None:
    values = [100.0] * 95 + [5000.0] * 5  # p95 lands on the slow tail's edge
    assert judge(Target("x", 1500.0, 94.0), values) is True
    assert judge(Target("x", 1500.0, 99.0), values) is False
    assert judge(Target("lost", 0.0, None), [0.0, 0.0]) is True
    assert judge(Target("lost", 0.0, None), [0.0, 10.0]) is False
    assert judge(Target("x", 1.0), []) is None
    assert Target("x", 1500.0).describe() == "p95 ≤ 1500"
    assert Target("x", 0.0, None).describe() == "all ≤ 0"


def test_targets_follow_the_deadlines_the_gateway_ran_with() -> None:
    deadlines = {"first_output_voice_s": 1.0, "output_gap_s": 2.0}
    limits = {t.measure: t.limit_ms for t in targets_for("connect_429", deadlines)}
    assert limits == {"fault_to_audio_ms": 1500.0, "audio_lost_ms": 0.0}
    first = {t.measure: t.limit_ms for t in targets_for("stall_first", deadlines)}
    assert first == {"fault_to_audio_ms": 2500.0, "detection_ms": 200.0, "audio_lost_ms": 0.0}
    mid = {t.measure: t.limit_ms for t in targets_for("stall_mid", deadlines)}
    assert mid["fault_to_audio_ms"] == 3500.0


def test_the_summary_judges_recovered_faults_and_counts_duplicate_executions() -> None:
    samples = [
        *(voice("stall_first", 1010.0 + i, detection_ms=10.0 + i) for i in range(19)),
        voice("stall_first", 1900.0, detection_ms=300.0, audio_lost_ms=40),
        {"kind": "stall_first", "variant": "voice", "ok": False, "error": "timed out"},
        tool("stall_first", "open", "loop", 1),
        tool("stall_first", "quiet", "answered", 2),
        voice("connect_refused", 20.0),
        {
            "kind": "reference",
            "variant": "reference",
            "ok": True,
            "fault_to_audio_ms": 12.0,
            "to_switch_ms": 10.0,
        },
    ]
    summary = summarize(samples, DEADLINES)
    row = summary["kinds"]["stall_first"]
    assert (row["faults"], row["recovered"], row["lossy"]) == (21, 20, 1)
    assert row["errors"] == {"timed out": 1}
    verdicts = {v["measure"]: v["met"] for v in row["targets"]}
    assert verdicts == {
        "fault_to_audio_ms": True,  # p95 of 1010…1028, 1900: under 2500
        "detection_ms": True,  # p95 of 10…28, 300: 41.6
        "audio_lost_ms": False,  # one fault lost 40 ms
        "duplicates": False,
        "recovered": False,  # one fault never recovered
    }
    assert row["measures"]["detection_ms"]["max"] == 300.0
    tools = row["tool"]
    assert (tools["faults"], tools["answered"], tools["loops"]) == (2, 1, 1)
    assert (tools["executions"], tools["duplicates"]) == (3, 1)
    assert tools["by_mic"]["quiet"]["duplicates"] == 1
    assert tools["by_mic"]["open"]["loops"] == 1
    connect = {v["measure"]: v["met"] for v in summary["kinds"]["connect_refused"]["targets"]}
    assert connect == {"fault_to_audio_ms": True, "audio_lost_ms": True, "recovered": True}
    assert summary["reference"]["start_to_audio_ms"]["p50"] == 12.0
    assert "lost" not in summary["kinds"]  # no sample of that kind


def test_the_table_has_a_section_per_kind_and_the_tool_repetitions() -> None:
    samples = [voice(kind, 100.0, detection_ms=5.0) for kind in KINDS]
    samples.append(tool("lost", "open", "answered", 1))
    text = render(summarize(samples, DEADLINES))
    for kind in KINDS:
        assert f"**{kind}**: 1 voice faults, 1 recovered" in text
    assert "| lost | open | 1 | 1 | 0 | 0 | 1 | 0 | 1400 / 1400 |" in text
    assert "**no**" not in text


def test_the_run_interleaves_the_kinds_and_spreads_the_tool_repetitions() -> None:
    order = schedule(10, 2)
    voice_runs = [(k, r) for k, v, r in order if v == "voice"]
    assert voice_runs[:5] == [(kind, 0) for kind in KINDS]
    assert len(voice_runs) == 50
    tools = [(i, k, r) for i, (k, v, r) in enumerate(order) if v == "tool"]
    assert [(k, r) for _, k, r in tools] == [
        ("lost", 0), ("stall_first", 0), ("stall_mid", 0),
        ("lost", 1), ("stall_first", 1), ("stall_mid", 1),
    ]  # fmt: skip
    assert tools[3][0] > 5 * 5  # the second batch after round 5's voice faults
    assert sum(1 for _, v, _ in order if v == "reference") == 2
    assert len(schedule(3, 0)) == 15


def test_the_plot_shows_recovered_voice_faults_against_their_target() -> None:
    samples = [
        voice("lost", 300.0),
        voice("lost", 250.0),
        voice("lost", 9000.0, ok=False),
        tool("lost", "open", "answered", 1),
        voice("stall_mid", 1020.0),
    ]
    series = fallback_audio(samples, {"first_output_voice_s": 1.0, "output_gap_s": 2.0})
    assert list(series) == ["lost", "stall_mid"]
    values, p95, limit = series["lost"]
    assert values == [250.0, 300.0]
    assert p95 == pytest.approx(297.5)
    assert limit == 1500.0
    assert series["stall_mid"][2] == 3500.0


def test_the_users_audio_is_whole_frames_of_tone_or_silence() -> None:
    assert len(tone(300, 16000)) == 15 * frame_bytes(16000) == 9600
    assert silence(20, 24000) == bytes(960)
    with pytest.raises(ValueError, match="whole number"):
        tone(25, 16000)
