"""The console's side of a node: ``Console``.

It hears every event a session of this node sends its client (``event``, the sessions'
observer, wired through ``SessionParts``) and keeps each session's timeline (``Entries``); once
a second (``run``) it publishes this node's blob (its sessions' summaries, whether it drains,
its version) and the timelines' new entries to the ``ConsoleStore``, where every node's
console reads them. A session that left this node (ended, moved) is dropped from memory after
its last entries are written. The cost to a session is one call per control event, none per
audio frame.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
import structlog

from gateway.console.entries import Entries, Entry
from gateway.console.store import ConsoleStore, MemoryConsole
from gateway.protocol import ServerEvent, SessionEnded
from gateway.store import StoreUnavailable

__all__ = ["PUBLISH_EVERY_S", "Console", "ConsoleSession"]

_log = structlog.get_logger("console")
PUBLISH_EVERY_S = 1.0


class ConsoleSession(Protocol):
    """What the console reads of a session (``gateway.session.Session`` is one)."""

    session_id: str
    started_at: float  # the node's monotonic clock
    outbound: Any

    @property
    def mode(self) -> str: ...

    @property
    def turn(self) -> Any: ...

    @property
    def provider(self) -> str: ...


def iso(unix: float) -> str:
    return (
        datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


class _Watched:
    """One session's console state on this node."""

    def __init__(self, transcripts: bool) -> None:
        self.entries = Entries(transcripts=transcripts)
        self.unwritten: list[Entry] = []
        self.edge = "websocket"
        self.ended = False


class Console:
    def __init__(
        self,
        store: ConsoleStore,
        *,
        node_id: str,
        version: str,
        transcripts: bool = False,
        trace_url: str | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """``trace_url``: where a session's trace is shown, ``{trace_id}`` in it (a link)."""
        self.store = store
        self.node_id = node_id
        self.version = version
        self._transcripts = transcripts
        self._trace_url = trace_url
        self._wall = wall
        self._watched: dict[str, _Watched] = {}
        self._sessions: Mapping[str, Any] = {}
        self.draining: Callable[[], bool] = lambda: False
        self.changed = asyncio.Event()  # set after each publication (the stream's wake-up)

    def watch(self, sessions: Mapping[str, Any], draining: Callable[[], bool]) -> None:
        """The node's live sessions (the manager's map) and whether the node drains."""
        self._sessions = sessions
        self.draining = draining

    # -- the sessions' observer --------------------------------------------------------------

    def event(self, session: ConsoleSession, event: ServerEvent) -> None:
        watched = self._watched.get(session.session_id)
        if watched is None:
            watched = self._watched[session.session_id] = _Watched(self._transcripts)
        edge = getattr(session.outbound, "edge", None)
        if isinstance(edge, str):
            watched.edge = edge
        found = watched.entries.of(event, "")
        at = iso(self._wall()) if found else ""  # most events (deltas) make no entry
        for entry in found:
            entry["at"] = at
            entry["node"] = self.node_id  # where it happened: a session may move
            if entry["kind"] == "turn":  # numbered as the session counts its user's turns
                entry["turn"] = session.turn.number
        watched.unwritten.extend(found)
        if isinstance(event, SessionEnded):
            watched.ended = True

    # -- what this node publishes ------------------------------------------------------------

    def summary(self, session: Any, now_mono: float, now_wall: float) -> dict[str, Any]:
        watched = self._watched.get(session.session_id)
        user, usage = session.user, session.conversation.usage
        duration = max(0.0, now_mono - session.started_at)
        trace = getattr(session, "trace", None)  # with tracing on: its trace, for a link
        return {
            "session_id": session.session_id,
            "node": self.node_id,
            "user_id": user.user_id,
            "key_id": user.key_id,
            "team": user.tenant,
            "edge": watched.edge if watched is not None else "websocket",
            "provider": session.provider,
            "model": session.profile.model,
            "failovers": watched.entries.failovers if watched is not None else 0,
            "mode": session.mode,
            "started_at": iso(now_wall - duration),
            "duration_s": round(duration, 1),
            "turns": session.turn.number,
            "tool_calls": sum(usage.tool_calls.values()),
            "spend": usage.estimated_cost,
            "state": "live" if session.outbound is not None else "parked",
            "trace_id": None
            if trace is None
            else format(trace.session_span.get_span_context().trace_id, "032x"),
        }

    def blob(self, now_mono: float) -> dict[str, Any]:
        now_wall = self._wall()
        sessions = [
            self.summary(s, now_mono, now_wall)
            for s in list(self._sessions.values())
            if not s.ended.is_set()
        ]
        return {
            "node_id": self.node_id,
            "version": self.version,
            "draining": self.draining(),
            "sessions": sessions,
        }

    async def publish_once(self, now_mono: float) -> None:
        """This node's blob and the timelines' new entries; sessions gone from here forgotten
        once written."""
        unwritten = {
            sid: [orjson.dumps(e) for e in w.unwritten] for sid, w in self._watched.items()
        }
        await self.store.append({sid: e for sid, e in unwritten.items() if e})
        for sid, watched in list(self._watched.items()):
            del watched.unwritten[: len(unwritten[sid])]
            if not watched.unwritten and (watched.ended or sid not in self._sessions):
                del self._watched[sid]
        if isinstance(self.store, MemoryConsole):
            self.store.beat = self._wall()
        blob = orjson.dumps(self.blob(now_mono))
        await self.store.publish(self.node_id, blob, ttl_s=3 * PUBLISH_EVERY_S)
        self.changed.set()
        self.changed.clear()

    async def run(self, monotonic: Callable[[], float]) -> None:
        due = monotonic()
        while True:
            try:
                await self.publish_once(monotonic())
            except StoreUnavailable:
                pass  # the next second tries again; the entries wait meanwhile
            except Exception:
                _log.exception("console_publish_failed")
            # Once a second on the clock, not a second after each publication (no drift).
            due = max(due + PUBLISH_EVERY_S, monotonic())
            await asyncio.sleep(due - monotonic())

    # -- what the console reads --------------------------------------------------------------

    async def directory(self, lease_s: float) -> dict[str, Any]:
        """Every node's sessions and standing (``lease_s``: a heartbeat older is dead)."""
        blobs = {node: orjson.loads(raw) for node, raw in (await self.store.blobs()).items()}
        beats = await self.store.heartbeats()
        now = self._wall()
        nodes, sessions = [], []
        for node in sorted(set(blobs) | set(beats)):
            blob = blobs.get(node, {})
            age = now - beats[node] if node in beats else None
            nodes.append(
                {
                    "node_id": node,
                    "alive": node in blobs and (age is None or age <= lease_s),
                    "heartbeat_age_s": None if age is None else round(age, 1),
                    "sessions": len(blob.get("sessions", ())),
                    "version": blob.get("version"),
                    "draining": bool(blob.get("draining", False)),
                }
            )
            sessions.extend(blob.get("sessions", ()))
        sessions.sort(key=lambda s: str(s.get("started_at")))
        return {"at": iso(now), "sessions": sessions, "nodes": nodes}

    async def timeline(self, session_id: str, lease_s: float) -> dict[str, Any] | None:
        """The session's summary (while it lives somewhere), whether it lives, and its entries:
        those written, then this node's not written yet."""
        written = [orjson.loads(raw) for raw in await self.store.timeline(session_id)]
        watched = self._watched.get(session_id)
        pending = list(watched.unwritten) if watched is not None else []
        directory = await self.directory(lease_s)
        summary = next((s for s in directory["sessions"] if s["session_id"] == session_id), None)
        if not written and not pending and summary is None:
            return None
        entries = written + pending
        ended = any(e.get("kind") == "ended" for e in entries)
        trace_id = None if summary is None else summary.get("trace_id")
        return {
            "session": summary,
            "live": summary is not None and not ended,
            "trace_id": trace_id,
            "trace_url": None
            if trace_id is None or self._trace_url is None
            else self._trace_url.replace("{trace_id}", trace_id),
            "entries": entries,
        }
