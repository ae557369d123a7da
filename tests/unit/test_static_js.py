"""The browser client's pure modules (resampler, framer, reconnect policy) under Node's test
runner; skipped, saying so, when Node is not installed (the browser test covers them too)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="JS unit tests skipped: no node on PATH")
def test_page_pure_modules_under_node() -> None:
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--test", "tests/js/"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout, done.stdout
    assert "# pass 9" in done.stdout, done.stdout  # every test ran
