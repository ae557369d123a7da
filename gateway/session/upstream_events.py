"""The upstream → client half of a session: the transport's neutral events, each type to its
handler (a table; a type without one is ignored, as providers add events without notice).

Audio deltas come first and fast: from the transport's sink as it reads them (no task switch)
when nothing is queued before them, else from the reader loop. Responses are tracked by a pure
``PlaybackCursor`` (what the client heard, for truncation on barge-in); a response whose tool
batch still runs has its ``response.done`` held by the tool flow until the calls are reported.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from gateway.audio.convert import AudioConverter, bytes_per_sample
from gateway.clock import Clock
from gateway.observability import Metrics
from gateway.protocol import (
    EndReason,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    ResponseDone,
    ResponseStarted,
    ResponseStatus,
    ServerEvent,
    SpeechStarted,
    TextDelta,
    TranscriptDelta,
    TranscriptDone,
    TranscriptRole,
)
from gateway.session.client_output import ClientOutput
from gateway.session.playback import PlaybackCursor
from gateway.session.snapshot import Conversation, Profile
from gateway.session.tool_notes import call_note
from gateway.session.toolflow import ToolFlow
from gateway.session.trace import SessionTrace
from gateway.usage import UsageReporter, token_counts
from transports import events as up
from transports.base import Capabilities, ConversationItem, DirectAudio, Transport

__all__ = ["ResponseHost", "UpstreamEvents"]

_log = structlog.get_logger("session.upstream")


class ResponseHost(Protocol):
    """What the upstream half needs of its session."""

    ended: asyncio.Event

    @property
    def outbound(self) -> ClientOutput | None: ...

    def emit(self, event: ServerEvent) -> None: ...

    async def end(self, reason: EndReason, detail: str | None = None) -> None: ...

    async def start_user_turn(self, text: str) -> bool: ...

    def boundary(self) -> None: ...

    def upstream_replaced(self, event: up.UpstreamReplaced) -> None: ...


class UpstreamEvents:
    def __init__(
        self,
        host: ResponseHost,
        *,
        profile: Profile,
        conversation: Conversation,
        tools: ToolFlow,
        transport: Transport,
        metrics: Metrics,
        clock: Clock,
        usage: UsageReporter,
        trace: SessionTrace | None = None,
    ) -> None:
        self._host = host
        self._trace = trace
        self._usage = usage
        self._profile = profile
        self._conversation = conversation
        self._intents = conversation.intents  # restored in place: the same object for good
        self._tools = tools
        self._transport = transport
        self._metrics = metrics
        self._clock = clock
        self.cursor = PlaybackCursor()
        # Set while the model is not replying (no response in progress, none held for tools).
        self.idle = asyncio.Event()
        self.idle.set()
        self._out: AudioConverter | None = None
        self._ms_per_byte = 0.0
        # run() is handling an event: an audio delta must wait its turn in the queue.
        self._busy = False
        self._direct = transport if isinstance(transport, DirectAudio) else None
        self._handlers: dict[type, Callable[[Any], Awaitable[None]]] = {
            up.ResponseStarted: self._response_started,
            up.TextDelta: self._text_delta,
            up.TranscriptDelta: self._transcript_delta,
            up.TranscriptDone: self._transcript_done,
            up.UserInputTranscribed: self._user_transcribed,
            up.SpeechStarted: self._speech_started,
            up.ToolCallsRequested: self._tool_calls,
            up.ToolCallsCancelled: self._tool_calls_cancelled,
            up.ResponseDone: self._response_ended,
            up.UpstreamFailed: self._failed,
            up.UpstreamRecovered: self._recovered,
            up.UpstreamNotice: self._notice,
            up.UpstreamReplaced: self._replaced,
        }

    def upstream_ready(self, capabilities: Capabilities) -> None:
        profile = self._profile
        self._out = AudioConverter(
            capabilities.encoding, capabilities.output_rate, profile.encoding, profile.output_rate
        )
        # The provider's audio: PCM16 or G.711 at its rate.
        sample_bytes = bytes_per_sample(capabilities.encoding)
        self._ms_per_byte = 1000 / sample_bytes / capabilities.output_rate

    async def run(self) -> None:
        """Read the transport until it ends; the session ends with it."""
        host, direct = self._host, self._direct
        if direct is not None:
            direct.set_audio_sink(self._take_audio)
        try:
            async for event in self._transport.events():
                if host.ended.is_set():
                    return
                self._busy = True
                try:
                    if type(event) is up.AudioDelta:
                        self._audio_delta(event, self._clock.monotonic())
                    else:
                        handler = self._handlers.get(type(event))
                        if handler is not None:
                            await handler(event)
                finally:
                    self._busy = False
        except Exception:
            _log.exception("upstream_reader_crashed")
            await host.end(EndReason.ERROR, "internal error while reading the upstream")
            return
        finally:
            if direct is not None:
                direct.set_audio_sink(None)
        if not host.ended.is_set():
            await host.end(EndReason.UPSTREAM_FAILED, "the upstream closed")

    def _take_audio(self, event: up.AudioDelta) -> bool:
        """The transport's audio sink: handled now, exactly as ``run`` would handle it next,
        unless ``run`` is busy with an earlier event (then it is queued)."""
        if self._busy or self._host.ended.is_set():
            return False
        self._audio_delta(event, self._clock.monotonic())
        return True

    def _audio_delta(self, event: up.AudioDelta, now: float) -> None:
        # Attribute reads only: this runs for every audio frame of every session.
        response = self.cursor.current
        if response is None or response.interrupted or self._profile.mode != "voice":
            return
        if self._intents.audio.active(now):  # SUPPRESS_AUDIO
            return
        assert self._out is not None
        pcm = self._out.process(event.pcm)
        response.audio_ms += len(event.pcm) * self._ms_per_byte
        outbound = self._host.outbound
        if pcm and outbound is not None:
            if response.first_audio_at is None:
                response.first_audio_at = now
            # The upstream's base64 holds only for the very bytes it came with (no conversion).
            outbound.audio(pcm, event.encoded if pcm is event.pcm else None)
            self._metrics.frames.audio_out += 1

    # -- responses --------------------------------------------------------------------------------

    async def _response_started(self, event: up.ResponseStarted) -> None:
        await self._tools.wait_for_cancelled()
        self.idle.clear()
        self.cursor.start(event.response_id).aside = event.aside
        if self._trace is not None:
            unprompted = "speech" if self._profile.mode == "voice" else "model"
            self._trace.response_started(
                event.response_id,
                aside=event.aside,
                unprompted=unprompted,
                model=self._usage.model(),
            )
        self._host.emit(ResponseStarted(response_id=event.response_id))

    async def _text_delta(self, event: up.TextDelta) -> None:
        if self.cursor.current is not None:
            self.cursor.current.text.append(event.delta)
        if not self._conversation.intents.transcript_suppressed(self._clock.monotonic()):
            self._host.emit(TextDelta(response_id=event.response_id, delta=event.delta))

    async def _transcript_delta(self, event: up.TranscriptDelta) -> None:
        assistant = event.role == "assistant"
        if assistant and self.cursor.current is not None:
            self.cursor.current.text.append(event.delta)
        if not self._conversation.intents.transcript_suppressed(self._clock.monotonic()):
            self._host.emit(
                TranscriptDelta(
                    role=TranscriptRole(event.role),
                    delta=event.delta,
                    response_id=event.response_id if assistant else None,
                )
            )

    async def _transcript_done(self, event: up.TranscriptDone) -> None:
        if not self._conversation.intents.transcript_suppressed(self._clock.monotonic()):
            self._host.emit(
                TranscriptDone(
                    role=TranscriptRole(event.role),
                    text=event.text,
                    response_id=event.response_id if event.role == "assistant" else None,
                )
            )

    async def _user_transcribed(self, event: up.UserInputTranscribed) -> None:
        self._conversation.turn.heard(event.text)
        trace = self._trace
        if trace is not None and not self._intents.transcript_suppressed(self._clock.monotonic()):
            trace.user_said(event.text)  # the words as the client sees them (content capture)
        if event.text:
            self._conversation.history.append(ConversationItem("user", event.text))
            self._host.boundary()

    async def _speech_started(self, _: up.SpeechStarted) -> None:
        if self._trace is not None:
            self._trace.turn_started("speech")
        barge = self.cursor.barge_in(
            self._clock.monotonic(), can_truncate=self._transport.capabilities.truncation
        )
        if barge.interrupted and self._out is not None:
            self._out.reset()
        # Before any await: no speech the user is talking over may follow speech.started, not
        # even the queued end of a response that has already finished arriving.
        outbound = self._host.outbound
        if outbound is not None:
            outbound.discard_audio()
        self._host.emit(SpeechStarted())
        await self._host.start_user_turn("")
        if barge.truncate is not None:
            await self._transport.truncate(*barge.truncate)

    async def _response_ended(self, event: up.ResponseDone) -> None:
        # Counted now: a response held for its calls may never be finished (the session ends).
        self._usage.response_reported(event.usage)
        if not self._tools.hold(event, self.finish_response):
            await self.finish_response(event)

    async def finish_response(self, event: up.ResponseDone) -> None:
        host = self._host
        if host.ended.is_set():
            return
        spoken, status = self.cursor.done(event.response_id, event.status)
        if spoken is not None and spoken.audio_ms:
            self._usage.audio_out(spoken.audio_ms)
        if self.cursor.current is None:
            self.idle.set()
        if spoken is not None and not spoken.interrupted and self._out is not None:
            tail = self._out.flush()
            if tail and host.outbound is not None:
                host.outbound.audio(tail)
        text = "" if spoken is None else "".join(spoken.text)
        intents = self._conversation.intents
        if text and not (spoken is not None and spoken.aside):  # a line said aside is not kept
            self._conversation.history.append(ConversationItem("assistant", text))
        if intents.transcript_suppressed(self._clock.monotonic()):
            text = ""
        if self._trace is not None:  # the text as the client gets it (content capture only)
            self._trace.response_done(
                event.response_id,
                status,
                token_counts(event.usage),
                answers_calls=self._transport.capabilities.answers_calls_in_response,
                text=text,
            )
        host.emit(
            ResponseDone(
                response_id=event.response_id,
                status=ResponseStatus(status),
                text=text,
                usage=None if event.usage is None else dict(event.usage),
            )
        )
        if intents.response_ended():
            await host.end(EndReason.INTENT)
            return
        host.boundary()

    # -- tools and the upstream's health -----------------------------------------------------------

    async def _tool_calls(self, event: up.ToolCallsRequested) -> None:
        if self._trace is not None:
            self._trace.tool_calls_requested(event.response_id)
        history = self._conversation.history
        for call in event.calls:  # what a replay to another upstream tells the model
            history.append(ConversationItem("tool", call_note(call.name, call.arguments)))
        self._tools.start_batch(event)

    async def _tool_calls_cancelled(self, event: up.ToolCallsCancelled) -> None:
        self._tools.cancel(event.call_ids)

    async def _failed(self, event: up.UpstreamFailed) -> None:
        await self._host.end(EndReason.UPSTREAM_FAILED, event.message)

    async def _replaced(self, event: up.UpstreamReplaced) -> None:
        """Another upstream took over: what the user heard of the reply being spoken is all
        they hear of it (as for a barge-in, the rest is dropped), and the reply ends
        ``interrupted`` unless its end waits for its tool calls (the new upstream answers those)."""
        current = self.cursor.current
        if current is not None:
            if self.cursor.barge_in(self._clock.monotonic(), can_truncate=False).interrupted:
                if self._out is not None:
                    self._out.reset()
                outbound = self._host.outbound
                if outbound is not None:
                    outbound.discard_audio()
            if not self._tools.holding(current.response_id):
                await self._response_ended(up.ResponseDone(current.response_id, "interrupted"))
        self._host.upstream_replaced(event)

    async def _recovered(self, event: up.UpstreamRecovered) -> None:
        self._metrics.upstream_reconnects.inc()
        if self._trace is not None:
            self._trace.upstream_recovered(event.attempts, event.downtime_s)

    async def _notice(self, event: up.UpstreamNotice) -> None:
        _log.info("upstream_notice", code=event.code, detail=event.message)
        self._host.emit(
            ErrorEvent.from_error(
                ProtocolError(
                    ErrorCode.UPSTREAM_ERROR,
                    f"the model reported an error: {event.message}",
                    retryable=event.retryable,
                )
            )
        )
