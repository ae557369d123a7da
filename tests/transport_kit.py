"""Helpers for tests that drive a transport: a recorder of its neutral events, and readers of
what one response said.

Importable from any test module (``tests/`` is on ``sys.path`` through the root conftest).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from transports import events as ev

DEFAULT_TIMEOUT_S = 3.0


class Running:
    """A connected transport whose ``events()`` are recorded; waits wake on a condition.

    Every wait is bounded (``timeout_s``, per recorder or per wait) and fails at once, with the
    events seen, when ``events()`` ends before the condition holds.
    """

    def __init__(self, sdk: Any, transport: Any, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.sdk = sdk
        self.transport = transport
        self.timeout_s = timeout_s
        self.events: list[ev.UpstreamEvent] = []
        self.ended = False  # ``events()`` finished
        self._arrived = asyncio.Condition()
        self._task = asyncio.create_task(self._consume())

    async def _consume(self) -> None:
        try:
            async for event in self.transport.events():
                async with self._arrived:
                    self.events.append(event)
                    self._arrived.notify_all()
        finally:
            async with self._arrived:
                self.ended = True
                self._arrived.notify_all()

    def count(self, kind: type) -> int:
        return sum(isinstance(e, kind) for e in self.events)

    def saw(self, kind: type) -> bool:
        return self.count(kind) > 0

    async def until(self, predicate: Callable[[], bool], *, timeout_s: float | None = None) -> None:
        bound = timeout_s or self.timeout_s
        try:
            async with asyncio.timeout(bound), self._arrived:
                await self._arrived.wait_for(lambda: predicate() or self.ended)
        except TimeoutError:
            raise AssertionError(f"not within {bound:g} s; the events: {self.events}") from None
        if not predicate():
            raise AssertionError(f"the events ended first: {self.events}")

    async def until_any(self, *kinds: type) -> None:
        await self.until(lambda: any(self.saw(k) for k in kinds))

    async def recovered(self, times: int) -> None:
        await self.until(
            lambda: self.count(ev.UpstreamRecovered) >= times or self.saw(ev.UpstreamFailed)
        )

    async def wait_ended(self, timeout_s: float | None = None) -> None:
        """``events()`` has finished (within the timeout)."""
        await asyncio.wait_for(asyncio.shield(self._task), timeout_s or self.timeout_s)

    async def close(self) -> None:
        await self.transport.close()
        await self.wait_ended()


# Reading responses ------------------------------------------------------------------------------


def response_id_of(event: ev.UpstreamEvent) -> str | None:
    """The response an event belongs to (``None`` for session-level events)."""
    return getattr(event, "response_id", None)


def is_output(event: ev.UpstreamEvent) -> bool:
    """What the model says: audio, text, or the transcript of its speech."""
    if isinstance(event, ev.TranscriptDelta):
        return event.role == "assistant"
    return isinstance(event, ev.AudioDelta | ev.TextDelta)


def said(events: Sequence[ev.UpstreamEvent], response_id: str | None = None) -> str:
    """The text (or speech transcript) deltas, joined; of one response when given."""
    return "".join(
        e.delta
        for e in events
        if isinstance(e, ev.TextDelta | ev.TranscriptDelta)
        and is_output(e)
        and (response_id is None or e.response_id == response_id)
    )


def audio_of(events: Sequence[ev.UpstreamEvent], response_id: str | None = None) -> bytes:
    return b"".join(
        e.pcm
        for e in events
        if isinstance(e, ev.AudioDelta) and (response_id is None or e.response_id == response_id)
    )


def done_of(events: Sequence[ev.UpstreamEvent], response_id: str) -> ev.ResponseDone | None:
    return next(
        (e for e in events if isinstance(e, ev.ResponseDone) and e.response_id == response_id),
        None,
    )
