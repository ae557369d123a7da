"""The processes of one phase of ``scripts/bench latency``: one fake, one gateway in front of it.

Unlike the relay benches (``bench.relay.procs``), the fakes run in their normal mode, not echo:
their server VAD hears the user out and their model answers, which is the turn being measured.
Both fakes run with their defaults (``--pace 0``: the reply's audio is sent as fast as it is
made; no artificial first-audio delay) and ``--no-log``. The gateway is
``bench.relay.procs.start_gateway`` (auth off, limits lifted) with this upstream as its provider,
so its phone calls go there too, and with no greeting on a call (``GATEWAY_TWILIO_GREETING``
empty): the caller speaks first, as in every other lane.

Placement: the gateway alone on one core; the fake and this process (every client lane) on the
other, when two cores may be used (``plan_cores``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.relay.procs import (
    ChildProcess,
    free_port,
    gateway_env_gemini,
    gateway_env_openai,
    plan_cores,
    start_gateway,
    wait_for_log_line,
)
from bench.relay.targets import GEMINI_MODEL
from bench.suite.procs import pin_tree

__all__ = ["Phase", "start_phase"]

_FAKE_START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Phase:
    upstream: str
    fake: ChildProcess
    fake_url: str  # OpenAI: ws://…/v1; Gemini: https://…
    ca_file: Path | None  # the Gemini fake's certificate
    gateway: ChildProcess
    gateway_url: str  # http://…
    placement: dict[str, Any]

    def check(self) -> None:
        self.fake.ensure_alive()
        self.gateway.ensure_alive()


def _start_fake(upstream: str, log_dir: Path) -> tuple[ChildProcess, str, Path | None]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        f"fakes.{'openai_realtime' if upstream == 'openai' else 'gemini_live'}",
    ]
    argv += ["--port", str(port), "--no-log"]
    ca_file = None
    if upstream == "gemini":
        cert_dir = log_dir / "gemini-certs"
        argv += ["--cert-dir", str(cert_dir)]
        ca_file = cert_dir / "cert.pem"
    child = ChildProcess(f"{upstream} fake", argv, os.environ, log_dir / f"{upstream}-fake.log")
    try:
        line = wait_for_log_line(child, "listening ", _FAKE_START_TIMEOUT_S)
        if ca_file is not None and not ca_file.is_file():
            raise RuntimeError(f"the gemini fake wrote no {ca_file}")
    except BaseException:
        child.stop()
        raise
    return child, line.split("listening ", 1)[1].strip(), ca_file


def _place(gateway: ChildProcess, fake: ChildProcess) -> dict[str, Any]:
    cores, note = plan_cores()
    if cores is None:
        return {"pinned": False, "note": note}
    try:
        os.sched_setaffinity(0, {cores.load_core})
        pin_tree(fake.pid, cores.load_core)
        pin_tree(gateway.pid, cores.relay_core)
    except OSError as error:
        return {"pinned": False, "note": f"pinning refused: {error}"}
    return {
        "pinned": True,
        "gateway_core": cores.relay_core,
        "fake_and_clients_core": cores.load_core,
    }


def start_phase(upstream: str, log_dir: Path, stack: contextlib.ExitStack) -> Phase:
    """The fake of ``upstream`` and a gateway in front of it, placed; ``stack`` stops both."""
    fake, fake_url, ca_file = _start_fake(upstream, log_dir)
    stack.callback(fake.stop)
    if upstream == "openai":
        env = gateway_env_openai(fake_url)
    else:
        assert ca_file is not None
        env = gateway_env_gemini(fake_url, ca_file, GEMINI_MODEL)
    env["GATEWAY_TWILIO_GREETING"] = ""
    data_dir = log_dir / f"{upstream}-gateway-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    gateway, gateway_url = start_gateway(env, data_dir, log_dir, name=f"{upstream}-gateway")
    stack.callback(gateway.stop)
    # this process's own affinity comes back for what runs after the bench
    stack.callback(os.sched_setaffinity, 0, os.sched_getaffinity(0))
    placement = _place(gateway, fake)
    return Phase(upstream, fake, fake_url, ca_file, gateway, gateway_url, placement)
