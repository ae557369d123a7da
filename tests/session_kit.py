"""A ``Session`` with nothing around it: a transport that records what the session sends it, an
outbound that keeps the events the client would see, an audit sink in memory and a manual
clock. For tests of the session and its tool flow without sockets.

Importable from any test module (``tests/`` is on ``sys.path`` through the root conftest).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gateway.clock import ManualClock
from gateway.observability import Metrics
from gateway.protocol import ServerEvent
from gateway.registry import Registry
from gateway.session import Session, SessionParts, SessionUser
from gateway.session.ownership import Ownership
from gateway.store import MemoryStore, SessionRecord, SessionSnapshot, SessionStore
from gateway.toolrun import MemoryAuditSink, ToolRunner
from transports.base import (
    Capabilities,
    Mode,
    ToolChoice,
    ToolResult,
    TurnDetection,
    UpstreamConfig,
)
from transports.events import UpstreamEvent


@dataclass
class RecordingTransport:
    """A ``Transport`` that records every call; ``events()`` yields what a test pushes."""

    capabilities: Capabilities = field(
        default_factory=lambda: Capabilities(input_rate=24000, output_rate=24000)
    )
    calls: list[tuple[str, Any]] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    late_results: list[ToolResult] = field(default_factory=list)
    queue: asyncio.Queue[UpstreamEvent | None] = field(default_factory=asyncio.Queue)
    # Set while the session waits for the next event with nothing queued: all were handled.
    drained: asyncio.Event = field(default_factory=asyncio.Event)

    async def connect(self, config: UpstreamConfig) -> None:
        self.calls.append(("connect", config))

    async def events(self) -> AsyncIterator[UpstreamEvent]:
        while True:
            if self.queue.empty():
                self.drained.set()
            event = await self.queue.get()
            if event is None:
                return
            yield event

    async def push(self, *events: UpstreamEvent) -> None:
        """Queue ``events`` and wait until the session (its ``run_upstream``) handled them."""
        self.drained.clear()
        for event in events:
            self.queue.put_nowait(event)
        async with asyncio.timeout(5):
            await self.drained.wait()

    async def send_audio(self, pcm: bytes) -> None:
        self.calls.append(("send_audio", pcm))

    async def commit_audio(self, *, respond: bool = True) -> None:
        self.calls.append(("commit_audio", None if respond else "no reply"))

    async def request_response(self) -> None:
        self.calls.append(("request_response", None))

    async def clear_audio(self) -> None:
        self.calls.append(("clear_audio", None))

    async def send_text(self, text: str) -> None:
        self.calls.append(("send_text", text))

    async def add_context(self, text: str) -> None:
        self.calls.append(("add_context", text))

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        self.results.extend(results)
        self.calls.append(("send_tool_results", list(results)))

    async def send_late_result(self, result: ToolResult) -> None:
        self.late_results.append(result)
        self.calls.append(("send_late_result", result))

    async def cancel_response(self) -> None:
        self.calls.append(("cancel_response", None))

    async def truncate(self, response_id: str, played_ms: int) -> None:
        self.calls.append(("truncate", (response_id, played_ms)))

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        if turn_detection is None and tool_choice is None:
            self.calls.append(("update", (mode, instructions)))
        else:
            self.calls.append(("update", (mode, instructions, turn_detection, tool_choice)))

    async def close(self) -> None:
        self.calls.append(("close", None))
        self.queue.put_nowait(None)


@dataclass
class RecordingOutbound:
    """What the client would receive: events in their wire shape (``to_dict``), audio frames as
    bytes."""

    events: list[dict[str, Any]] = field(default_factory=list)
    audio_frames: list[bytes] = field(default_factory=list)
    audio_encoded: list[str | None] = field(default_factory=list)  # each frame's base64 given
    released: asyncio.Event = field(default_factory=asyncio.Event)
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    def event(self, event: ServerEvent, *, after_audio: bool = False) -> None:
        self.events.append(dict(event.to_dict()))
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._arrived:
            self._arrived.notify_all()

    async def wait_for(self, kind: str) -> dict[str, Any]:
        """The first event of ``kind`` (waits, bounded, until one arrives)."""
        async with asyncio.timeout(5), self._arrived:
            await self._arrived.wait_for(lambda: bool(self.of(kind)))
        return self.of(kind)[0]

    def audio(self, pcm: bytes, encoded: str | None = None) -> None:
        self.audio_frames.append(pcm)
        self.audio_encoded.append(encoded)

    def discard_audio(self) -> None:
        self.audio_frames.clear()

    def close(self) -> None:
        self.released.set()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


@dataclass
class Rig:
    session: Session
    transport: RecordingTransport
    outbound: RecordingOutbound
    audit: MemoryAuditSink
    clock: ManualClock


def make_session(
    registry: Registry,
    data_dir: Path,
    *,
    roles: tuple[str, ...] = (),
    mode: Literal["voice", "text"] = "text",
    user_id: str = "alice",
    capabilities: Capabilities | None = None,
    store: SessionStore | None = None,
    transport: RecordingTransport | None = None,
) -> Rig:
    clock = ManualClock()
    audit = MemoryAuditSink()
    if transport is None:
        transport = RecordingTransport()
    if capabilities is not None:
        transport.capabilities = capabilities
    runner = ToolRunner(registry, data_dir=data_dir, audit=audit, clock=clock)
    setup = SessionSnapshot(
        provider="local",
        mode=mode,
        input_rate=24000,
        output_rate=24000,
        enabled_tools=None,
        instructions="test",
    )
    if store is None:
        store = MemoryStore(clock)
    ownership = Ownership(store, session_id="sess_test", node="local")
    metrics = Metrics(spec.tool_id for spec in registry.tools())
    session = Session(
        SessionParts(registry, clock, metrics, audit),
        session_id="sess_test",
        user=SessionUser(user_id=user_id, roles=roles),
        setup=setup,
        transport=transport,
        runner=runner,
        ownership=ownership,
    )
    ownership.record_of = lambda: SessionRecord(
        "sess_test", user_id, None, "", "local", 1, "live", session.snapshot(), 0.0
    )
    session.upstream_ready()
    outbound = RecordingOutbound()
    session.attach(outbound)  # type: ignore[arg-type]
    return Rig(session, transport, outbound, audit, clock)
