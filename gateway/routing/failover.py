"""A session's upstream that moves to the next target of its route when the one it is on fails:
``RoutedTransport``, a ``Transport`` over the active target's transport.

It passes everything through to the active transport and watches two things: the events it
reads (an ``UpstreamFailed`` after the transport's own reconnects gave up; an upstream that
closed) and the time the model takes to answer (``StallWatch``). On either it opens the next
target the breaker lets through (``open_target``, given by the session: the conversation as it
is now, in that provider's shapes), gives it what the previous one had not answered (the user's
audio since the last completed response, converted to the new provider's format; or the
unanswered text; or a nudge after tool results), and yields ``UpstreamReplaced`` before the new
transport's events, so the session adapts its audio and tells the client.

Tool results for calls the previous target made reach the new one as late results (once); a
truncation of a response the new target never made is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from gateway.audio.convert import AudioConverter
from gateway.clock import Clock
from gateway.routing.aliases import Target
from gateway.routing.handover import Handover, TurnKind, replay
from gateway.routing.health import TargetHealth
from gateway.routing.resolve import Route
from gateway.routing.stall import StallWatch
from gateway.routing.utterance import Format, Utterance
from transports import events as up
from transports.base import (
    Capabilities,
    Mode,
    ToolChoice,
    ToolResult,
    Transport,
    TransportError,
    TurnDetection,
)

__all__ = ["OpenTarget", "Opened", "RoutedTransport"]

_log = structlog.get_logger("routing.failover")

CLOSE_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class Opened:
    transport: Transport
    # The user's messages the previous target never answered, left out of the history given
    # to this one (they are given again as a turn, unless their audio is replayed).
    unanswered: tuple[str, ...] = ()
    # The session's turns end when the client commits (push-to-talk), not by the provider.
    manual_turns: bool = False


OpenTarget = Callable[[Target], Awaitable[Opened]]


class RoutedTransport:
    def __init__(
        self,
        transport: Transport,
        target: Target,
        route: Route,
        *,
        mode: str,
        open_target: OpenTarget,
        health: TargetHealth | None,
        clock: Clock,
        first_output_s: float,
        gap_s: float,
        serves_mode: Callable[[Target], bool],
    ) -> None:
        self._inner = transport
        self.target = target
        self._route = route
        self._mode = mode
        self._open_target = open_target
        self._health = health
        self._clock = clock
        self._serves_mode = serves_mode
        self._watch = StallWatch(first_output_s, gap_s)
        self._timer: asyncio.TimerHandle | None = None
        self._reason: str | None = None  # set: leave the active target for this reason
        self._closed = False
        self._switching = False
        self._deferred: list[Callable[[], Awaitable[None]]] = []
        self._sink: Callable[[up.AudioDelta], bool] | None = None
        # The user's audio since the last completed response, in the format the session sends.
        caps = transport.capabilities
        self._said = Utterance((caps.encoding, caps.input_rate))
        self._bridge: AudioConverter | None = None  # the session's format → the new target's
        self._calls: set[str] = set()  # the call ids the active target made
        self._responses: set[str] = set()
        self._turn_kind: TurnKind | None = None  # what the model was last given to answer
        self._given: list[ToolResult] = []  # results given since the last completed reply
        self._cut = False  # the last response was cut by the upstream's loss
        self._barged = False  # the user spoke over the response in progress
        self.failovers = 0
        # Failovers since the model last said anything: stalls on every target in a row end
        # the session instead of going round for ever.
        self._switches = 0

    # -- what the session reads ------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return self._inner.capabilities  # the active target's

    @capabilities.setter
    def capabilities(self, value: Capabilities) -> None:
        raise AttributeError("a routed transport's capabilities are its active target's")

    def __getattr__(self, name: str) -> Any:
        # The optional protocols (``HoldingLines``, ``ScheduledResults``) are the active
        # target's: ``isinstance`` asks for the method, which exists only when it has it.
        if name in ("say_holding_line", "send_scheduled_result"):
            return getattr(self._inner, name)
        raise AttributeError(name)

    def adopt(self) -> None:
        """The session now converts its audio for the active target: no bridge needed, and
        the audio kept for a replay is in that format too."""
        caps = self._inner.capabilities
        self._said.reformat((caps.encoding, caps.input_rate))
        self._bridge = None

    async def connect(self, config: Any) -> None:
        raise TransportError("a routed transport is connected when it is made")

    async def events(self) -> AsyncIterator[up.UpstreamEvent]:
        while not self._closed:
            failed: up.UpstreamFailed | None = None
            async for event in self._inner.events():
                kind = type(event)
                if kind is up.UpstreamFailed:
                    failed = event  # type: ignore[assignment]
                    break
                self._observe(event, kind)
                yield event
                if self._reason is not None:
                    break
            if self._closed:
                return
            reason = self._reason or ("lost" if failed is not None else "closed")
            replaced = await self._fail_over(reason)
            if replaced is None:
                message = failed.message if failed is not None else "the upstream closed"
                yield up.UpstreamFailed(f"{message}; no other target could take over")
                return
            yield replaced

    # -- the watch ----------------------------------------------------------------------------

    def _observe(self, event: object, kind: type) -> None:
        now = self._clock.monotonic()
        watch = self._watch
        # A reply the loss cut is the transport's last word before it gives up: anything
        # after it (a recovery, another event) means it was not.
        self._cut = False
        if kind is up.AudioDelta or kind is up.TextDelta:
            watch.output(now)
            self._switches = 0
        elif kind is up.TranscriptDelta:
            if event.role == "assistant":  # type: ignore[attr-defined]
                watch.output(now)
                self._switches = 0
        elif kind is up.ToolCallsRequested:
            watch.output(now)
            self._switches = 0
            self._calls.update(c.call_id for c in event.calls)  # type: ignore[attr-defined]
        elif kind is up.ResponseStarted:
            self._responses.add(event.response_id)  # type: ignore[attr-defined]
            self._barged = False
        elif kind is up.ResponseDone:
            watch.response_done()
            # Interrupted, but not by the user: if the transport's failure follows at once,
            # the connection's loss cut it, and whoever serves next owes the answer again.
            self._cut = event.status == "interrupted" and not self._barged  # type: ignore[attr-defined]
            if event.status == "completed":  # type: ignore[attr-defined]
                self._said.answered()
                self._given.clear()  # what it was given is answered
                self._turn_kind = None
        elif kind is up.SpeechStopped:
            self._turn_ended("speech")
        elif kind is up.SpeechStarted:
            watch.quiet()
            self._barged = True
        else:
            return
        self._arm()

    def _turn_ended(self, kind: TurnKind) -> None:
        """The model owes an answer to ``kind``: the user's speech (or push-to-talk commit),
        a typed message, tool results, or a plain request to answer."""
        if kind == "speech":
            self._said.turn_ended()
        self._turn_kind = kind
        self._watch.turn_ended(self._clock.monotonic())
        self._arm()

    def _arm(self) -> None:
        deadline = self._watch.deadline
        if deadline is None or self._timer is not None or self._closed:
            return
        delay = max(0.0, deadline - self._clock.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._check)

    def _check(self) -> None:
        self._timer = None
        if self._closed or self._switching or self._reason is not None:
            return
        stall = self._watch.stalled(self._clock.monotonic())
        if stall is None:
            self._arm()
            return
        _log.warning("upstream_stalled", target=self.target.key, stall=stall)
        self._reason = stall
        # Ends the active transport's events: ``events`` then fails over.
        asyncio.get_running_loop().create_task(self._close_quietly(self._inner))

    # -- failing over -------------------------------------------------------------------------

    async def _fail_over(self, reason: str) -> up.UpstreamReplaced | None:
        self._switching = True
        owed_by = (
            "turn"
            if self._watch.owed_since is not None
            else "reply"
            if self._watch.last_output is not None
            else "cut"
            if self._cut
            else None
        )
        owed = owed_by is not None
        self._cut = False
        self._watch.quiet()
        previous, old = self.target, self._inner
        try:
            await self._close_quietly(old)
            if self._health is not None:
                await self._health.failure(previous.key, reason)
            self._switches += 1
            if self._switches > len(self._route.targets):
                _log.warning("upstream_failover_given_up", target=previous.key, reason=reason)
                return None  # every target was given this turn and none answered it
            for target in self._route.after(previous):
                opened = await self._try(target)
                if opened is None:
                    continue
                if self._closed:  # the session ended while the next target was opening
                    await self._close_quietly(opened.transport)
                    return None
                await self._take_over(target, opened, owed=owed)
                self.failovers += 1
                _log.warning(
                    "upstream_failed_over",
                    previous=previous.key,
                    target=target.key,
                    reason=reason,
                    owed=owed_by,
                )
                return up.UpstreamReplaced(
                    provider=target.provider,
                    model=target.model,
                    voice=target.voice,
                    reason=reason,
                    previous=previous.key,
                )
            return None
        finally:
            self._reason = None
            self._switching = False
            # What is owed now is owed by the new target, from now (a timer that fired during
            # the switch did nothing).
            if self._watch.owed_since is not None:
                self._watch.owed_since = self._clock.monotonic()
            self._arm()

    async def _try(self, target: Target) -> Opened | None:
        if not self._serves_mode(target):
            return None
        if self._health is not None and not (await self._health.admit(target.key)).allowed:
            return None
        try:
            opened = await self._open_target(target)
        except (TransportError, TimeoutError, OSError) as exc:
            _log.info("upstream_target_failed", target=target.key, reason=str(exc)[:200])
            if self._health is not None:
                await self._health.failure(target.key, "connect")
            return None
        if self._health is not None:
            await self._health.success(target.key)
        return opened

    async def _take_over(self, target: Target, opened: Opened, *, owed: bool) -> None:
        """``owed``: the previous target owed an answer (a turn had ended, or a reply was under
        way): the new one is given the user's turn again and answers it."""
        new = opened.transport
        self._inner, self.target = new, target
        self._calls.clear()
        self._responses.clear()
        if self._sink is not None:
            self._set_inner_sink()
        caps = new.capabilities
        fmt: Format = (caps.encoding, caps.input_rate)
        if self._said.format != fmt:
            self._bridge = AudioConverter(*self._said.format, *fmt)
        # What the user said since the last completed reply, whatever is owed (the new
        # provider's detector picks up an utterance still going on).
        replayed = self._mode == "voice" and await replay(new, self._said, fmt)
        if owed:
            given, self._given = self._given, []
            handover = Handover(self._turn_kind, given, opened.unanswered, opened.manual_turns)
            kind = await handover.ask_again(new, fmt, replayed=replayed)
            self._given.extend(given if kind == "results" else ())
            self._turn_ended(kind)
        elif opened.unanswered and not replayed:
            # Said, and left unanswered on purpose (a cancelled reply): context, not a turn.
            await new.add_context("\n".join(opened.unanswered))
        deferred, self._deferred = self._deferred, []
        for send in deferred:
            await send()

    async def _close_quietly(self, transport: Transport) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(transport.close(), CLOSE_WAIT_S)

    # -- audio to the model -------------------------------------------------------------------

    def set_audio_sink(self, sink: Callable[[up.AudioDelta], bool] | None) -> None:
        self._sink = sink
        self._set_inner_sink()

    def _set_inner_sink(self) -> None:
        setter = getattr(self._inner, "set_audio_sink", None)
        if setter is None:
            return
        sink, watch, clock = self._sink, self._watch, self._clock

        def watched(delta: up.AudioDelta) -> bool:
            assert sink is not None
            taken = sink(delta)
            if taken:
                watch.output(clock.monotonic())
                self._switches = 0
            return taken

        setter(None if sink is None else watched)

    def accepts_audio_now(self) -> bool:
        inner = self._inner
        accepts = getattr(inner, "accepts_audio_now", None)
        return accepts is not None and not self._switching and self._bridge is None and accepts()

    def send_audio_now(self, pcm: bytes, encoded: str | None = None) -> None:
        self._said.keep(pcm)
        self._inner.send_audio_now(pcm, encoded)  # type: ignore[attr-defined]

    async def send_audio(self, pcm: bytes) -> None:
        if self._mode == "voice":
            self._said.keep(pcm)
        if self._switching:
            return  # kept: replayed to the next target
        if self._bridge is not None:
            pcm = self._bridge.process(pcm)
            if not pcm:
                return
        await self._inner.send_audio(pcm)

    async def commit_audio(self, *, respond: bool = True) -> None:
        if respond:
            self._turn_ended("speech")
        await self._pass(lambda t: t.commit_audio(respond=respond))

    async def request_response(self) -> None:
        self._turn_ended("request")
        await self._pass(lambda t: t.request_response())

    async def clear_audio(self) -> None:
        self._said.clear()
        await self._pass(lambda t: t.clear_audio())

    # -- text, context and tools --------------------------------------------------------------

    async def send_text(self, text: str) -> None:
        self._turn_ended("text")
        await self._pass(lambda t: t.send_text(text))

    async def add_context(self, text: str) -> None:
        await self._pass(lambda t: t.add_context(text))

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        if not any(not r.acknowledgement for r in results):
            await self._pass(lambda t: t.send_tool_results(results))
            return
        self._given.extend(r for r in results if not r.acknowledgement)
        self._turn_ended("results")
        await self._pass(lambda t: self._results_to(t, results))

    async def _results_to(self, transport: Transport, results: Sequence[ToolResult]) -> None:
        known = [r for r in results if r.call_id in self._calls]
        if known:
            await transport.send_tool_results(known)
        # Calls a previous target made: this one never asked, it hears them as news.
        for result in results:
            if result.call_id not in self._calls and not result.acknowledgement:
                await transport.send_late_result(result)

    async def send_late_result(self, result: ToolResult) -> None:
        self._given.append(result)
        self._turn_ended("results")
        await self._pass(lambda t: t.send_late_result(result))

    async def cancel_response(self) -> None:
        self._watch.quiet()
        await self._pass(lambda t: t.cancel_response())

    async def truncate(self, response_id: str, played_ms: int) -> None:
        if response_id in self._responses:
            await self._inner.truncate(response_id, played_ms)

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        if mode is not None:
            self._mode = mode
        await self._pass(
            lambda t: t.update(
                mode=mode,
                instructions=instructions,
                turn_detection=turn_detection,
                tool_choice=tool_choice,
            )
        )

    async def _pass(self, send: Callable[[Transport], Awaitable[None]]) -> None:
        """To the active target; while the session is moving to another, after it arrives."""
        if self._switching:
            self._deferred.append(lambda: send(self._inner))
            return
        await send(self._inner)

    async def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await self._inner.close()
