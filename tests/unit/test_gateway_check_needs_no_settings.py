"""``python -m gateway check`` only reads the tool registry: it runs on a fresh checkout with no
setting at all (no ``GATEWAY_AUTH_SECRET``), as the README's first steps run it, and a setting
that would stop ``gateway serve`` does not stop it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACT = REPO / "build" / "tool_registry.json"  # the default GATEWAY_REGISTRY


def check(environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=environ,
        timeout=60,
        check=False,
    )


def bare_environment(home: Path) -> dict[str, str]:
    """What a login shell gives any command: a PATH and a HOME, nothing of the gateway's."""
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home)}


def test_check_lists_the_tools_with_an_empty_environment(tmp_path: Path) -> None:
    assert ARTIFACT.is_file(), "scripts/test builds the registry first (scripts/_setup.sh)"
    done = check(bare_environment(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "GATEWAY_AUTH_SECRET" not in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("registry ")
    listed = {line.split()[0] for line in lines[1:]}
    assert {"get_current_time", "kb_search", "care_api_get_appointments"} <= listed
    # No CARE_API_URL either: the HTTP tools are listed as unavailable, with the reason.
    assert any(
        line.split()[0] == "care_api_get_appointments"
        and line.endswith("unavailable: CARE_API_URL is not set")
        for line in lines
    )


@pytest.mark.parametrize(
    "setting",
    [
        {"GATEWAY_AUTH": "jwt", "GATEWAY_AUTH_SECRET": "too-short"},
        {"GATEWAY_AUTH": "none", "GATEWAY_HOST": "0.0.0.0"},
        {"GATEWAY_WORKERS": "4"},
        {"GATEWAY_PORT": "not-a-port"},
    ],
)
def test_a_setting_only_serve_needs_does_not_stop_check(
    tmp_path: Path, setting: dict[str, str]
) -> None:
    done = check({**bare_environment(tmp_path), **setting})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("registry ")


def test_check_still_reads_gateway_registry(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    done = check({**bare_environment(tmp_path), "GATEWAY_REGISTRY": str(missing)})
    assert done.returncode == 2
    assert f"no tool registry at {missing}" in done.stderr
