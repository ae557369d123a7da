"""No dead air: what the caller hears while a tool call the model waits for is slow.

When the calls of a batch the model waits for (blocking ones) are still running at the mode's
soft limit, the client is told (``tool.slow``, one per running call), and in voice mode the
caller hears a cue at once:

- ``line``: a short sentence from the model said outside the conversation (``HoldingLines``:
  OpenAI Realtime's out-of-band response), so its memory is unchanged;
- ``tone``: a soft tone the gateway makes (every provider, the phone bridge included), as audio
  of the reply that asked for the calls.

``GATEWAY_HOLDING_CUE``: ``auto`` (a line where the provider can say one, else a tone), ``line``
(else nothing), ``tone`` or ``off``. A tone is not played over the model's own speech.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

import structlog

from gateway.protocol import HoldingCue, ToolSlow
from gateway.session.holding_policy import HoldingPolicy
from gateway.session.tool_events import ToolWiring
from gateway.toolrun import ToolCall
from transports.base import HoldingLines

__all__ = ["HoldingCues", "TonePlayer"]

_log = structlog.get_logger("session.holding")


class TonePlayer(Protocol):
    def play_tone(self) -> bool:
        """The holding tone to the client, as audio of the reply in progress; False when there
        is none to attach it to, or the mode is text."""
        ...


class HoldingCues:
    def __init__(self, wiring: ToolWiring, player: TonePlayer, policy: HoldingPolicy) -> None:
        self._w = wiring
        self._player = player
        self._policy = policy

    def watch(
        self,
        calls: Sequence[ToolCall],
        *,
        voice: bool,
        soft_limit_ms: int,
        track: Callable[[Coroutine[Any, Any, None]], None],
    ) -> asyncio.TimerHandle | None:
        """At ``soft_limit_ms`` (the mode's), tell and cue (``track`` runs it as tool work);
        cancel the returned timer when the calls end first. A timer, not a task: most calls end
        in time."""
        if not calls:
            return None
        started = self._w.clock.monotonic()
        loop = asyncio.get_running_loop()
        return loop.call_later(
            soft_limit_ms / 1000,
            lambda: track(self._slow(list(calls), voice, started, soft_limit_ms)),
        )

    async def _slow(
        self, calls: list[ToolCall], voice: bool, started: float, soft_limit_ms: int
    ) -> None:
        cue = await self._cue() if voice else "none"
        elapsed_ms = round((self._w.clock.monotonic() - started) * 1000)
        for call in calls:
            self._w.host.emit(
                ToolSlow(
                    call_id=call.call_id,
                    name=call.tool_id,
                    elapsed_ms=elapsed_ms,
                    soft_limit_ms=soft_limit_ms,
                    cue=cue,
                )
            )
        self._w.metrics.holding_cues.labels(cue).inc()
        _log.info("tool_slow", calls=[c.call_id for c in calls], cue=cue)

    async def _cue(self) -> HoldingCue:
        setting = self._policy.cue
        transport = self._w.transport
        lines = transport if isinstance(transport, HoldingLines) else None
        wanted = setting in ("auto", "line") and lines is not None
        if wanted and lines is not None and await lines.say_holding_line(self._policy.line):
            return "line"
        if setting in ("auto", "tone") and self._player.play_tone():
            return "tone"
        return "none"
