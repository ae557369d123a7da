"""The client → upstream half of a session: each client event type has its handler (a table),
and a started voice session's audio frames have a hot path that takes no task switch.

The hot path (``audio_now``) declines what it cannot do exactly as the event path would: a frame
it declines takes ``handle``, which says what is wrong with it (an odd or empty frame is
``invalid_audio`` there, never an exception here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from gateway.audio import is_speech
from gateway.audio.convert import AudioConverter, bytes_per_sample
from gateway.clock import Clock
from gateway.protocol import (
    AudioAppend,
    AudioClear,
    AudioCommit,
    AudioFormat,
    AudioPlayback,
    BinaryAudio,
    ClientToolOutput,
    ConfirmationRespond,
    EndReason,
    ErrorCode,
    JsonClientEvent,
    Mode,
    Ping,
    Pong,
    ResponseCancel,
    ResponseCreate,
    ServerEvent,
    SessionEnd,
    SessionStart,
    SessionUpdate,
    SessionUpdated,
    TextSend,
    tool_choice_wire,
    turn_detection_wire,
)
from gateway.registry import Registry
from gateway.session.playback import PlaybackCursor
from gateway.session.ratelimit import TokenBucket
from gateway.session.snapshot import Conversation, Profile
from gateway.session.tool_choice import offered_tools, tool_choice_problem
from gateway.session.toolflow import ToolFlow
from gateway.session.trace import SessionTrace
from transports.base import Capabilities, ConversationItem, DirectAudio, Transport

__all__ = ["ClientEvents", "ClientHost"]

# Events that are not counted against the control-event budget.
_UNCOUNTED = (BinaryAudio, AudioAppend, AudioPlayback, SessionEnd)


class ClientHost(Protocol):
    """What the client half needs of its session."""

    @property
    def roles(self) -> tuple[str, ...]: ...

    def emit(self, event: ServerEvent) -> None: ...

    def error(self, code: ErrorCode, message: str, event_id: str | None = None) -> None: ...

    async def end(self, reason: EndReason, detail: str | None = None) -> None: ...

    def boundary(self) -> None: ...

    async def turn_may_start(self) -> bool: ...


class ClientEvents:
    def __init__(
        self,
        host: ClientHost,
        *,
        profile: Profile,
        conversation: Conversation,
        tools: ToolFlow,
        transport: Transport,
        registry: Registry,
        clock: Clock,
        cursor: PlaybackCursor,
        events_per_s: float,
        events_burst: int,
        trace: SessionTrace | None = None,
    ) -> None:
        self._host = host
        self._trace = trace
        self._profile = profile
        self._conversation = conversation
        self._intents = conversation.intents  # restored in place: the same object for good
        self._tools = tools
        self._transport = transport
        self._registry = registry
        self._clock = clock
        self._cursor = cursor
        self.budget = TokenBucket(events_per_s, events_burst)
        self.last_activity = clock.monotonic()
        self._in: AudioConverter | None = None
        self._usage = conversation.usage  # restored in place, as the intents
        self._in_ms_per_byte = 0.0
        self._capabilities: Capabilities | None = None
        self._direct = transport if isinstance(transport, DirectAudio) else None
        self._input_closed = False
        self._handlers: dict[type, Callable[[Any], Awaitable[None]]] = {
            AudioAppend: self._audio_append,
            TextSend: self._text,
            AudioCommit: self._commit,
            ResponseCreate: self._respond_now,
            AudioClear: self._clear,
            AudioPlayback: self._playback,
            ResponseCancel: self._cancel,
            ConfirmationRespond: self._confirmation,
            ClientToolOutput: self._client_tool_output,
            SessionUpdate: self._update,
            SessionEnd: self._end,
            Ping: self._ping,
            SessionStart: self._start_again,
        }

    def upstream_ready(self, capabilities: Capabilities) -> None:
        profile = self._profile
        self._capabilities = capabilities
        self._in = AudioConverter(
            profile.encoding, profile.input_rate, capabilities.encoding, capabilities.input_rate
        )
        self._in_ms_per_byte = 1000 / (profile.input_rate * bytes_per_sample(profile.encoding))

    # -- the hot path ---------------------------------------------------------------------------

    def audio_now(self, pcm: bytes, encoded: str | None = None) -> bool:
        """A binary frame as the socket parses it: True when handled here; False when it must
        take ``handle`` (a frame that is not whole samples, not voice mode, a message waiting
        for the user's next turn, or an upstream that cannot take it now). ``encoded``: the
        frame as the client's base64, passed on when the audio needs no conversion."""
        direct = self._direct
        if (
            direct is None
            or not pcm
            or len(pcm) & 1
            or self._profile.mode != "voice"
            or self._intents.pending_messages
            or not direct.accepts_audio_now()
        ):
            return False
        self.last_activity = self._clock.monotonic()
        self._usage.audio_in_ms += len(pcm) * self._in_ms_per_byte
        assert self._in is not None
        resampled = self._in.process(pcm)
        if resampled is pcm:
            direct.send_audio_now(pcm, encoded)
        elif resampled:
            direct.send_audio_now(resampled)
        return True

    def close_input(self) -> None:
        """Nothing the user says or sends reaches the model any more (the session is about to
        end); the hot path is left for the slow one, which drops the audio."""
        self._direct = None
        self._input_closed = True

    # -- every other event --------------------------------------------------------------------

    async def handle(self, event: JsonClientEvent | BinaryAudio) -> None:
        now = self._clock.monotonic()
        self.last_activity = now
        if type(event) is BinaryAudio:  # the hot path's slow twin first
            await self._user_audio(event.pcm, None)
            return
        if (
            not isinstance(event, _UNCOUNTED)
            and not self._answers_a_waiting_call(event)
            and not self.budget.take(now)
        ):
            self._host.error(
                ErrorCode.RATE_LIMITED,
                f"too many events: at most {self.budget.rate_per_s:g} per second; "
                "this one was dropped",
                getattr(event, "event_id", None),
            )
            return
        handler = self._handlers.get(type(event))
        if handler is not None:
            await handler(event)

    def _answers_a_waiting_call(self, event: JsonClientEvent) -> bool:
        """The answer to a call the client was asked is never dropped by the event budget (a
        bridge cannot ask it again); an answer to no waiting call spends from it."""
        return type(event) is ClientToolOutput and self._tools.client_calls.book.is_waiting(
            event.call_id
        )

    async def start_user_turn(self, text: str) -> bool:
        """False: the session's budget has run out, the turn is not given to the model (the
        session is ending)."""
        if self._input_closed or not await self._host.turn_may_start():
            return False
        self._conversation.turn.start(text)
        await self._deliver_pending_messages()
        return True

    async def _deliver_pending_messages(self) -> None:
        # SET_PENDING_MESSAGE: given to the model at the start of the next user turn, not before.
        for message in self._conversation.intents.take_pending_messages():
            await self._transport.add_context(message)

    async def _user_audio(self, pcm: bytes, event_id: str | None) -> None:
        if self._profile.mode != "voice":
            self._host.error(
                ErrorCode.INVALID_EVENT, "audio is accepted in voice mode only", event_id
            )
            return
        assert self._in is not None
        if self._input_closed:
            return  # the session is ending (its budget ran out): nothing more reaches the model
        if self._conversation.intents.pending_messages and is_speech(self._in.as_pcm16(pcm)):
            # The user starts talking. A whole utterance in one burst may be answered inside
            # send_audio, before the upstream reports speech, so queued messages go first.
            await self._deliver_pending_messages()
        self._usage.audio_in_ms += len(pcm) * self._in_ms_per_byte
        resampled = self._in.process(pcm)
        if resampled:
            await self._transport.send_audio(resampled)

    async def _audio_append(self, event: AudioAppend) -> None:
        await self._user_audio(event.audio, event.event_id)

    async def _text(self, event: TextSend) -> None:
        if self._trace is not None:
            self._trace.turn_started("text")
            self._trace.user_said(event.text)
        self._conversation.history.append(ConversationItem("user", event.text))
        self._host.boundary()  # saved before the reply: a crash loses at most this turn
        if await self.start_user_turn(event.text):
            await self._transport.send_text(event.text)

    async def _commit(self, event: AudioCommit) -> None:
        if not event.respond:  # committed only: the turn starts when the answer is asked for
            await self._transport.commit_audio(respond=False)
            return
        if self._trace is not None:
            self._trace.turn_started("commit")
        if await self.start_user_turn(""):
            await self._transport.commit_audio()

    async def _respond_now(self, _: ResponseCreate) -> None:
        if self._trace is not None:
            self._trace.turn_started("commit")
        if await self.start_user_turn(""):
            await self._transport.request_response()

    async def _clear(self, _: AudioClear) -> None:
        await self._transport.clear_audio()

    async def _playback(self, event: AudioPlayback) -> None:
        self._cursor.played(event.response_id, event.played_ms)

    async def _cancel(self, _: ResponseCancel) -> None:
        await self._transport.cancel_response()

    async def _confirmation(self, event: ConfirmationRespond) -> None:
        problem = await self._tools.approvals.respond(
            event.confirmation_id,
            event.decision.value == "approve",
            None if event.parameters is None else dict(event.parameters),
        )
        if problem is not None:
            self._host.error(*problem, event.event_id)

    async def _client_tool_output(self, event: ClientToolOutput) -> None:
        problem = self._tools.client_calls.answer(event.call_id, event.output)
        if problem is not None:
            self._host.error(*problem, event.event_id)

    async def _update(self, event: SessionUpdate) -> None:
        profile = self._profile
        mode = None if event.mode is None else event.mode.value
        if mode is not None and mode not in self._transport.capabilities.modes:
            self._host.error(
                ErrorCode.FORBIDDEN,
                f"mode: the {profile.provider} provider does not support {mode} sessions",
                event.event_id,
            )
            return
        if event.tool_choice is not None and not self._tool_choice_allowed(event):
            return
        if event.input_rate is not None and not await self._switch_input_rate(event):
            return
        if mode is not None:
            profile.mode = mode
        if event.instructions is not None:
            profile.instructions = event.instructions
        turn_options = event.turn_detection is not None or event.tool_choice is not None
        if event.turn_detection is not None:
            profile.turn_detection = event.turn_detection
        if event.tool_choice is not None:
            profile.tool_choice = event.tool_choice
        instructions = (
            None
            if event.instructions is None
            else self._registry.model_instructions(
                event.instructions, self._host.roles, profile.enabled
            )
        )
        if mode is not None or instructions is not None or turn_options:
            await self._transport.update(
                mode="voice" if mode == "voice" else ("text" if mode else None),
                instructions=instructions,
                turn_detection=event.turn_detection,
                tool_choice=event.tool_choice,
            )
        if turn_options:
            self._host.boundary()  # a resume keeps them
        audio = None
        if event.input_rate is not None:
            audio = AudioFormat(input_rate=profile.input_rate, output_rate=profile.output_rate)
        self._host.emit(
            SessionUpdated(
                mode=Mode(profile.mode),
                audio=audio,
                turn_detection=turn_detection_wire(profile.turn_detection)
                if turn_options
                else None,
                tool_choice=tool_choice_wire(profile.tool_choice) if turn_options else None,
            )
        )

    def _tool_choice_allowed(self, event: SessionUpdate) -> bool:
        """A ``tool_choice`` the session can apply; else the update is refused whole."""
        assert event.tool_choice is not None
        profile = self._profile
        offered = offered_tools(
            self._registry, self._host.roles, profile.enabled, profile.client_tools
        )
        problem = tool_choice_problem(
            event.tool_choice, offered, profile.provider, profile.tool_dialect
        )
        if problem is not None:
            self._host.error(ErrorCode.INVALID_EVENT, f"session.update: {problem}", event.event_id)
        return problem is None

    async def _switch_input_rate(self, event: SessionUpdate) -> bool:
        """The client's audio is at ``event.input_rate`` from now on: what the converter holds
        of the old rate goes up first, then a converter for the new rate takes over."""
        profile, capabilities = self._profile, self._capabilities
        if profile.encoding != "pcm16" or capabilities is None:
            self._host.error(
                ErrorCode.INVALID_EVENT,
                "session.update: 'audio.input_rate' cannot change in this session",
                event.event_id,
            )
            return False
        assert event.input_rate is not None
        if self._in is not None:
            tail = self._in.flush()
            if tail:
                await self._transport.send_audio(tail)
        profile.input_rate = event.input_rate
        self.upstream_ready(capabilities)  # the converter from the new rate
        self._host.boundary()  # a resume keeps the new rate
        return True

    async def _end(self, event: SessionEnd) -> None:
        await self._host.end(EndReason.CLIENT, event.reason)

    async def _ping(self, event: Ping) -> None:
        self._host.emit(Pong(id=event.id))

    async def _start_again(self, event: SessionStart) -> None:
        self._host.error(
            ErrorCode.ALREADY_STARTED, "the session has already started", event.event_id
        )
