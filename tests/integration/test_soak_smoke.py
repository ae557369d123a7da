"""The soak (``scripts/soak``), shortened to a minute: the whole fleet (two gateway nodes on a real
Redis, the upstream fakes, the load driver) with 30 sessions of every kind, a fault every
second and a half after a calm start, one node restarted and Redis restarted. Every invariant
of the soak must hold; the report's violations are the failure message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from process_kit import REPO

from soak.redis_server import redis_path

pytestmark = pytest.mark.skipif(
    redis_path() is None,
    reason="SOAK SMOKE SKIPPED: no redis-server on PATH (apt-get install redis-server, as "
    ".ci/run does)",
)

RUN_FOR_S = 400  # a minute of load, its start and its wind-down; a hang must still end


def test_a_minute_of_soak_keeps_every_invariant(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "soak", "--minutes", "1", "--sessions", "30"]
    command += ["--fault-rate", "40", "--restart-every-s", "25", "--sample-every-s", "2"]
    command += ["--plots", "none", "--out", str(tmp_path), "--seed", "7"]
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=RUN_FOR_S, check=False
    )
    report_file = tmp_path / "report.json"
    assert report_file.exists(), f"no report (exit {done.returncode}):\n{done.stderr[-3000:]}"
    report = json.loads(report_file.read_text())
    violations = [f"{v['invariant']}: {v['detail']}" for v in report["violations"]]
    tracebacks = [t for log in report["logs"] for t in log["traceback_examples"]]
    assert violations == [], "\n".join(violations + tracebacks)
    assert done.returncode == 0, done.stderr[-3000:]
    # It did what a soak does: every kind of session, faults of many kinds, both fleet faults.
    assert set(report["sessions"]["by_kind"]) == {
        "voice_openai",
        "text_local",
        "text_openai",
        "text_gemini",
        "text_chat",
        "phone",
    }
    kinds = {fault["kind"] for fault in report["faults"]}
    assert {"sigterm_restart", "redis_restart"} <= kinds
    assert len(kinds) >= 8, kinds
    assert report["tools"]["executions"] > 50
