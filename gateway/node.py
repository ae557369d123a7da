"""This process as a node of the cluster: its id, its heartbeat, its inbox on the bus, and what
it knows of the shared store's health.

- The heartbeat is written every third of the lease (``GATEWAY_LEASE_TTL_S``); a node whose
  heartbeat expired is dead, and its sessions can be taken over. When the loop wakes up later
  than a whole lease (the process was paused, or starved), sessions may have been taken over
  meanwhile: each is checked before it acts again (``on_paused``; its writes are fenced anyway).
- Messages from other nodes (``release``, ``moved``, ``released``, ``ledger``) go to
  ``on_message``.
- While the store cannot be reached, ``available`` is False (``/readyz`` says degraded), the
  store counts the failures, and the heartbeat retries every third of a lease (at most every
  2 s) until it answers again; then
  ``on_store_back`` records this node's sessions again (a Redis without persistence restarts
  empty).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from gateway.observability import Metrics
from gateway.store import SessionStore, StoreUnavailable

__all__ = ["NodeRuntime", "new_node_id"]

_log = structlog.get_logger("node")

BACKOFF_MAX_S = 2.0


def new_node_id(name: str | None = None) -> str:
    """This process's id in the cluster: ``GATEWAY_NODE_ID`` (else host and pid) and a random
    suffix. Every process start is a new node, so a process that restarts under the same
    name does not pass for its predecessor: the sessions of the one that died are recovered
    (lost turn, failed calls) instead of looking owned by a live node."""
    base = name or f"{socket.gethostname().split('.')[0][:40] or 'node'}-{os.getpid()}"
    return f"{base}.{secrets.token_hex(3)}"


class NodeRuntime:
    def __init__(
        self,
        node_id: str,
        store: SessionStore,
        *,
        lease_ttl_s: float,
        metrics: Metrics,
        on_message: Callable[[Mapping[str, Any]], None],
        on_paused: Callable[[], Any],
        on_store_back: Callable[[], Any] = lambda: None,
    ) -> None:
        self.node_id = node_id
        self.store = store
        self.lease_ttl_s = lease_ttl_s
        self._metrics = metrics
        self._on_message = on_message
        self._on_paused = on_paused
        self._on_store_back = on_store_back
        self.available = True
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """The first heartbeat (raises ``StoreUnavailable``: a node that cannot reach its
        store does not start), then the loops."""
        await self.store.heartbeat(self.node_id, self.lease_ttl_s)
        self._tasks = [
            asyncio.create_task(self._heartbeats()),
            asyncio.create_task(self._inbox()),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def _set_available(self, up: bool, reason: str = "") -> None:
        if up != self.available:
            if up:
                _log.warning("store_up", node=self.node_id)
            else:
                _log.warning("store_down", node=self.node_id, reason=reason)
        self.available = up
        self._metrics.store_up.set(1 if up else 0)

    async def _heartbeats(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.lease_ttl_s / 3
        last_ok = loop.time()
        delay = interval
        while True:
            await asyncio.sleep(delay)
            try:
                await self.store.heartbeat(self.node_id, self.lease_ttl_s)
            except StoreUnavailable as exc:
                self._set_available(False, str(exc))
                delay = min(max(delay * 2, 0.1), BACKOFF_MAX_S, interval)
                continue
            now = loop.time()
            if now - last_ok > self.lease_ttl_s:
                _log.warning("node_lease_gap", node=self.node_id, gap_s=round(now - last_ok, 2))
                result = self._on_paused()
                if asyncio.iscoroutine(result):
                    await result
            last_ok = now
            delay = interval
            if not self.available:
                self._set_available(True)
                # It may have restarted empty (no persistence): our sessions are recorded again.
                result = self._on_store_back()
                if asyncio.iscoroutine(result):
                    await result

    async def _inbox(self) -> None:
        delay = 0.1
        while True:
            try:
                async for message in self.store.messages(self.node_id):
                    delay = 0.1
                    try:
                        self._on_message(message)
                    except Exception:
                        _log.exception("bus_message_failed", kind=message.get("type"))
                return  # the store closed
            except StoreUnavailable:
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
