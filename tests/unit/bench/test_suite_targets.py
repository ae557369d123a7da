"""The suite's targets, plans and tables: goload's arguments, run order, markdown, plot data."""

from __future__ import annotations

from typing import Any

import orjson

from bench.__main__ import _with_baseline
from bench.peers.launch import litellm_config
from bench.suite.capacity import CapacityPlan
from bench.suite.plots import cdf_series, ramp_series
from bench.suite.relay import HIGH_LOAD_TARGETS, RelayPlan
from bench.suite.report import capacity_table, markdown_table
from bench.suite.targets import (
    ALL_TARGETS,
    DEFAULT_TARGETS,
    OPTIONAL_TARGETS,
    REDIS_TARGETS,
    SPECS,
    compat_session_update,
    gateway_start,
    load_args,
    pingpong_args,
)


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_every_row_of_the_issue_is_a_target_and_direct_comes_first() -> None:
    assert DEFAULT_TARGETS == (
        "direct",
        "floor",
        "litellm",
        "pipecat",
        "pipecat_nopace",
        "gateway",
        "gateway_compat",
        "gateway_16k",
        "gateway_deflate",
    )
    assert all(SPECS[t].compression for t in ALL_TARGETS)  # every hop is accounted for
    # Optional rows: the baseline (--baseline REV) and those of scripts/bench scale (on Redis).
    assert set(ALL_TARGETS) - set(DEFAULT_TARGETS) == OPTIONAL_TARGETS
    assert {
        "gateway_base",
        "gateway_compat_base",
        "gateway_base_16k",
        "gateway_redis",
        "gateway_w2",
        "gateway_traced",
        "gateway_alias",
    } == OPTIONAL_TARGETS
    assert set(REDIS_TARGETS) == {"gateway_redis", "gateway_w2"}


def test_the_gateway_at_24_khz_is_matched_by_stamp_without_resampling() -> None:
    spec = SPECS["gateway"]
    args = load_args(
        spec,
        "ws://h/v1/session",
        [],
        sessions=50,
        fps=50,
        seconds=10,
        warmup=50,
        grace_s=2,
        timeout_s=90,
    )
    assert args[0] == "load"
    assert _flag(args, "-proto") == "gateway"
    assert _flag(args, "-match") == "stamp"
    assert _flag(args, "-frame-bytes") == _flag(args, "-out-frame-bytes") == "960"
    assert (_flag(args, "-c"), _flag(args, "-rate"), _flag(args, "-dur")) == ("50", "50", "10")
    assert _flag(args, "-grace") == "2s"
    start = orjson.loads(_flag(args, "-start"))
    assert start["audio"] == {"input_rate": 24000, "output_rate": 24000}
    assert "-deflate" not in args


def test_the_16_khz_row_sends_640_bytes_expects_960_and_matches_bytes() -> None:
    spec = SPECS["gateway_16k"]
    args = load_args(
        spec, "ws://h", [], sessions=1, fps=50, seconds=1, warmup=1, grace_s=2, timeout_s=9
    )
    assert (_flag(args, "-frame-bytes"), _flag(args, "-out-frame-bytes")) == ("640", "960")
    assert _flag(args, "-match") == "bytes"
    assert orjson.loads(_flag(args, "-start"))["audio"]["input_rate"] == 16000
    assert spec.pingpong  # the resampler holds nothing back: a lone frame comes back whole


def test_peers_speak_their_own_protocols_with_their_headers() -> None:
    litellm = pingpong_args(SPECS["litellm"], "ws://l", ["Authorization: Bearer k"], 2000, 100, 60)
    assert litellm[0] == "pingpong"
    assert _flag(litellm, "-proto") == "openai"
    assert _flag(litellm, "-header") == "Authorization: Bearer k"
    assert _flag(litellm, "-n") == "2000"
    assert "-start" not in litellm
    pipecat = pingpong_args(SPECS["pipecat"], "ws://p/ws", [], 10, 1, 60)
    assert (_flag(pipecat, "-proto"), _flag(pipecat, "-match")) == ("pcm", "bytes")
    assert "-deflate" in pingpong_args(SPECS["gateway_deflate"], "ws://g", [], 10, 1, 60)


def test_the_compat_row_speaks_openai_to_the_gateway_process_after_a_session_update() -> None:
    spec = SPECS["gateway_compat"]
    # the gateway's own process (its CPU is measured), on /v1/realtime with a gpt-… model
    assert (spec.process, spec.proto) == ("gateway", "openai")
    assert spec.path == "/v1/realtime?model=gpt-realtime"
    assert SPECS["gateway"].path == "/v1/session"
    assert spec.start is None
    args = load_args(
        spec,
        "ws://g" + spec.path,
        [],
        sessions=100,
        fps=50,
        seconds=5,
        warmup=50,
        grace_s=2,
        timeout_s=60,
    )
    assert _flag(args, "-proto") == "openai"
    assert _flag(args, "-match") == "stamp"  # the deltas are the appended bytes, one per frame
    assert _flag(args, "-frame-bytes") == _flag(args, "-out-frame-bytes") == "960"
    assert "-header" not in args  # the bench gateway runs with GATEWAY_AUTH=none
    update = orjson.loads(_flag(args, "-session-update"))
    assert update == orjson.loads(compat_session_update())
    assert update["type"] == "session.update"
    session = update["session"]
    assert session["type"] == "realtime"
    pcm = {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["input"]["format"] == session["audio"]["output"]["format"] == pcm
    assert session["audio"]["input"]["turn_detection"] is None
    # the other OpenAI rows send none: the fake's defaults are already PCM16 at 24 kHz
    for peer in ("direct", "floor", "litellm"):
        assert "-session-update" not in pingpong_args(SPECS[peer], "ws://x", [], 10, 1, 60)


def test_the_compat_row_is_compared_with_litellm_at_high_load_but_has_no_ramp() -> None:
    assert {"gateway_compat", "litellm"} <= set(HIGH_LOAD_TARGETS)
    runs = RelayPlan(targets=("direct", "litellm", "gateway_compat"), reps=1).runs()
    assert [r.target for r in runs if r.sessions == 100] == ["litellm", "gateway_compat"]
    assert "gateway_compat" not in CapacityPlan().targets


def test_gateway_start_is_a_voice_session() -> None:
    assert orjson.loads(gateway_start(16000, 24000)) == {
        "type": "session.start",
        "mode": "voice",
        "audio": {"input_rate": 16000, "output_rate": 24000},
    }


def test_the_litellm_config_points_at_the_fake_with_a_key_and_the_master_key_from_env() -> None:
    config = litellm_config("http://127.0.0.1:9999")
    assert "api_base: http://127.0.0.1:9999" in config
    assert "api_key: sk-bench" in config
    assert "master_key: os.environ/LITELLM_MASTER_KEY" in config
    assert "model: openai/gpt-realtime" in config


def test_the_relay_plan_interleaves_targets_and_reverses_every_other_rep() -> None:
    plan = RelayPlan(targets=("direct", "gateway", "gateway_16k"), reps=2)
    runs = plan.runs()
    rep0 = [(r.kind, r.target, r.sessions) for r in runs if r.rep == 0]
    rep1 = [(r.kind, r.target, r.sessions) for r in runs if r.rep == 1]
    assert rep0[:2] == [("pingpong", "direct", 1), ("pingpong", "gateway", 1)]  # no 16k
    assert [t for k, t, n in rep0 if n == 50] == ["direct", "gateway", "gateway_16k"]
    assert [t for k, t, n in rep1 if n == 50] == ["gateway_16k", "gateway", "direct"]
    assert [t for k, t, n in rep0 if n == 100] == ["gateway"]  # the compared rows only
    assert all(r.rounds == 2000 for r in runs if r.kind == "pingpong")


def test_the_paced_row_does_fewer_round_trips_and_quick_is_small() -> None:
    runs = RelayPlan(targets=("direct", "pipecat")).runs()
    assert {r.rounds for r in runs if r.target == "pipecat" and r.kind == "pingpong"} == {250}
    quick = RelayPlan.quick().runs()
    assert {r.rep for r in quick} == {0}
    assert {(r.sessions, r.seconds) for r in quick if r.kind == "load"} == {(10, 3.0)}


def test_the_capacity_upper_bound_counts_every_level_of_every_target() -> None:
    plan = CapacityPlan(targets=("direct", "gateway"), levels=(50, 100))
    assert [(r.target, r.sessions) for r in plan.upper_bound_runs()] == [
        ("direct", 50),
        ("gateway", 50),
        ("direct", 100),
        ("gateway", 100),
    ]
    assert "gateway_deflate" not in CapacityPlan().targets


def test_markdown_tables_have_a_separator_row() -> None:
    assert markdown_table(["a", "b"], [["1", "2"]]) == "| a | b |\n|---|---|\n| 1 | 2 |"


def test_a_knee_at_the_top_of_the_ramp_is_a_lower_bound() -> None:
    row = {
        "target": "gateway",
        "knee_sessions": 400,
        "sessions_per_core_by_cpu": 500,
        "levels": [{"sessions": 400, "passed": True}],
        "setup_p50_ms": 1.0,
        "setup_p99_ms": 2.0,
        "rss_per_session_kb": 30.0,
        "at_sessions": 400,
    }
    table = capacity_table([row, {**row, "target": "x", "knee_sessions": None}], 50, 400)
    assert "| gateway | ≥ 400 | 500 | 400✓ |" in table
    assert "| x | none |" in table


def _run(target: str, kind: str, sessions: int, p99: float, **extra: Any) -> dict[str, Any]:
    return {
        "target": target,
        "kind": kind,
        "sessions": sessions,
        "p99_ms": p99,
        "cdf": [[p99 / 2, 0.5], [p99, 0.99]],
        **extra,
    }


def test_the_cdf_plotted_is_the_median_p99_repetition() -> None:
    runs = [
        _run("gateway", "load", 50, 3.0),
        _run("gateway", "load", 50, 1.0),
        _run("gateway", "load", 50, 2.0),
        _run("gateway", "load", 50, 0.1, superseded=True),
        _run("gateway", "load", 100, 9.0),
    ]
    assert cdf_series(runs, ["gateway", "litellm"], "load", 50) == {
        "gateway": [(1.0, 0.5), (2.0, 0.99)]
    }


def test_ramp_series_follow_the_sessions() -> None:
    runs = [_run("floor", "load", 100, 4.0), _run("floor", "load", 50, 2.0)]
    assert ramp_series(runs, ["floor"], "p99_ms") == {"floor": [(50, 2.0), (100, 4.0)]}


def test_the_baseline_row_follows_ours_and_only_with_a_baseline() -> None:
    from pathlib import Path

    rows = ("direct", "litellm", "gateway", "gateway_16k")
    assert _with_baseline(rows, None) == rows
    assert _with_baseline((*rows, "gateway_base"), None) == rows
    assert _with_baseline(rows, Path("/tmp/wt")) == (
        "direct",
        "litellm",
        "gateway",
        "gateway_base",
        "gateway_16k",
    )
    assert _with_baseline(("direct",), Path("/tmp/wt")) == ("direct", "gateway_base")


def test_the_compat_endpoint_gets_its_baseline_row_beside_it() -> None:
    from pathlib import Path

    rows = ("direct", "gateway", "gateway_compat")
    assert _with_baseline(rows, Path("/tmp/wt")) == (
        "direct",
        "gateway",
        "gateway_base",
        "gateway_compat",
        "gateway_compat_base",
    )
    assert _with_baseline((*rows, "gateway_compat_base"), None) == rows
    base, ours = SPECS["gateway_compat_base"], SPECS["gateway_compat"]
    # the same client, the same requests, the baseline's process
    assert (base.process, base.proto) == ("gateway_base", "openai")
    assert (base.path, base.session_update) == (ours.path, ours.session_update)
    assert "gateway_compat_base" in HIGH_LOAD_TARGETS


def test_load_runs_are_measured_from_each_sessions_first_frame() -> None:
    runs = RelayPlan(targets=("direct", "gateway")).runs()
    assert {r.warmup for r in runs if r.kind == "load"} == {0}
    assert {r.warmup for r in runs if r.kind == "pingpong"} == {100}  # serial: unchanged
    args = load_args(
        SPECS["gateway"],
        "ws://g",
        [],
        sessions=50,
        fps=50,
        seconds=10,
        warmup=0,
        grace_s=2,
        timeout_s=60,
    )
    assert _flag(args, "-warmup") == "0"
