"""The processes of one suite run: the OpenAI fake, the gateway and the peers, placed on cores.

``Fleet.start`` starts what the chosen targets need (one gateway serves the gateway rows: three on
``/v1/session`` at different ``session.start`` rates, ``gateway_compat`` on ``/v1/realtime``), each
stopped by the caller's ``ExitStack``. Before each run ``place`` pins the relaying process (with
its descendants) alone to the relay core and every other process, the load generator included, to
the load core; for ``direct`` the fake itself is the relaying process. With ``pin=False`` nothing
is pinned: every process, the load generator included, shares every core (``scripts/bench scale``'s
workers comparison). The rows on Redis (``gateway_redis``, ``gateway_w2``) share one
``redis-server`` the fleet starts, each on a key prefix of its own. The client hop's compression is
probed once per target (``probe``): what the server agreed to when offered what the load generator
will offer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from bench.peers.launch import OPENAI_MODEL, Peer, start_floor, start_litellm, start_pipecat
from bench.relay.procs import (
    ChildProcess,
    CorePlan,
    gateway_env_openai,
    plan_cores,
    start_fake_upstream,
    start_gateway,
    start_redis,
)
from bench.suite.procs import pin_tree, process_tree
from bench.suite.targets import REDIS_TARGETS, SPECS, TargetSpec

__all__ = ["Endpoint", "Fleet"]


@dataclass(frozen=True)
class Endpoint:
    spec: TargetSpec
    url: str
    headers: list[str]
    pid: int  # the relaying process


@dataclass
class Fleet:
    root: Path
    log_dir: Path
    cores: CorePlan | None = None
    pin_note: str = ""
    children: dict[str, ChildProcess] = field(default_factory=dict)  # process key → child
    endpoints: dict[str, Endpoint] = field(default_factory=dict)  # target → endpoint
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    client_compression: dict[str, str] = field(default_factory=dict)  # target → agreed
    # A relaying process's RSS (KiB, its process tree) the first time it was measured, before
    # any session of the suite: what the sessions of a later run are counted from (a process
    # keeps memory it once used, so its RSS before a run says nothing of that run's sessions).
    idle_rss_kb: dict[int, int] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        root: Path,
        log_dir: Path,
        targets: list[str],
        stack: contextlib.ExitStack,
        *,
        baseline: Path | None = None,
        pin: bool = True,
    ) -> Fleet:
        fleet = cls(root, log_dir)
        if pin:
            fleet.cores, fleet.pin_note = plan_cores()
        else:
            fleet.pin_note = "not pinned: every process shares every core"
        # pin_all confines this process to the load core; what runs after the fleet (the
        # dispatch phase of `all`, in a child process that inherits it) needs every core again.
        stack.callback(os.sched_setaffinity, 0, os.sched_getaffinity(0))
        fake, fake_url = start_fake_upstream(log_dir)
        stack.callback(fake.stop)
        fleet.children["fake"] = fake
        fake_base = fake_url.removesuffix("/v1")  # ws://127.0.0.1:PORT
        needed = {SPECS[target].process for target in targets}
        peers: dict[str, Peer] = {}
        starters: dict[str, Callable[[], Peer]] = {
            "floor": lambda: start_floor(fake_base, log_dir),
            "litellm": lambda: start_litellm(root, fake_base, log_dir),
            "pipecat": lambda: start_pipecat(root, fake_base, log_dir, paced=True),
            "pipecat_nopace": lambda: start_pipecat(root, fake_base, log_dir, paced=False),
        }
        for key, starter in starters.items():
            if key in needed:
                print(f"starting {key}…", file=sys.stderr, flush=True)
                peer = starter()
                stack.callback(peer.child.stop)
                peers[key] = peer
                fleet.children[key] = peer.child
                if peer.versions:
                    fleet.versions[key] = peer.versions
        redis_url = None
        if needed & set(REDIS_TARGETS):
            redis, redis_url = start_redis(log_dir)
            stack.callback(redis.stop)
            fleet.children["redis"] = redis
        gateway_urls: dict[str, str] = {}
        for key in ("gateway", "gateway_base", "gateway_traced", "gateway_alias", *REDIS_TARGETS):
            if key not in needed:
                continue
            source = baseline if key == "gateway_base" else None
            if key == "gateway_base" and source is None:
                raise ValueError(
                    "the gateway_base rows (gateway_base, gateway_base_16k) need --baseline REV"
                )
            env = gateway_env_openai(fake_url)
            if source is not None:
                env["GATEWAY_REGISTRY"] = str(source / "build" / "tool_registry.json")
            if key == "gateway_traced":
                env["OTEL_TRACES_EXPORTER"] = "console"
            if key == "gateway_alias":  # the default alias: OpenAI (the fake), then Gemini
                env["GATEWAY_MODELS"] = str(_alias_file(log_dir))
            if key in REDIS_TARGETS:
                assert redis_url is not None
                env |= {"GATEWAY_REDIS_URL": redis_url, "GATEWAY_REDIS_PREFIX": f"bench-{key}"}
                env["GATEWAY_WORKERS"] = str(REDIS_TARGETS[key])
            (log_dir / f"{key}-data").mkdir(exist_ok=True)
            gateway, http_url = start_gateway(
                env, log_dir / f"{key}-data", log_dir, name=key, source=source
            )
            stack.callback(gateway.stop)
            fleet.children[key] = gateway
            if REDIS_TARGETS.get(key, 1) > 1:
                assert redis_url is not None
                _wait_for_nodes(redis_url, f"bench-{key}", REDIS_TARGETS[key], gateway)
            gateway_urls[key] = http_url.replace("http://", "ws://", 1)
        for target in targets:
            spec = SPECS[target]
            if spec.process == "fake":
                url = f"{fake_url}/realtime?model={OPENAI_MODEL}"
                endpoint = Endpoint(spec, url, ["Authorization: Bearer sk-bench"], fake.pid)
            elif spec.process in gateway_urls:  # no token: the bench runs it with auth off
                pid = fleet.children[spec.process].pid
                endpoint = Endpoint(spec, gateway_urls[spec.process] + spec.path, [], pid)
            else:
                peer = peers[spec.process]
                endpoint = Endpoint(spec, peer.url, peer.headers, peer.child.pid)
            fleet.endpoints[target] = endpoint
            fleet.client_compression[target] = asyncio.run(_probe(endpoint))
        fleet.pin_all()
        return fleet

    def pin_all(self) -> None:
        """Everything on the load core; ``place`` then moves one relaying process."""
        if self.cores is None:
            return
        try:
            os.sched_setaffinity(0, {self.cores.load_core})
            for child in self.children.values():
                pin_tree(child.pid, self.cores.load_core)
        except OSError as error:
            self.cores, self.pin_note = None, f"pinning refused: {error}"

    def place(self, target: str) -> None:
        """The target's relaying process alone on the relay core, the rest on the load core."""
        if self.cores is None:
            return
        relay = self.endpoints[target].pid
        for child in self.children.values():
            core = self.cores.relay_core if child.pid == relay else self.cores.load_core
            pin_tree(child.pid, core)

    def check(self) -> None:
        for child in self.children.values():
            child.ensure_alive()

    def other_pids(self, relay_pid: int) -> list[int]:
        """Every process of the fleet but the relaying one, with their descendants."""
        return [
            member
            for child in self.children.values()
            if child.pid != relay_pid
            for member in process_tree(child.pid)
        ]

    def describe(self) -> dict[str, Any]:
        return {
            "pinned": self.cores is not None,
            "pin_note": self.pin_note,
            "relay_core": self.cores.relay_core if self.cores else None,
            "load_core": self.cores.load_core if self.cores else None,
            "placement": "the relaying process (with its descendants) alone on the relay core; "
            "the load generator, the fake (when it is not the relaying process), the idle "
            "targets and this harness on the load core",
            "peer_versions": self.versions,
            "client_hop_compression_agreed": self.client_compression,
        }


def _alias_file(log_dir: Path) -> Path:
    path = log_dir / "models.json"
    targets = [{"provider": "openai"}, {"provider": "gemini"}]
    path.write_text(json.dumps({"models": {"assistant": {"targets": targets}}}))
    return path


def _wait_for_nodes(url: str, prefix: str, count: int, supervisor: ChildProcess) -> None:
    """Every worker of a ``--workers N`` gateway is up: N live nodes under its prefix."""
    import time

    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            supervisor.ensure_alive()
            nodes = [str(n) for n in client.hkeys(f"{prefix}:nodes")]
            if sum(bool(client.exists(f"{prefix}:node:{n}")) for n in nodes) >= count:
                return
            time.sleep(0.1)
        raise TimeoutError(f"{supervisor.name}: {count} workers were not up in 30 s")
    finally:
        client.close()


async def _probe(endpoint: Endpoint) -> str:
    """Connect once offering what the load generator offers; the extensions the server agreed."""
    headers = [tuple(h.split(": ", 1)) for h in endpoint.headers]
    try:
        async with (
            asyncio.timeout(10),
            connect(
                endpoint.url,
                additional_headers=[(name, value) for name, value in headers],
                compression="deflate" if endpoint.spec.deflate else None,
                open_timeout=10,
                close_timeout=2,
            ) as ws,
        ):
            assert ws.response is not None
            agreed = ws.response.headers.get("Sec-WebSocket-Extensions")
    except (OSError, TimeoutError, ValueError) as error:
        return f"probe failed: {error}"
    except Exception as error:  # a refused handshake: still a run, the probe only informs
        return f"probe failed: {type(error).__name__}: {error}"
    return agreed or "none"
