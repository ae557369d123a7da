"""The session-facing half of a transport built on a sans-I/O codec.

A codec-backed transport (OpenAI Realtime, Gemini Live) turns each session input into one codec
call; the codec queues the frames to send in ``outbox`` (and, rarely, events for the session in
``events``); the shell then sends the frames in order. Several coroutines may flush at once: each
frame is popped once and written before the next ``await``, so frames leave in the codec's order.
The connection-specific part (how to send one frame) is the subclass's ``_sender``.
"""

from __future__ import annotations

import asyncio
import random
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import structlog

from transports import events as ev
from transports.base import ToolResult, TransportError

__all__ = ["CodecShell", "ShellCodec", "backoff_delay"]


def backoff_delay(
    attempt: int,
    initial_s: float,
    max_s: float,
    jitter: Callable[[], float] = random.random,
) -> float:
    """Seconds before reconnect ``attempt`` (1-based): the first at once, then doubling up to
    ``max_s``, with jitter so that many sessions do not reconnect in step."""
    if attempt <= 1:
        return 0.0
    base = min(max_s, initial_s * 2.0 ** (attempt - 2))
    return base * (0.75 + 0.25 * jitter())


class ShellCodec(Protocol):
    outbox: deque[str]
    events: list[ev.UpstreamEvent]
    notes: list[tuple[str, dict[str, Any]]]
    connected: bool

    def audio(self, pcm: bytes) -> None: ...
    def commit(self, *, respond: bool = True) -> None: ...
    def request_response(self) -> None: ...
    def clear(self) -> None: ...
    def user_text(self, text: str) -> None: ...
    def context(self, text: str) -> None: ...
    def tool_results(self, results: Sequence[ToolResult]) -> None: ...
    def late_result(self, result: ToolResult) -> None: ...
    def cancel(self) -> None: ...


C = TypeVar("C", bound=ShellCodec)


class CodecShell(ABC, Generic[C]):
    _codec: C | None
    _closing: bool
    _queue: asyncio.Queue[ev.UpstreamEvent | None]
    _log: Any

    def __init__(self) -> None:
        self._codec = None
        self._closing = False
        self._queue = asyncio.Queue()
        self._log = structlog.get_logger("upstream")
        self._attempts_used = 0
        self._progress_mark = 0

    async def _reconnect_with(
        self,
        open_once: Callable[[], Awaitable[object]],
        *,
        provider: str,
        reason: str,
        progress: Callable[[], int],
        attempts: int,
        delay: Callable[[int], float],
        planned: bool = False,
    ) -> bool:
        """Open a new connection with bounded attempts: ``UpstreamRecovered`` or
        ``UpstreamFailed``. Attempts are counted across recoveries until the codec's
        ``progress`` moves (a reply completed): a server that accepts and then drops at once
        must not cause endless reconnects. A ``planned`` change starts the count afresh."""
        if planned or progress() != self._progress_mark:
            self._attempts_used = 0
        last_error = reason
        lost_at = time.monotonic()
        while self._attempts_used < attempts:
            self._attempts_used += 1
            await asyncio.sleep(delay(self._attempts_used))
            if self._closing:
                return False
            try:
                await open_once()
            except TransportError as exc:
                last_error = str(exc)
                self._log.warning(
                    "upstream_reconnect_failed", attempt=self._attempts_used, error=last_error
                )
                if not exc.retryable:
                    break
                continue
            self._progress_mark = progress()
            recovered = ev.UpstreamRecovered(self._attempts_used, time.monotonic() - lost_at)
            self._queue.put_nowait(recovered)
            return True
        self._queue.put_nowait(
            ev.UpstreamFailed(
                f"{provider} could not be reconnected after {self._attempts_used} attempts: "
                f"{last_error}"
            )
        )
        return False

    @abstractmethod
    def _sender(self) -> Callable[[str], Awaitable[None]] | None:
        """How to send one text frame on the current connection; None when there is none."""

    async def events(self) -> AsyncIterator[ev.UpstreamEvent]:
        while (event := await self._queue.get()) is not None:
            yield event
        self._queue.put_nowait(None)  # a later events() call ends at once too

    async def send_audio(self, pcm: bytes) -> None:
        codec = self._codec  # the hot path: no closure, no extra await
        if codec is not None and not self._closing:
            codec.audio(pcm)
            if codec.outbox:
                await self._flush()

    async def commit_audio(self, *, respond: bool = True) -> None:
        await self._do(lambda c: c.commit(respond=respond))

    async def request_response(self) -> None:
        await self._do(lambda c: c.request_response())

    async def clear_audio(self) -> None:
        await self._do(lambda c: c.clear())

    async def send_text(self, text: str) -> None:
        await self._do(lambda c: c.user_text(text))

    async def add_context(self, text: str) -> None:
        await self._do(lambda c: c.context(text))

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        await self._do(lambda c: c.tool_results(results))

    async def send_late_result(self, result: ToolResult) -> None:
        await self._do(lambda c: c.late_result(result))

    async def cancel_response(self) -> None:
        await self._do(lambda c: c.cancel())

    async def _do(self, action: Callable[[C], None]) -> None:
        codec = self._codec
        if codec is None or self._closing:
            return
        action(codec)
        if codec.events:
            produced, codec.events = codec.events, []
            for event in produced:
                self._queue.put_nowait(event)
        if codec.outbox:
            await self._flush()
        if codec.notes:
            self._log_notes()

    async def _flush(self) -> None:
        codec, send = self._codec, self._sender()
        if codec is None or send is None:
            return
        outbox = codec.outbox
        while outbox and codec.connected:
            frame = outbox.popleft()
            try:
                await send(frame)
            except Exception as exc:  # the reader sees the close and reconnects
                outbox.appendleft(frame)  # the codec decides what survives the connection
                self._log.info("upstream_send_failed", error=type(exc).__name__)
                return

    def _log_notes(self) -> None:
        codec = self._codec
        if codec is None:
            return
        notes, codec.notes = codec.notes, []
        for name, details in notes:
            self._log.info(name, **details)
