"""Processes for ``scripts/bench setup``: the OpenAI Realtime fake with its connect delay, and
gateways with auth on (a JWT secret, a Twilio auth token) differing only in their pool size.

The children are ``bench.relay.procs.ChildProcess``: their output in a log file, their own
session, killed with the bench; every wait is bounded."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from bench.relay.procs import (
    ChildProcess,
    free_port,
    gateway_env_openai,
    wait_for_log_line,
    wait_until_ready,
)

__all__ = ["gateway_env", "start_delayed_fake", "start_gateway_with_auth"]

GREETING = "/say Hello caller"  # the fake's LocalBrain says this at once: a short greeting


def start_delayed_fake(
    log_dir: Path, created_delay_ms: float, timeout_s: float = 20.0
) -> tuple[ChildProcess, str]:
    """``python -m fakes.openai_realtime --created-delay-ms D``: it accepts the WebSocket at
    once and sends ``session.created`` ``D`` ms later (the fake has no way to delay the TCP or
    WebSocket accept itself). Returns it and its base URL (``ws://…/v1``)."""
    port = free_port()
    argv = [sys.executable, "-m", "fakes.openai_realtime", "--port", str(port)]
    argv += ["--created-delay-ms", f"{created_delay_ms:g}", "--no-log"]
    child = ChildProcess("fake upstream", argv, os.environ, log_dir / "fake.log")
    try:
        line = wait_for_log_line(child, "listening ws://", timeout_s)
    except BaseException:
        child.stop()
        raise
    return child, line.split("listening ", 1)[1].strip()


def gateway_env(
    upstream_url: str, pool_size: int, auth_secret: str, twilio_token: str
) -> dict[str, str]:
    """The gateway's settings for the bench: the OpenAI fake (no ``GATEWAY_MODELS``: the pool
    keeps connections for the default provider), ``pool_size`` warm connections (0: off), auth
    on as in production (a user JWT opens ``/v1/session``, the voice webhook is signed and hands
    out a stream token), and a greeting the model speaks first."""
    return {
        **gateway_env_openai(upstream_url),
        "GATEWAY_POOL_SIZE": str(pool_size),
        "GATEWAY_AUTH": "jwt",
        "GATEWAY_AUTH_SECRET": auth_secret,
        "TWILIO_AUTH_TOKEN": twilio_token,
        "GATEWAY_TWILIO_GREETING": GREETING,
        # no page connects (the clients send no Origin): listed only to keep the log quiet
        "GATEWAY_ALLOWED_ORIGINS": "http://localhost",
    }


def start_gateway_with_auth(
    settings: Mapping[str, str],
    data_dir: Path,
    log_dir: Path,
    name: str,
    timeout_s: float = 30.0,
) -> tuple[ChildProcess, str]:
    """``python -m gateway serve`` with ``settings`` (``gateway_env``) on a free loopback port;
    returns it and its base URL. Unlike ``bench.relay.procs.start_gateway`` it keeps auth on."""
    port = free_port()
    env = {
        **os.environ,
        **settings,
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(port),
        "GATEWAY_LOG_LEVEL": "warning",
        # lifted: the bench opens hundreds of sessions from one address
        "GATEWAY_CONNECTIONS_PER_MINUTE": "100000",
        "GATEWAY_MAX_SESSIONS": "100000",
        "GATEWAY_DATA_DIR": str(data_dir),
    }
    child = ChildProcess(
        name, [sys.executable, "-m", "gateway", "serve"], env, log_dir / f"{name}.log"
    )
    try:
        wait_until_ready(child, f"http://127.0.0.1:{port}/readyz", timeout_s)
    except BaseException:
        child.stop()
        raise
    return child, f"http://127.0.0.1:{port}"
