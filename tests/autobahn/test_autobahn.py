"""Our own WebSocket code held to the Autobahn TestSuite (cases 1-7, 9 and 10), offline.

``kosoku`` drives the Autobahn case files natively: its fuzzing client against our server side
(``gateway.edges.socket.ClientSocket`` behind aiohttp's upgrade, as the gateway accepts a
client), its fuzzing server against our client side (``rfc6455.client``, the
OpenAI upstream's socket). Each peer echoes every message (``autobahn_kit``). A case whose
verdict is FAILED fails the test; NON-STRICT and INFORMATIONAL are acceptable (README.md,
"WebSocket conformance (Autobahn)", says which and why).

Each run is ``python -m tests.autobahn`` in a process of its own (its docstring says why kosoku
stays out of pytest's process), on uvloop (gateway serve's loop) and on asyncio's: about 12 s
per run, 301 cases, case 9's 16 MiB messages included. ``scripts/autobahn`` runs the same cases
against ``websockets`` and aiohttp too and prints the table.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXPECTED_CASES = 301  # what tests.autobahn selects from kosoku 0.1.0's case files
RUN_TIMEOUT_S = 300.0  # one side, on a slow machine: 12 s here


def run_autobahn(target: str, loop: str, out: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.autobahn", "--targets", target, "--loop", loop]
    completed = subprocess.run(
        [*command, "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert out.exists(), f"no verdicts (exit {completed.returncode}):\n{completed.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(out.read_text())[target]
    return result


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize("side", ["server", "client"])
def test_our_side_fails_no_autobahn_case(side: str, loop: str, tmp_path: Path) -> None:
    result = run_autobahn(f"ours {side}", loop, tmp_path / "verdicts.json")
    counts = result["counts"]
    print(f"Autobahn, our {side} on {loop} ({result['seconds']} s): {counts}")
    failed = [case["line"] for case in result["cases"] if case["verdict"] == "FAILED"]
    assert not failed, f"our {side} FAILED {len(failed)} Autobahn cases:\n" + "\n".join(failed)
    assert len(result["cases"]) == EXPECTED_CASES, counts  # every case ran to a verdict
    assert counts["UNIMPLEMENTED"] == 0, counts
