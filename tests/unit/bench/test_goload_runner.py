"""``bench.goload_runner``: parsing goload's report and stderr, the rebuild stamp, and one short
run of the real binary against an echo server in this process (skipped without Go)."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve

from bench.goload_runner import (
    GoloadResult,
    StderrLines,
    ensure_goload,
    go_available,
    parse_result,
    run_goload,
    source_digest,
)
from bench.relay.procs import free_port

REPO = Path(__file__).resolve().parents[3]


def _report(**overrides: object) -> dict[str, object]:
    report: dict[str, object] = {
        "mode": "load",
        "proto": "gateway",
        "url": "ws://127.0.0.1:1/v1/session",
        "sessions": 2,
        "rate": 50,
        "duration_s": 1,
        "frame_bytes": 960,
        "sent": 100,
        "received": 99,
        "lost": 1,
        "unsent": 0,
        "mismatched": 0,
        "errors": 0,
        "connect_failed": 0,
        "setup_ms": {"p50": 1.5, "p99": 2.0, "max": 2.0},
        "rtt_ms": {
            "n": 99,
            "mean": 0.4,
            "p50": 0.3,
            "p90": 0.5,
            "p99": 0.9,
            "p999": 1.1,
            "max": 1.2,
        },
        "cdf": [[0.2, 0.0], [0.3, 0.5], [1.2, 1.0]],
        "window_s": 1.0,
        "loadgen_cpu_s": 0.05,
        "timed_out": False,
    }
    report.update(overrides)
    return report


# --- the report ---------------------------------------------------------------------------------


def test_a_report_parses_into_typed_fields() -> None:
    result = parse_result(json.dumps(_report()) + "\n")
    assert (result.sent, result.received, result.lost, result.sessions) == (100, 99, 1, 2)
    assert result.rtt_ms("p99") == 0.9
    assert result.setup_ms("p50") == 1.5
    assert result.round_trips == 99
    assert result.cdf == [(0.2, 0.0), (0.3, 0.5), (1.2, 1.0)]
    assert result.window_s == 1.0
    assert result.loadgen_cpu_s == 0.05
    assert not result.complete  # one frame lost


def test_missing_statistics_are_none() -> None:
    empty = {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None, "p999": None}
    result = parse_result(json.dumps(_report(rtt_ms={**empty, "max": None}, window_s=None)))
    assert result.rtt_ms("p50") is None
    assert result.window_s is None


def test_a_run_is_complete_only_without_loss_errors_or_timeout() -> None:
    assert GoloadResult(_report(lost=0, received=100)).complete
    assert not GoloadResult(_report(lost=0, errors=1)).complete
    assert not GoloadResult(_report(lost=0, timed_out=True)).complete
    assert not GoloadResult(_report(lost=0, unsent=5)).complete


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "nothing"),
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"mode": "load"}', "lacks proto"),
    ],
)
def test_a_bad_report_is_a_clear_error(stdout: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_result(stdout)


# --- stderr lines -------------------------------------------------------------------------------


def test_stderr_is_cut_into_lines_across_chunks() -> None:
    lines = StderrLines(tail_lines=2)
    assert lines.feed(b"WINDOW ST") == []
    assert lines.feed(b"ART\r\nnoise\nWIN") == ["WINDOW START", "noise"]
    assert lines.feed(b"DOW END") == []
    assert lines.finish() == ["WINDOW END"]
    assert lines.finish() == []
    assert lines.tail() == "noise\nWINDOW END"


# --- the rebuild stamp --------------------------------------------------------------------------


def test_the_source_digest_changes_with_any_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.go", tmp_path / "b.go"
    first.write_text("package main\n")
    second.write_text("package main // b\n")
    digest = source_digest([first, second])
    assert digest == source_digest([second, first])  # order does not matter
    second.write_text("package main // changed\n")
    assert source_digest([first, second]) != digest


# --- the real binary against an echo server ---------------------------------------------------


def _echo(connection: ServerConnection) -> None:
    """``/openai``: the OpenAI Realtime shapes goload needs (``/openai-configured``: audio only
    after a ``session.update``, answered late); anything else: binary echo."""
    path = connection.request.path if connection.request is not None else ""
    try:
        if not path.startswith("/openai"):
            for message in connection:
                if isinstance(message, bytes):
                    connection.send(message)
            return
        connection.send(json.dumps({"type": "session.created", "session": {"id": "s"}}))
        connection.send(json.dumps({"type": "response.created", "response": {"output": []}}))
        configured = not path.startswith("/openai-configured")
        for message in connection:
            event = json.loads(message)
            if event["type"] == "session.update":
                time.sleep(0.05)  # audio sent before the answer would be refused below
                configured = True
                session = {"id": "s", **event["session"]}
                connection.send(json.dumps({"type": "session.updated", "session": session}))
            elif not configured:
                connection.send(json.dumps({"type": "error", "error": {"code": "early"}}))
            elif event["type"] == "input_audio_buffer.append":
                audio = base64.b64decode(event["audio"])
                delta = base64.b64encode(audio).decode()
                connection.send(json.dumps({"type": "response.output_audio.delta", "delta": delta}))
    except ConnectionClosed:
        pass


@pytest.fixture
def echo_server() -> Iterator[str]:
    port = free_port()
    server: Server = serve(_echo, "127.0.0.1", port, compression=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def goload() -> Path:
    if not go_available():
        pytest.skip(
            "Go or gorilla/websocket is not installed (apt-get: golang-go, "
            "golang-github-gorilla-websocket-dev); scripts/bench installs them"
        )
    return ensure_goload(REPO)


def test_goload_measures_round_trips_through_an_echo(goload: Path, echo_server: str) -> None:
    marks: list[str] = []
    pingpong = run_goload(
        goload,
        ["pingpong", "-url", f"{echo_server}/openai", "-proto", "openai", "-n", "200"],
        on_window_start=lambda: marks.append("start"),
        on_window_end=lambda: marks.append("end"),
        timeout_s=20,
    )
    assert marks == ["start", "end"]
    assert pingpong.complete, pingpong.raw
    assert pingpong.round_trips == pingpong.received == 200
    assert pingpong.cdf[-1][1] == 1.0

    load_args = ["load", "-url", f"{echo_server}/pcm", "-proto", "pcm", "-c", "3"]
    load_args += ["-rate", "50", "-dur", "1", "-warmup", "10", "-match", "bytes"]
    load = run_goload(
        goload, load_args, on_window_start=lambda: None, on_window_end=lambda: None, timeout_s=20
    )
    assert load.complete, load.raw
    assert load.sent == load.received == 150
    assert load.window_s is not None
    assert 0.9 < load.window_s < 1.5


def test_goload_configures_an_openai_session_before_its_audio(
    goload: Path, echo_server: str
) -> None:
    update = json.dumps({"type": "session.update", "session": {"type": "realtime"}})
    args = ["pingpong", "-url", f"{echo_server}/openai-configured", "-proto", "openai"]
    args += ["-n", "20", "-warmup", "5", "-session-update", update]
    result = run_goload(
        goload, args, on_window_start=lambda: None, on_window_end=lambda: None, timeout_s=20
    )
    assert result.complete, result.raw
    assert result.received == 20
    # without it the same server refuses the audio: the check above is not vacuous
    unconfigured = [*args[:5], "-n", "3", "-warmup", "0", "-grace", "0.2s"]
    refused = run_goload(
        goload, unconfigured, on_window_start=lambda: None, on_window_end=lambda: None, timeout_s=20
    )
    assert refused.errors > 0
    assert refused.received == 0


def test_goload_failures_are_clear_errors(goload: Path) -> None:
    unreachable = ["pingpong", "-url", f"ws://127.0.0.1:{free_port()}/", "-proto", "pcm", "-n", "1"]
    with pytest.raises(RuntimeError, match=r"exited with 1.*connect"):
        run_goload(goload, unreachable, on_window_start=_never, on_window_end=_never, timeout_s=10)
    with pytest.raises(RuntimeError, match="exited with 2"):
        run_goload(
            goload,
            ["load", "-proto", "smoke"],
            on_window_start=_never,
            on_window_end=_never,
            timeout_s=10,
        )


def _never() -> None:
    raise AssertionError("no measured window was expected")
