"""Starting the peers in front of the OpenAI fake: the floor relay, LiteLLM's proxy, Pipecat.

Each ``start_*`` returns a ``Peer``: the child process (``PR_SET_PDEATHSIG``, own log file; see
``bench.relay.procs.ChildProcess``), the URL the load generator connects to and the headers it
sends. Every server binds 127.0.0.1 and every wait is bounded. The LiteLLM and Pipecat venvs
are built on first use (``bench.peers.venvs``); the scripts they run live in
``bench/peers/external/`` (outside the main venv's mypy: they import the peers' packages).
"""

from __future__ import annotations

import os
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.peers.venvs import (
    LITELLM_REQUIREMENTS,
    PIPECAT_REQUIREMENTS,
    ensure_peer_venv,
    installed_versions,
)
from bench.relay.procs import ChildProcess, free_port, wait_for_log_line, wait_until_ready

__all__ = [
    "OPENAI_MODEL",
    "Peer",
    "litellm_config",
    "start_floor",
    "start_litellm",
    "start_pipecat",
]

OPENAI_MODEL = "gpt-realtime"
_EXTERNAL = Path(__file__).resolve().parent / "external"
_LITELLM_START_TIMEOUT_S = 120.0  # its first start compiles and imports a lot
_PIPECAT_START_TIMEOUT_S = 60.0


@dataclass
class Peer:
    child: ChildProcess
    url: str  # what the load generator connects to
    headers: list[str] = field(default_factory=list)  # "Name: value"
    versions: dict[str, str] = field(default_factory=dict)


def _stopped_on_failure(child: ChildProcess, wait: float, check: str, how: str) -> None:
    try:
        if how == "log":
            wait_for_log_line(child, check, wait)
        else:
            wait_until_ready(child, check, wait)
    except BaseException:
        child.stop()
        raise


def start_floor(fake_base: str, log_dir: Path) -> Peer:
    """The bare ``websockets`` relay (main venv) in front of ``fake_base`` (``ws://host:port``)."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.peers.floor_relay", str(port), fake_base]
    child = ChildProcess("floor relay", argv, os.environ, log_dir / "floor.log")
    _stopped_on_failure(child, 20.0, "listening ws://", "log")
    return Peer(child, f"ws://127.0.0.1:{port}/v1/realtime?model={OPENAI_MODEL}")


def litellm_config(fake_http_base: str) -> str:
    """LiteLLM's proxy config relaying ``/v1/realtime`` to the fake at ``fake_http_base``.

    LiteLLM rewrites ``api_base`` to ``ws://…/v1/realtime?model=…`` whatever its path, and
    refuses to run without an ``api_key`` here; the master key comes from the environment.
    """
    return (
        "model_list:\n"
        f"  - model_name: {OPENAI_MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{OPENAI_MODEL}\n"
        f"      api_base: {fake_http_base}\n"
        "      api_key: sk-bench\n"
        "litellm_settings:\n"
        "  set_verbose: false\n"
        "  telemetry: false\n"
        "general_settings:\n"
        "  master_key: os.environ/LITELLM_MASTER_KEY\n"
    )


def start_litellm(root: Path, fake_base: str, log_dir: Path) -> Peer:
    """LiteLLM's proxy (its own venv) with a generated config under ``build/bench/litellm``."""
    python = ensure_peer_venv(root, "litellm", LITELLM_REQUIREMENTS)
    config_dir = root / "build" / "bench" / "litellm"
    config_dir.mkdir(parents=True, exist_ok=True)
    config = config_dir / "config.yaml"
    config.write_text(litellm_config(fake_base.replace("ws://", "http://", 1)))
    master_key = "sk-" + secrets.token_hex(32)
    port = free_port()
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no download of the cost map at start
        "LITELLM_MASTER_KEY": master_key,
        "LITELLM_LOG": "ERROR",
        "NUM_WORKERS": "1",
    }
    launcher = str(_EXTERNAL / "litellm_launcher.py")
    argv = [str(python), launcher, "--config", str(config), "--host", "127.0.0.1"]
    child = ChildProcess("litellm", [*argv, "--port", str(port)], env, log_dir / "litellm.log")
    ready = f"http://127.0.0.1:{port}/health/liveliness"
    _stopped_on_failure(child, _LITELLM_START_TIMEOUT_S, ready, "http")
    return Peer(
        child,
        f"ws://127.0.0.1:{port}/v1/realtime?model={OPENAI_MODEL}",
        [f"Authorization: Bearer {master_key}"],
        installed_versions(python, ["litellm", "websockets", "uvicorn"]),
    )


def start_pipecat(root: Path, fake_base: str, log_dir: Path, *, paced: bool) -> Peer:
    """Pipecat's OpenAI Realtime service behind its FastAPI WebSocket transport (its own venv);
    the client protocol is raw PCM16 both ways."""
    python = ensure_peer_venv(root, "pipecat", PIPECAT_REQUIREMENTS)
    port = free_port()
    argv = [str(python), str(_EXTERNAL / "pipecat_server.py"), "--port", str(port)]
    argv += ["--upstream", f"{fake_base}/v1/realtime"]
    name = "pipecat" if paced else "pipecat_nopace"
    if not paced:
        argv.append("--no-pace")
    child = ChildProcess(name, argv, os.environ, log_dir / f"{name}.log")
    ready = f"http://127.0.0.1:{port}/healthz"
    _stopped_on_failure(child, _PIPECAT_START_TIMEOUT_S, ready, "http")
    return Peer(
        child,
        f"ws://127.0.0.1:{port}/ws",
        [],
        installed_versions(python, ["pipecat-ai", "websockets", "uvicorn", "fastapi"]),
    )
