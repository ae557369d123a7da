"""An operator's consoles, as the bench opens them beside the relay load: ``consoles``.

What a console page does against the gateway, without the browser: it reads
``GET /admin/v1/console/stream`` (server-sent events, an admin JWT as the bearer) from every
node of the cluster, each event parsed as the page parses it (the directory of every node's
sessions), and polls ``GET /admin/v1/console/sessions/{id}/timeline`` once a second, on the
measured node, for one live session of that node (taken from the directory, kept while it lives).

Every event's arrival is kept (this process's monotonic clock, ``bench.relay.load``'s snapshots
use the same), so a run's record says what the consoles received during its measured window:
the events per node, the longest gap between two of them (the window's edges included), the
sessions the measured node listed, and the timeline polls answered. ``live``: every node's
stream gave an event at least every ``LIVE_GAP_S`` through the window, and some poll was
answered with a timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from bench.relay.ab import Report

__all__ = ["FIRST_EVENT_S", "LIVE_GAP_S", "SseParser", "Watch", "consoles", "longest_gap"]

FIRST_EVENT_S = 10.0  # each stream's first event, before the load starts
LIVE_GAP_S = 1.5  # the nodes publish once a second: a longer gap is a stream that stalled
POLL_EVERY_S = 1.0
SETTLE_S = 1.2  # after closing: each node notices at its next publication that its reader left
_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5.0)


class SseParser:
    """Server-sent events out of a byte stream: ``(event, data)`` per event; comments skipped."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        self._buffer += chunk.replace(b"\r\n", b"\n")
        found: list[tuple[str, bytes]] = []
        while b"\n\n" in self._buffer:
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            event, data = "message", []
            for line in block.split(b"\n"):
                if line.startswith(b":") or not line:
                    continue
                name, _, value = line.partition(b":")
                value = value.removeprefix(b" ")
                if name == b"event":
                    event = value.decode()
                elif name == b"data":
                    data.append(value)
            if data:
                found.append((event, b"\n".join(data)))
        return found


def longest_gap(times: Sequence[float], start: float, end: float) -> float:
    """The longest stretch of ``[start, end]`` without one of ``times`` (sorted)."""
    inside = [t for t in times if start <= t <= end]
    edges = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(edges))


@dataclass
class Watch:
    """What the consoles received, as it came."""

    nodes: Mapping[str, str]  # node id → base URL
    measured: str  # the node (its GATEWAY_NODE_ID) whose sessions are polled
    events: dict[str, list[float]] = field(default_factory=dict)  # node → arrival times
    listed: list[tuple[float, int]] = field(default_factory=list)  # the measured node's sessions
    polls: list[tuple[float, int, int]] = field(default_factory=list)  # (when, status, entries)
    polls_without_session: int = 0
    errors: list[str] = field(default_factory=list)
    live_session: str | None = None
    _directory: dict[str, Any] | None = None

    def is_measured(self, node_id: object) -> bool:
        """A node's id is its ``GATEWAY_NODE_ID``, a dot and a random suffix."""
        return isinstance(node_id, str) and node_id.split(".", 1)[0] == self.measured

    def heard(self, node: str, directory: dict[str, Any]) -> None:
        now = time.monotonic()
        self.events.setdefault(node, []).append(now)
        if node != self.measured:
            return
        self._directory = directory
        here = [s for s in directory.get("sessions", ()) if self.is_measured(s.get("node"))]
        self.listed.append((now, len(here)))
        live = {s["session_id"] for s in here if s.get("state") == "live"}
        if self.live_session not in live:
            self.live_session = min(live) if live else None

    def report(self, start: float, end: float) -> dict[str, Any]:
        seconds = end - start
        per_node = {}
        for node in self.nodes:
            times = self.events.get(node, [])
            count = sum(start <= t <= end for t in times)
            per_node[node] = {
                "events": count,
                "per_s": round(count / seconds, 3),
                "longest_gap_s": round(longest_gap(times, start, end), 3),
            }
        polls = [(status, entries) for when, status, entries in self.polls if start <= when <= end]
        listed = [count for when, count in self.listed if start <= when <= end]
        answered = sum(status == 200 for status, _ in polls)
        live = (
            not self.errors
            and answered > 0
            and all(n["longest_gap_s"] <= LIVE_GAP_S for n in per_node.values())
        )
        return {
            "console": {
                "window_s": round(seconds, 3),
                "streams": per_node,
                "sessions_listed_max": max(listed, default=0),
                "timeline_polls": len(polls),
                "timeline_polls_200": answered,
                "timeline_entries_max": max((e for _, e in polls), default=0),
                "errors": list(self.errors),
                "live": live,
            }
        }


async def _read_stream(http: aiohttp.ClientSession, node: str, url: str, watch: Watch) -> None:
    try:
        async with http.get(f"{url}/admin/v1/console/stream") as answer:
            if answer.status != 200:
                text = (await answer.text())[:200]
                raise RuntimeError(f"the stream of {node}: {answer.status} {text}")
            parser = SseParser()
            async for chunk in answer.content.iter_any():
                for event, data in parser.feed(chunk):
                    if event == "sessions":
                        watch.heard(node, orjson.loads(data))
            raise RuntimeError(f"the stream of {node} ended")
    except (aiohttp.ClientError, RuntimeError, ValueError) as error:
        watch.errors.append(f"{type(error).__name__}: {error}")


async def _poll_timeline(http: aiohttp.ClientSession, watch: Watch) -> None:
    """One timeline a second (on the clock: a slow answer does not push the next back)."""
    url = watch.nodes[watch.measured]
    loop = asyncio.get_running_loop()
    began = loop.time()
    tick = 0
    while True:
        tick += 1
        await asyncio.sleep(max(0.0, began + tick * POLL_EVERY_S - loop.time()))
        session = watch.live_session
        if session is None:
            watch.polls_without_session += 1
            continue
        try:
            async with http.get(f"{url}/admin/v1/console/sessions/{session}/timeline") as answer:
                body = await answer.read()
                entries = len(orjson.loads(body).get("entries", ())) if answer.status == 200 else 0
                watch.polls.append((time.monotonic(), answer.status, entries))
        except (aiohttp.ClientError, ValueError) as error:
            watch.errors.append(f"timeline: {type(error).__name__}: {error}")


@contextlib.asynccontextmanager
async def consoles(nodes: Mapping[str, str], measured: str, token: str) -> AsyncIterator[Report]:
    """Every node's stream open and a timeline polled on ``measured`` until the block ends;
    yields what they received over a window (``Watch.report``). Raises when a stream gives no
    first event within ``FIRST_EVENT_S``."""
    watch = Watch(nodes, measured)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(
        headers=headers, timeout=_TIMEOUT, read_bufsize=1 << 20
    ) as http:
        tasks = [
            asyncio.create_task(_read_stream(http, node, url, watch)) for node, url in nodes.items()
        ]
        tasks.append(asyncio.create_task(_poll_timeline(http, watch)))
        try:
            deadline = time.monotonic() + FIRST_EVENT_S
            while not all(watch.events.get(node) for node in nodes):
                if watch.errors:
                    raise RuntimeError(f"a console failed: {watch.errors}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no first console event in {FIRST_EVENT_S:.0f} s")
                await asyncio.sleep(0.05)
            yield watch.report
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(SETTLE_S)
