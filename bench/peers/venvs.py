"""Virtualenvs for the peers (LiteLLM, Pipecat) under ``build/bench/venvs/``, built by the bench.

Each peer gets its own venv so that its dependency pins never meet ours. A venv is rebuilt only
when its requirement list changes: the list is written to a stamp file after a successful install.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

__all__ = [
    "LITELLM_REQUIREMENTS",
    "PIPECAT_REQUIREMENTS",
    "ensure_peer_venv",
    "installed_versions",
]

# The versions the bench was written and tested against. LiteLLM: 1.106.3 and later pin
# certifi>=2026.10.19, which the package index reachable here does not have yet.
PIPECAT_REQUIREMENTS: list[str] = [
    "pipecat-ai[openai,websocket]==1.14.0",
    "uvicorn[standard]",
    "fastapi",
]
LITELLM_REQUIREMENTS: list[str] = ["litellm[proxy]==1.106.2", "websockets"]

_STAMP = ".bench-requirements"
_PIP_TIMEOUT_S = 900.0
_TAIL_CHARS = 3000


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{what}: timed out after {_PIP_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-_TAIL_CHARS:]
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{tail}")


def ensure_peer_venv(root: Path, name: str, requirements: list[str]) -> Path:
    """build/bench/venvs/<name> with `requirements` pip-installed (idempotent: a stamp of the
    requirements); returns the venv's python path. Raises RuntimeError with pip's tail."""
    venv = root / "build" / "bench" / "venvs" / name
    python = _venv_python(venv)
    stamp = venv / _STAMP
    wanted = "\n".join(requirements) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    if not python.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        _run([sys.executable, "-m", "venv", str(venv)], f"creating the {name} venv")
    stamp.unlink(missing_ok=True)
    print(f"bench: installing {name} into {venv} (once; a few minutes)…", file=sys.stderr)
    _run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *requirements],
        f"pip install for the {name} venv",
    )
    stamp.write_text(wanted)
    return python


def installed_versions(python: Path, distributions: list[str]) -> dict[str, str]:
    """The installed version of each distribution in the venv of `python` ("?" when unknown)."""
    script = (
        "import json, sys\n"
        "from importlib.metadata import version, PackageNotFoundError\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try: out[name] = version(name)\n"
        "    except PackageNotFoundError: out[name] = '?'\n"
        "print(json.dumps(out))\n"
    )
    try:
        done = subprocess.run(
            [str(python), "-c", script, *distributions],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return dict.fromkeys(distributions, "?")
    if done.returncode != 0:
        return dict.fromkeys(distributions, "?")
    parsed = json.loads(done.stdout)
    return {str(key): str(value) for key, value in parsed.items()}
