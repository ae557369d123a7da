"""What the failover bench runs on: the two fake upstreams in this process, the gateway in a
process of its own in front of them, and the clock they share.

- **The fakes** (OpenAI Realtime, then Gemini Live with its TLS certificate) run on this
  process's event loop, next to the client: the bench switches their faults (``server.faults``)
  and drops their connections at exact moments, and stamps what they send (``FakeClock``: a tap
  on every frame, the faults' ``on_applied``) with the same ``time.perf_counter()`` the client
  stamps what it receives with. No clock crosses a process.
- **The gateway** is ``python -m gateway serve`` (``bench.relay.procs.start_gateway``: auth off,
  limits lifted), so its timers and its event loop are not disturbed by the bench's own work
  (the client's reader, the microphone's pacing, the fakes): the latencies measured are the
  gateway's. It is pinned alone to one core, this process (fakes and client) to the other, when
  two may be used. Its alias file (``GATEWAY_MODELS``) has ``assistant`` (OpenAI Realtime
  ``gpt-realtime``, voice ``marin`` → Gemini Live, voice ``Puck``) and ``fallback`` (the
  Gemini target alone: the reference of a start that needs no failover). Its registry is the
  built-in tools plus the journaling fixture (``tests/fixtures/cluster_tools``: ``journal``
  appends one line per execution to ``$JOURNAL_PATH``).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.relay.procs import (
    ChildProcess,
    gateway_env_gemini,
    gateway_env_openai,
    plan_cores,
    start_gateway,
)
from bench.relay.targets import GEMINI_MODEL
from bench.suite.procs import pin_tree
from fakes.faults import FaultKind
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

__all__ = [
    "ALIAS",
    "FALLBACK_ALIAS",
    "FakeClock",
    "GatewaySettings",
    "Stage",
    "build_journal_registry",
    "start_fakes",
    "start_stage_gateway",
]

ROOT = Path(__file__).resolve().parents[2]
ALIAS = "assistant"
FALLBACK_ALIAS = "fallback"
OPENAI_TARGET = {"provider": "openai", "model": "gpt-realtime", "voice": "marin"}
GEMINI_TARGET = {"provider": "gemini", "model": GEMINI_MODEL, "voice": "Puck"}
JOURNAL_TOOLS = ROOT / "tests" / "fixtures" / "cluster_tools"


@dataclass(frozen=True)
class GatewaySettings:
    """What the gateway is run with, beyond ``start_gateway``'s defaults (all reported)."""

    first_output_voice_s: float = 1.0
    output_gap_s: float = 1.0
    # The transport's own reconnects before a lost upstream counts as failed (the gateway's
    # defaults are 5 attempts from 0.25 s, doubling: 2.8 to 3.75 s of waiting).
    reconnect_attempts: int = 2
    reconnect_backoff_s: float = 0.25
    # The breaker would open after 3 failures in 30 s and send every later session straight to
    # Gemini: no failover left to measure. Each fault here is measured on its own.
    breaker_failures: int = 1_000_000

    def env(self) -> dict[str, str]:
        return {
            "GATEWAY_FIRST_OUTPUT_VOICE_S": str(self.first_output_voice_s),
            "GATEWAY_OUTPUT_GAP_S": str(self.output_gap_s),
            "GATEWAY_UPSTREAM_RECONNECT_ATTEMPTS": str(self.reconnect_attempts),
            "GATEWAY_UPSTREAM_RECONNECT_BACKOFF_S": str(self.reconnect_backoff_s),
            "GATEWAY_BREAKER_FAILURES": str(self.breaker_failures),
        }


@dataclass
class FakeClock:
    """When the fakes did what the bench waits on, in ``perf_counter`` seconds: each frame the
    OpenAI fake sent, by type (the latest of each, since ``reset``), and each fault applied."""

    sent: dict[str, list[float]] = field(default_factory=dict)
    applied: dict[str, list[float]] = field(default_factory=dict)
    # Called with each frame the OpenAI fake sends (connection, event): a repetition's trigger.
    hook: Any = None

    def reset(self) -> None:
        self.sent.clear()
        self.applied.clear()
        self.hook = None

    def tap(self, connection: Any, direction: str, message: Mapping[str, Any]) -> None:
        if direction != "out":
            return
        kind = message.get("type")
        if isinstance(kind, str):
            self.sent.setdefault(kind, []).append(time.perf_counter())
        if self.hook is not None:
            self.hook(connection, message)

    def on_applied(self, kind: FaultKind) -> None:
        self.applied.setdefault(kind, []).append(time.perf_counter())

    def first(self, kind: str, table: str = "sent") -> float | None:
        times = (self.sent if table == "sent" else self.applied).get(kind)
        return times[0] if times else None


@dataclass
class Stage:
    openai: FakeRealtimeServer
    gemini: FakeGeminiServer
    clock: FakeClock
    gateway: ChildProcess | None = None
    gateway_url: str = ""
    journal: Path = Path()
    placement: dict[str, Any] = field(default_factory=dict)

    @property
    def session_url(self) -> str:
        return self.gateway_url.replace("http://", "ws://", 1) + "/v1/session"

    def journal_lines(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        lines = self.journal.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]


async def start_fakes(work: Path, openai_pace: float) -> Stage:
    """Both fakes, started, their frames stamped; no frame log (the tap sees every frame)."""
    clock = FakeClock()
    openai = FakeRealtimeServer(FakeOptions(log_frames=False, pace=openai_pace))
    gemini = FakeGeminiServer(FakeGeminiOptions(log_frames=False), cert_dir=work / "gemini-certs")
    openai.tap = clock.tap
    openai.faults.on_applied = clock.on_applied
    await openai.start()
    await gemini.start()
    return Stage(openai, gemini, clock)


def build_journal_registry(out: Path) -> Path:
    """The built-in tools and the journaling fixtures, as the gateway loads them."""
    from registry_build import build_registry
    from registry_build.build import serialize_artifact

    result = build_registry([JOURNAL_TOOLS])
    if result.artifact is None:
        raise RuntimeError(f"the registry did not build: {[str(e) for e in result.errors]}")
    out.write_bytes(serialize_artifact(result.artifact))
    return out


def models_file(out: Path) -> Path:
    aliases = {
        ALIAS: {"targets": [OPENAI_TARGET, GEMINI_TARGET]},
        FALLBACK_ALIAS: {"targets": [GEMINI_TARGET]},
    }
    out.write_text(json.dumps({"default": ALIAS, "models": aliases}, indent=1))
    return out


def start_stage_gateway(
    stage: Stage, settings: GatewaySettings, work: Path, stack: contextlib.ExitStack
) -> None:
    """The gateway in front of ``stage``'s fakes, ready, placed; ``stack`` stops it."""
    stage.journal = work / "journal.jsonl"
    env = {
        **gateway_env_openai(stage.openai.ws_url),
        **gateway_env_gemini(stage.gemini.base_url, stage.gemini.ca_file, GEMINI_MODEL),
        **settings.env(),
        "GATEWAY_PROVIDER": "openai",
        "GATEWAY_MODELS": str(models_file(work / "models.json")),
        "GATEWAY_REGISTRY": str(build_journal_registry(work / "registry.json")),
        "JOURNAL_PATH": str(stage.journal),
    }
    data = work / "gateway-data"
    data.mkdir(parents=True, exist_ok=True)
    child, url = start_gateway(env, data, work, name="failover-gateway")
    stack.callback(child.stop)
    stage.gateway, stage.gateway_url = child, url
    stack.callback(os.sched_setaffinity, 0, os.sched_getaffinity(0))
    stage.placement = _place(child)


def _place(gateway: ChildProcess) -> dict[str, Any]:
    cores, note = plan_cores()
    if cores is None:
        return {"pinned": False, "note": note}
    try:
        os.sched_setaffinity(0, {cores.load_core})
        pin_tree(gateway.pid, cores.relay_core)
    except OSError as error:
        return {"pinned": False, "note": f"pinning refused: {error}"}
    return {"pinned": True, "gateway_core": cores.relay_core, "bench_core": cores.load_core}
