"""What outlives a connection of the fake Gemini Live server: sessions and resumption handles.

Pure. A *session* is what the client resumes: its ``LocalBrain``, its conversation history and a
few counters. A *connection* serves one session at a time (``session``).

Theory of operation:

- a setup without a handle starts a new ``SessionMemory``;
- after each completed turn (when ``sessionResumption`` is on) the connection asks the store to
  ``issue`` a handle: a *snapshot* of the brain and the history as they are then, because a
  resumed session continues from the last handle, not from whatever happened after it (audio and
  tool calls after the last handle are lost: https://ai.google.dev/gemini-api/docs/live-session);
- a setup with a known handle ``restore``s that snapshot into a fresh ``SessionMemory`` (deep
  copies, so one handle can be resumed twice); pending tool calls are never part of a snapshot,
  so they are orphaned on the new connection;
- an unknown handle is refused by the caller (close 1008 "Session not found"). Handles do not
  expire in the fake (the service keeps them 2 h after the session ended).

Call ids (``function-call-<n>``) and handle numbers come from counters shared by every memory of
one session, so they stay unique across resumptions, even from an older handle.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass, field
from typing import Any

from transports.local.brain import LocalBrain

__all__ = ["SessionCounters", "SessionMemory", "SessionStore", "Snapshot"]


@dataclass(eq=False, slots=True)
class SessionCounters:
    """Shared by every memory and snapshot of one session."""

    session: int
    calls: int = 0
    handles: int = 0

    def next_call_id(self) -> str:
        self.calls += 1
        return f"function-call-{self.calls}"


@dataclass(eq=False, slots=True)
class SessionMemory:
    counters: SessionCounters
    brain: LocalBrain = field(default_factory=LocalBrain)
    history: list[dict[str, Any]] = field(default_factory=list)  # Content turns (role, parts)
    input_audio_ms: int = 0  # user audio heard, for the usage metadata

    @property
    def number(self) -> int:
        return self.counters.session


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The session as it was when a handle was issued."""

    handle: str
    counters: SessionCounters
    brain: LocalBrain
    history: tuple[dict[str, Any], ...]
    input_audio_ms: int

    @property
    def session(self) -> int:
        return self.counters.session


class SessionStore:
    """Every session of a server, and the handles issued for them."""

    def __init__(self) -> None:
        self.handles: dict[str, Snapshot] = {}
        self._sessions = 0

    def new_session(self) -> SessionMemory:
        self._sessions += 1
        return SessionMemory(SessionCounters(self._sessions))

    def issue(self, memory: SessionMemory) -> str:
        """A fresh opaque handle for the memory as it is now."""
        counters = memory.counters
        counters.handles += 1
        label = f"fake-session-{counters.session}/handle-{counters.handles}"
        handle = base64.urlsafe_b64encode(label.encode()).decode().rstrip("=")
        self.handles[handle] = Snapshot(
            handle,
            counters,
            copy.deepcopy(memory.brain),
            tuple(copy.deepcopy(memory.history)),
            memory.input_audio_ms,
        )
        return handle

    def restore(self, handle: str) -> SessionMemory | None:
        snapshot = self.handles.get(handle)
        if snapshot is None:
            return None
        return SessionMemory(
            snapshot.counters,
            copy.deepcopy(snapshot.brain),
            copy.deepcopy(list(snapshot.history)),
            snapshot.input_audio_ms,
        )
