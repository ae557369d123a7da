"""One client session: the client's events in, the upstream's events out, tools in between.

The server's reader calls ``on_client_event``; ``run_upstream`` reads the transport. Everything
the client sees goes through ``emit`` / the ``Outbound`` writer, so a slow client never blocks the
upstream. Policy (budgets, confirmations, intents) lives in ``gateway.orchestrator``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import structlog

from gateway.audio import StreamResampler, is_speech
from gateway.clock import Clock
from gateway.observability import Metrics
from gateway.orchestrator import (
    CallPolicy,
    ConfirmationBook,
    IntentState,
    TurnState,
)
from gateway.protocol import (
    AudioAppend,
    AudioClear,
    AudioCommit,
    AudioPlayback,
    BinaryAudio,
    ConfirmationRespond,
    EndReason,
    ErrorCode,
    ErrorEvent,
    JsonClientEvent,
    Mode,
    Ping,
    Pong,
    ProtocolError,
    ResponseCancel,
    ResponseDone,
    ResponseStarted,
    ResponseStatus,
    ServerEvent,
    SessionEnd,
    SessionEnded,
    SessionStart,
    SessionUpdate,
    SessionUpdated,
    SpeechStarted,
    TextDelta,
    TextSend,
    TranscriptDelta,
    TranscriptDone,
    TranscriptRole,
    encode,
)
from gateway.registry import Registry
from gateway.session.outbound import Outbound
from gateway.session.ratelimit import TokenBucket
from gateway.session.states import SessionState, transition
from gateway.session.toolflow import ToolFlow
from gateway.store import SessionSnapshot
from gateway.toolrun import Caller, ModeBudget, ToolRunner
from tools._core import Intent
from transports import events as up
from transports.base import ConversationItem, DirectAudio, Transport

__all__ = ["Session", "SessionUser"]

_log = structlog.get_logger("session")

# Conversation items kept for a resume on another node (replayed to a new upstream).
HISTORY_ITEMS = 200
UPSTREAM_CLOSE_TIMEOUT_S = 5.0
# A cancelled tool batch finishes within its calls' hard timeouts; past this the next response
# starts anyway (its order is then the provider's).
HELD_RESPONSE_WAIT_S = 6.0


@dataclass(frozen=True, slots=True)
class SessionUser:
    user_id: str
    roles: tuple[str, ...] = ()
    tenant: str | None = None
    token: str | None = field(default=None, repr=False)


@dataclass(slots=True)
class _Response:
    response_id: str
    text: list[str] = field(default_factory=list)
    audio_ms: float = 0.0
    interrupted: bool = False
    first_audio_at: float | None = None  # monotonic time its first audio went to the client
    played_ms: int | None = None  # what the client says it played (audio.playback)


class Session:
    def __init__(
        self,
        *,
        session_id: str,
        user: SessionUser,
        setup: SessionSnapshot,
        registry: Registry,
        transport: Transport,
        runner: ToolRunner,
        budgets: Mapping[Literal["voice", "text"], ModeBudget],
        clock: Clock,
        metrics: Metrics,
        confirmation_ttl_s: float,
        client_events_per_s: float = 20.0,
        client_events_burst: int = 60,
    ) -> None:
        """``setup`` is a fresh snapshot for a new session, or a stored one being resumed."""
        self.session_id = session_id
        self.user = user
        self.provider = setup.provider
        self.instructions = setup.instructions
        self.model, self.voice, self.locale = setup.model, setup.voice, setup.locale
        self.tool_dialect = setup.tool_dialect
        self.mode: str = setup.mode
        self.enabled = None if setup.enabled_tools is None else frozenset(setup.enabled_tools)
        self.input_rate = setup.input_rate
        self.output_rate = setup.output_rate
        self.registry = registry
        self.transport = transport
        self.runner = runner
        self.clock = clock
        self.metrics = metrics
        self._budgets = budgets
        self.state = SessionState.STARTING
        self.turn = TurnState()
        self.book = ConfirmationBook(timedelta(seconds=confirmation_ttl_s))
        self.intents = IntentState()
        self.history: deque[ConversationItem] = deque(maxlen=HISTORY_ITEMS)
        self.tools = ToolFlow(self)
        self.outbound: Outbound | None = None
        self.resume_token_hash = ""
        self.ended = asyncio.Event()
        self.end_reason: EndReason | None = None
        self.last_activity = clock.monotonic()
        self.started_at = clock.monotonic()
        self._response: _Response | None = None
        self._up_in: StreamResampler | None = None
        self._up_out: StreamResampler | None = None
        self._ms_per_output_byte = 0.0
        self._tool_tasks: set[asyncio.Task[None]] = set()
        # Response ends held back until that response's tool batch has reported to the client.
        self._held_done: dict[str, up.ResponseDone] = {}
        # Running tool batches per response (a chat response runs one per round).
        self._batches: dict[str, set[asyncio.Task[None]]] = {}
        # The last response that spoke: the client may still be playing it after its end
        # (providers send audio faster than real time), so a barge-in can still cut it.
        self._last_spoken: _Response | None = None
        self._closing: asyncio.Task[None] | None = None
        # run_upstream is handling an event: an audio delta must wait its turn in the queue.
        self._upstream_busy = False
        # The transport's audio hot path, if it has one (transports.base.DirectAudio).
        self._direct = transport if isinstance(transport, DirectAudio) else None
        self._control_events = TokenBucket(client_events_per_s, client_events_burst)
        self._log = _log.bind(session_id=session_id, user_id=user.user_id)
        self.restore(setup)

    # -- resume state ------------------------------------------------------------------------

    def snapshot(self) -> SessionSnapshot:
        """Everything a resume needs, as plain data for the store."""
        return SessionSnapshot(
            provider=self.provider,
            mode=self.mode,
            input_rate=self.input_rate,
            output_rate=self.output_rate,
            enabled_tools=None if self.enabled is None else tuple(sorted(self.enabled)),
            instructions=self.instructions,
            model=self.model,
            voice=self.voice,
            locale=self.locale,
            tool_dialect=self.tool_dialect,
            turn_number=self.turn.number,
            retrieval_calls=self.turn.retrieval_calls,
            rounds=self.turn.rounds,
            last_user_text=self.turn.last_user_text,
            pending_confirmations=tuple(self.book.pending()),
            pending_messages=tuple(self.intents.pending_messages),
            history=tuple(self.history),
        )

    def restore(self, snapshot: SessionSnapshot) -> None:
        """Take the conversation state of ``snapshot`` (a resume); the wiring stays."""
        self.mode = snapshot.mode
        self.turn = TurnState(
            number=snapshot.turn_number,
            retrieval_calls=snapshot.retrieval_calls,
            rounds=snapshot.rounds,
            last_user_text=snapshot.last_user_text,
        )
        self.book.restore(list(snapshot.pending_confirmations))
        self.intents.pending_messages = list(snapshot.pending_messages)
        self.history.clear()
        self.history.extend(snapshot.history)

    # -- wiring ------------------------------------------------------------------------------

    def upstream_ready(self) -> None:
        caps = self.transport.capabilities
        self._up_in = StreamResampler(self.input_rate, caps.input_rate)
        self._up_out = StreamResampler(caps.output_rate, self.output_rate)
        self._ms_per_output_byte = 1000 / 2 / caps.output_rate  # PCM16 at the provider's rate
        self.state = transition(self.state, "started")

    def share_event_budget(self, bucket: TokenBucket) -> None:
        """Spend the connection's event budget (its control frames spend from it too)."""
        self._control_events = bucket

    def attach(self, outbound: Outbound) -> None:
        self.outbound = outbound
        if self.state is SessionState.DETACHED:
            self.state = transition(self.state, "resume")

    def detach(self) -> None:
        self.outbound = None
        if self.state is SessionState.ACTIVE:
            self.state = transition(self.state, "detach")

    def caller(self) -> Caller:
        return Caller(
            session_id=self.session_id,
            user_id=self.user.user_id,
            roles=self.user.roles,
            mode="voice" if self.mode == "voice" else "text",
            turn=self.turn.number,
            auth_token=self.user.token,
            tenant=self.user.tenant,
        )

    def call_policy(self) -> CallPolicy:
        mode: Literal["voice", "text"] = "voice" if self.mode == "voice" else "text"
        return CallPolicy(
            registry=self.registry,
            mode=mode,
            roles=frozenset(self.user.roles),
            enabled=self.enabled,
            budget=self._budgets[mode],
        )

    def emit(self, event: ServerEvent) -> None:
        if self.ended.is_set() and not isinstance(event, SessionEnded):
            return  # session.ended is the last event; late upstream events are dropped
        if self.outbound is not None:
            # A response's end follows its audio; session.ended is the very last frame.
            ordered = isinstance(event, ResponseDone | SessionEnded)
            self.outbound.event(encode(event), after_audio=ordered)
            self.metrics.frames.text_out += 1

    def error(self, code: ErrorCode, message: str, event_id: str | None = None) -> None:
        # ProtocolError owns the per-code retryable/fatal defaults.
        self.emit(ErrorEvent.from_error(ProtocolError(code, message, event_id=event_id)))

    # -- client → gateway --------------------------------------------------------------------

    async def on_client_event(self, event: JsonClientEvent | BinaryAudio) -> None:
        now = self.clock.monotonic()
        self.last_activity = now
        if type(event) is BinaryAudio:  # the hot path first
            await self._user_audio(event.pcm, None)
            return
        audio = isinstance(event, BinaryAudio | AudioAppend | AudioPlayback)
        if not audio and not isinstance(event, SessionEnd) and not self._control_events.take(now):
            self.error(
                ErrorCode.RATE_LIMITED,
                f"too many events: at most {self._control_events.rate_per_s:g} per second; "
                "this one was dropped",
                getattr(event, "event_id", None),
            )
            return
        if isinstance(event, BinaryAudio | AudioAppend):
            pcm = event.pcm if isinstance(event, BinaryAudio) else event.audio
            await self._user_audio(pcm, getattr(event, "event_id", None))
        elif isinstance(event, TextSend):
            self.history.append(ConversationItem("user", event.text))
            await self._start_user_turn(event.text)
            await self.transport.send_text(event.text)
        elif isinstance(event, AudioCommit):
            await self._start_user_turn("")
            await self.transport.commit_audio()
        elif isinstance(event, AudioClear):
            await self.transport.clear_audio()
        elif isinstance(event, AudioPlayback):
            # Only the response being played counts (truncation needs no other): a client cannot
            # grow anything with made-up ids.
            for r in (self._response, self._last_spoken):
                if r is not None and event.response_id == r.response_id:
                    r.played_ms = event.played_ms
        elif isinstance(event, ResponseCancel):
            await self.transport.cancel_response()
        elif isinstance(event, ConfirmationRespond):
            await self._confirmation(event)
        elif isinstance(event, SessionUpdate):
            await self._update(event)
        elif isinstance(event, SessionEnd):
            await self.end(EndReason.CLIENT, event.reason)
        elif isinstance(event, Ping):
            self.emit(Pong(id=event.id))
        elif isinstance(event, SessionStart):
            self.error(ErrorCode.ALREADY_STARTED, "the session has already started", event.event_id)

    def audio_now(self, pcm: bytes) -> bool:
        """A client's binary audio frame on the hot path, as the socket parses it: True when
        handled here; False when it must take ``on_client_event`` (not in voice mode, a
        message waiting for the user's next turn, or an upstream that cannot take it now)."""
        direct = self._direct
        if (
            direct is None
            or self.mode != "voice"
            or self.intents.pending_messages
            or not direct.accepts_audio_now()
        ):
            return False
        self.last_activity = self.clock.monotonic()
        assert self._up_in is not None
        resampled = self._up_in.process(pcm)
        if resampled:
            direct.send_audio_now(resampled)
        return True

    async def _user_audio(self, pcm: bytes, event_id: str | None) -> None:
        if self.mode != "voice":
            self.error(ErrorCode.INVALID_EVENT, "audio is accepted in voice mode only", event_id)
            return
        if self.intents.pending_messages and is_speech(pcm):
            # The user starts talking. A whole utterance in one burst may be answered inside
            # send_audio, before the upstream reports speech, so queued messages go first.
            await self._deliver_pending_messages()
        assert self._up_in is not None
        resampled = self._up_in.process(pcm)
        if resampled:
            await self.transport.send_audio(resampled)

    async def _start_user_turn(self, text: str) -> None:
        self.turn.start(text)
        await self._deliver_pending_messages()

    async def _deliver_pending_messages(self) -> None:
        # SET_PENDING_MESSAGE: given to the model at the start of the next user turn, not before.
        for message in self.intents.take_pending_messages():
            await self.transport.add_context(message)

    async def _confirmation(self, event: ConfirmationRespond) -> None:
        problem = await self.tools.respond(
            event.confirmation_id,
            event.decision.value == "approve",
            None if event.parameters is None else dict(event.parameters),
        )
        if problem is not None:
            self.error(*problem, event.event_id)

    def track(self, work: Coroutine[Any, Any, None]) -> None:
        """Run tool work beside the readers; cancelled when the session ends."""
        task = asyncio.create_task(self._logged(work))
        self._tool_tasks.add(task)
        task.add_done_callback(self._tool_tasks.discard)

    async def _logged(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception:
            self._log.exception("tool_work_failed")

    async def _update(self, event: SessionUpdate) -> None:
        mode = None if event.mode is None else event.mode.value
        if mode is not None and mode not in self.transport.capabilities.modes:
            self.error(
                ErrorCode.FORBIDDEN,
                f"mode: the {self.provider} provider does not support {mode} sessions",
                event.event_id,
            )
            return
        if mode is not None:
            self.mode = mode
        if event.instructions is not None:
            self.instructions = event.instructions
        await self.transport.update(
            mode="voice" if mode == "voice" else ("text" if mode else None),
            instructions=None
            if event.instructions is None
            else self.registry.model_instructions(
                event.instructions, self.user.roles, self.enabled
            ),
        )
        self.emit(SessionUpdated(mode=Mode(self.mode)))

    # -- upstream → gateway ------------------------------------------------------------------

    async def run_upstream(self) -> None:
        direct = self._direct
        if direct is not None:
            direct.set_audio_sink(self._take_audio)
        try:
            async for event in self.transport.events():
                if self.ended.is_set():
                    return
                self._upstream_busy = True
                try:
                    await self._on_upstream(event)
                finally:
                    self._upstream_busy = False
        except Exception:
            self._log.exception("upstream_reader_crashed")
            await self.end(EndReason.ERROR, "internal error while reading the upstream")
            return
        finally:
            if direct is not None:
                direct.set_audio_sink(None)
        if not self.ended.is_set():
            await self.end(EndReason.UPSTREAM_FAILED, "the upstream closed")

    def _take_audio(self, event: up.AudioDelta) -> bool:
        """The transport's audio sink: handled now, exactly as run_upstream would handle it
        next, unless run_upstream is busy with an earlier event (then it is queued)."""
        if self._upstream_busy or self.ended.is_set():
            return False
        self._audio_delta(event, self.clock.monotonic())
        return True

    def _audio_delta(self, event: up.AudioDelta, now: float) -> None:
        r = self._response
        if r is None or r.interrupted or self.mode != "voice":
            return
        if self.intents.audio.active(now):  # SUPPRESS_AUDIO
            return
        assert self._up_out is not None
        pcm = self._up_out.process(event.pcm)
        r.audio_ms += len(event.pcm) * self._ms_per_output_byte
        if pcm and self.outbound is not None:
            if r.first_audio_at is None:
                r.first_audio_at = now
            self.outbound.audio(pcm)
            self.metrics.frames.audio_out += 1

    async def _on_upstream(self, event: up.UpstreamEvent) -> None:
        now = self.clock.monotonic()
        if isinstance(event, up.AudioDelta):
            self._audio_delta(event, now)
        elif isinstance(event, up.ResponseStarted):
            await self._finish_held_responses()
            self._response = _Response(event.response_id)
            self.emit(ResponseStarted(response_id=event.response_id))
        elif isinstance(event, up.TextDelta):
            if self._response is not None:
                self._response.text.append(event.delta)
            if not self.intents.transcript_suppressed(now):
                self.emit(TextDelta(response_id=event.response_id, delta=event.delta))
        elif isinstance(event, up.TranscriptDelta):
            if event.role == "assistant" and self._response is not None:
                self._response.text.append(event.delta)
            if not self.intents.transcript_suppressed(now):
                self.emit(
                    TranscriptDelta(
                        role=TranscriptRole(event.role),
                        delta=event.delta,
                        response_id=event.response_id if event.role == "assistant" else None,
                    )
                )
        elif isinstance(event, up.TranscriptDone):
            if not self.intents.transcript_suppressed(now):
                self.emit(
                    TranscriptDone(
                        role=TranscriptRole(event.role),
                        text=event.text,
                        response_id=event.response_id if event.role == "assistant" else None,
                    )
                )
        elif isinstance(event, up.UserInputTranscribed):
            self.turn.heard(event.text)
            if event.text:
                self.history.append(ConversationItem("user", event.text))
        elif isinstance(event, up.SpeechStarted):
            await self._barge_in()
        elif isinstance(event, up.ToolCallsRequested):
            task = asyncio.create_task(self._run_batch(event))
            self._batches.setdefault(event.response_id, set()).add(task)
            self._tool_tasks.add(task)
            task.add_done_callback(self._tool_tasks.discard)
        elif isinstance(event, up.ToolCallsCancelled):
            self.tools.cancel(event.call_ids)
        elif isinstance(event, up.ResponseDone):
            if event.response_id in self._batches:
                self._held_done[event.response_id] = event
            else:
                await self._response_done(event)
        elif isinstance(event, up.UpstreamFailed):
            await self.end(EndReason.UPSTREAM_FAILED, event.message)
        elif isinstance(event, up.UpstreamRecovered):
            self.metrics.upstream_reconnects.inc()
        elif isinstance(event, up.UpstreamNotice):
            self._log.info("upstream_notice", code=event.code, detail=event.message)
            self.emit(
                ErrorEvent.from_error(
                    ProtocolError(
                        ErrorCode.UPSTREAM_ERROR,
                        f"the model reported an error: {event.message}",
                        retryable=event.retryable,
                    )
                )
            )

    async def _finish_held_responses(self) -> None:
        """A new response may not start before a cancelled one's ``response.done``: if that is
        held for its tool batch, still finishing the calls just cancelled, wait for it. (A
        response that completed normally may overlap the next, as providers allow.)"""
        running = [
            task
            for rid, done in self._held_done.items()
            if done.status == "cancelled"
            for task in self._batches.get(rid, ())
        ]
        if running:
            await asyncio.wait(running, timeout=HELD_RESPONSE_WAIT_S)

    async def _run_batch(self, event: up.ToolCallsRequested) -> None:
        try:
            await self.tools.handle_batch(event)  # answers every call, whatever fails
        finally:
            await self._batch_finished(event.response_id)

    async def _batch_finished(self, response_id: str) -> None:
        running = self._batches.get(response_id, set())
        running.discard(asyncio.current_task())
        if running:
            return  # a later batch of the same response still reports first
        self._batches.pop(response_id, None)
        held = self._held_done.pop(response_id, None)
        if held is not None and not self.ended.is_set():
            await self._response_done(held)

    async def _barge_in(self) -> None:
        r = self._response
        interrupt = r is not None and not r.interrupted
        if interrupt:
            assert r is not None
            r.interrupted = True
            if self._up_out is not None:
                self._up_out.reset()
        # Before any await: no speech the user is talking over may follow speech.started, not
        # even the queued end of a response that has already finished arriving.
        if self.outbound is not None:
            self.outbound.discard_audio()
        self.emit(SpeechStarted())
        await self._start_user_turn("")
        target = r if interrupt else (self._last_spoken if r is None else None)
        if target is None or not self.transport.capabilities.truncation:
            return
        heard = self._heard_ms(target)
        if not interrupt and heard >= int(target.audio_ms):
            return  # it had played to its end before the user spoke
        self._last_spoken = None  # cut once
        await self.transport.truncate(target.response_id, heard)

    def _heard_ms(self, r: _Response) -> int:
        """What the user heard of ``r``: the client's report, else the time since its audio
        started (a client cannot play faster than real time); never more than was sent."""
        if r.played_ms is not None:
            heard = float(r.played_ms)
        elif r.first_audio_at is not None:
            heard = (self.clock.monotonic() - r.first_audio_at) * 1000
        else:
            heard = 0.0
        return int(max(0.0, min(heard, r.audio_ms)))

    async def _response_done(self, event: up.ResponseDone) -> None:
        r = self._response
        if r is not None and r.response_id != event.response_id:
            r = None  # e.g. a held tool response ending while the next reply is in progress
        status = event.status
        if r is not None:
            if r.interrupted and status == "completed":
                status = "interrupted"
            if self._up_out is not None and not r.interrupted:
                tail = self._up_out.flush()
                if tail and self.outbound is not None:
                    self.outbound.audio(tail)
            self._response = None
            if r.audio_ms > 0 and not r.interrupted:
                self._last_spoken = r
        text = "" if r is None else "".join(r.text)
        if text:
            self.history.append(ConversationItem("assistant", text))
        if self.intents.transcript_suppressed(self.clock.monotonic()):
            text = ""
        self.emit(
            ResponseDone(
                response_id=event.response_id,
                status=ResponseStatus(status),
                text=text,
                usage=None if event.usage is None else dict(event.usage),
            )
        )
        if self.intents.response_ended():
            await self.end(EndReason.INTENT)

    # -- intents, audit, end -----------------------------------------------------------------

    def apply_intents(self, intents: Iterable[Intent]) -> None:
        self.intents.apply(
            intents,
            mode=self.mode,
            response_active=self._response is not None,
            now=self.clock.monotonic(),
        )

    async def end(self, reason: EndReason, detail: str | None = None) -> None:
        if self.ended.is_set():
            return
        self.state = transition(self.state, "end")
        self.end_reason = reason
        self.ended.set()
        self.metrics.sessions_ended.labels(reason.value).inc()
        self.emit(SessionEnded(reason=reason, detail=detail))
        self.runner.cancel_all()
        for task in list(self._tool_tasks):
            if task is not asyncio.current_task():
                task.cancel()
        # The close runs in its own task: whoever called end() may be cancelled, the upstream
        # (a billed provider socket) still gets closed.
        self._closing = asyncio.create_task(self._close_upstream(reason))
        await asyncio.shield(self._closing)

    async def _close_upstream(self, reason: EndReason) -> None:
        try:
            await asyncio.wait_for(self.transport.close(), UPSTREAM_CLOSE_TIMEOUT_S)
        except Exception:
            self._log.warning("upstream_close_failed")
        self._log.info("session_ended", reason=reason.value)

    async def closed(self) -> None:
        """Wait until an ended session's upstream is closed."""
        if self._closing is not None:
            await asyncio.shield(self._closing)

    def idle_for(self) -> float:
        return self.clock.monotonic() - self.last_activity

    def age(self) -> float:
        return self.clock.monotonic() - self.started_at
