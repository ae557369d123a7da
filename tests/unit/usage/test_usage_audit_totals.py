"""A user's consumption summed from the audit trail's session_usage lines, and the
``gateway usage`` command that prints it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.usage.audit_totals import totals_by_user

REPO = Path(__file__).resolve().parents[3]


def line(user: str, tenant: str | None = None, **usage: object) -> str:
    return json.dumps(
        {
            "event": "session_usage",
            "logger": "audit",
            "level": "info",
            "user_id": user,
            "tenant": tenant,
            "provider": "openai",
            "mode": "voice",
            "reason": "client",
            "usage": usage,
        }
    )


LOG = [
    line(
        "alice",
        responses=2,
        tokens={"input_audio": 40, "output_audio": 100},
        audio_in_s=3.5,
        audio_out_s=6.0,
        tool_calls={"ok": 2},
        estimated_cost=0.01,
        currency="USD",
    ),
    '{"event": "tool_call", "user_id": "alice", "logger": "audit"}',
    "not json at all",
    "{broken",
    line("alice", responses=1, tokens={"input_text": 5}, tool_calls={"ok": 1, "TIMEOUT": 1}),
    line(
        "bob",
        tenant="acme",
        responses=1,
        tokens={"output_text": 7},
        estimated_cost=1.5,
        currency="EUR",
    ),
]


def test_sessions_of_a_user_add_up_and_other_lines_are_skipped() -> None:
    totals = {key: found.as_json() for key, found in totals_by_user(LOG).items()}
    assert set(totals) == {"alice", "acme/bob"}
    alice = totals["alice"]
    assert alice["sessions"] == 2
    assert alice["responses"] == 3
    assert alice["tokens"]["input_audio"] == 40
    assert alice["tokens"]["input_text"] == 5
    assert alice["tokens"]["output_audio"] == 100
    assert alice["audio_in_s"] == 3.5
    assert alice["tool_calls"] == {"TIMEOUT": 1, "ok": 3}
    assert alice["estimated_cost"] == {"USD": 0.01}
    assert totals["acme/bob"]["estimated_cost"] == {"EUR": 1.5}


def test_one_user_only() -> None:
    assert set(totals_by_user(LOG, "bob")) == {"acme/bob"}


@pytest.mark.parametrize("bad", [{"responses": "3"}, {"tokens": [1]}, {"tool_calls": {"ok": -2}}])
def test_damaged_fields_count_zero(bad: dict[str, object]) -> None:
    (found,) = totals_by_user([line("carol", **bad)]).values()
    assert found.sessions == 1
    assert found.responses == 0
    assert found.tokens.input_total == found.tokens.output_total == 0
    assert sum(found.tool_calls.values()) == 0


def test_the_command_sums_several_logs(tmp_path: Path) -> None:
    first, second = tmp_path / "node-a.log", tmp_path / "node-b.log"
    first.write_text("\n".join(LOG[:3]) + "\n")
    second.write_text("\n".join(LOG[3:]) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "usage", str(first), str(second), "--user", "alice"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    printed = json.loads(done.stdout)
    assert list(printed) == ["alice"]
    assert printed["alice"]["sessions"] == 2
    assert printed["alice"]["responses"] == 3
