"""One client of the OpenAI-compatible endpoint: its GA events made into a gateway session's.

Like the phone bridge, this is a client of one gateway ``Session``: it turns the GA client's
events into ours (``input_audio_buffer.append`` → binary audio, ``commit`` → ``audio.commit``
without a reply, a user message and ``response.create`` → ``text.send``, committed audio and
``response.create`` → ``response.create``, a ``function_call_output`` →
``client_tool.output``, ``response.cancel``, a truncate → ``audio.playback``,
``session.update`` → ours) and the session's output, in order, into GA server events through
the pure ``Translator``. The gateway's own tools run inside the session, under its policy, and
are hidden from the client unless it asked to see them; the client's own tools
(``session.tools``) are the session's ``client_tools``: their calls are the client's to answer.

The session opens as the client connects (``early_session``), its upstream's connect
overlapping the client's own set-up. Until the client's first event that needs the model
(audio, an item, a response), a ``session.update`` shapes it as if it were its start, and its
``session.updated`` goes out once the open session has it; the client's events wait their turn
meanwhile, in order (the socket holds them, and stops reading past ``INBOX_LIMIT``). A start
refused early is answered at the first use. What cannot be done here is refused with an
``error`` event, never by dropping the socket: tools that break the rules of ``client_tools``
(a name of one of the gateway's tools, say), a change of tools or voice once the session is in
use, a system or audio message item, deleting an item the model has already seen.

On OpenAI's WebRTC interface (``webrtc_call``) an ``AudioSink`` takes the session's audio for
the call's track instead of deltas, and the microphone comes in by ``audio_from_track``: a
track sends from the start, silence included, so its audio does not put the session in use
(the client's first ``session.update`` may still reshape it); the user's first speech, or a
reply, does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import orjson
import structlog

from gateway.edges.realtime import client_wire as cw
from gateway.edges.realtime.audio_sink import AudioSink
from gateway.edges.realtime.client_items import FunctionCallOutput, InputAudio, UserMessage
from gateway.edges.realtime.client_tools import ToolCheck, client_tools_of
from gateway.edges.realtime.early_session import EndUnused, SessionOpener
from gateway.edges.realtime.errors import CompatError
from gateway.edges.realtime.opening import AUDIO_RATE, session_start
from gateway.edges.realtime.server_wire import ServerEvent, SessionIds
from gateway.edges.realtime.session_config import SessionPatch, SessionView
from gateway.edges.realtime.translate import Translator
from gateway.edges.realtime.turn_options import turn_changes
from gateway.protocol import (
    AudioClear,
    AudioCommit,
    AudioPlayback,
    BinaryAudio,
    ClientToolOutput,
    Mode,
    ProtocolError,
    ResponseCancel,
    ResponseDone,
    ResponseStarted,
    SessionEnd,
    SessionEnded,
    SessionStart,
    SessionUpdate,
    SpeechStarted,
    TextSend,
)
from gateway.protocol import ResponseCreate as AnswerNow
from gateway.protocol import ServerEvent as GatewayEvent
from gateway.session.client_output import ClientOutput
from gateway.session.outbound import Outbound, as_is
from gateway.session.refusals import StartRefused
from gateway.session.session import Session

__all__ = ["AUDIO_RATE", "CompatBridge", "EndUnused", "StartSession"]

_log = structlog.get_logger("realtime_compat")

SESSION_LIFETIME_S = 30 * 60

StartSession = Callable[[SessionStart, ClientOutput], Awaitable[Session]]
# The socket's synchronous writes: is it writable now (open, nothing unsent), and write one
# text frame's UTF-8.
WriteNow = tuple[Callable[[], bool], Callable[[bytes], None]]


def _unsupported(message: str, event_id: str | None, param: str | None = None) -> CompatError:
    return CompatError("unsupported", message, param=param, event_id=event_id)


class CompatBridge:
    def __init__(
        self,
        send: Callable[[str], Awaitable[None]],
        *,
        model: str,
        provider: str | None,
        start_session: StartSession,
        end_unused: EndUnused,
        max_audio_frames: int,
        check_tools: ToolCheck,
        show_tools: bool = False,
        write_now: WriteNow | None = None,
        alias: bool = False,
        audio_sink: AudioSink | None = None,
    ) -> None:
        """``write_now``: the socket's synchronous writes, for the session's audio (the hot
        path: a delta written as the session hands it over, while nothing waits before it).
        ``alias``: ``model`` names one of the operator's model aliases, which picks the
        upstream. ``audio_sink``: where the session's audio goes instead of deltas."""
        self._send = send
        self._sink = audio_sink
        self._alias = alias
        self._write_now = write_now
        self._provider = provider
        self._check_tools = check_tools
        ids = SessionIds()
        self.translator = Translator(ids=ids, show_tools=show_tools)
        self.view = SessionView(
            id=ids("sess"), model=model, expires_at=int(time.time()) + SESSION_LIFETIME_S
        )
        self.outbound: Outbound[GatewayEvent] = Outbound(
            self._on_session_event,
            self._on_session_audio,
            prepare=as_is,
            max_audio_frames=max_audio_frames,
            ordered=True,
            write_audio_now=None if write_now is None else self._audio_out_now,
            edge="realtime" if audio_sink is None else "realtime-webrtc",
        )
        self._opener = SessionOpener(lambda start: start_session(start, self.outbound), end_unused)
        self._live: Session | None = None  # in use: the client's events go to it
        self._writer: asyncio.Task[None] | None = None
        self._pending_text: list[tuple[str, str]] = []  # (item id, text) not yet sent
        # Audio committed and not answered yet: response.create asks for the answer (a commit
        # only commits, as on OpenAI, whatever the turn detection).
        self._committed_unanswered = False
        # A client tool's output was given: the gateway has the model go on by itself once the
        # calls of its batch are answered (as after its own tools), so response.create is that.
        self._tool_answer_expected = False
        # ... until that reply has ended: a response.create after it is a new request.
        self._tool_reply_started = False
        self.ended = asyncio.Event()
        self.end_reason: str | None = None

    # Lifecycle -------------------------------------------------------------------------------

    @property
    def session(self) -> Session | None:
        """The gateway session open for this socket (in use or not yet)."""
        return self._opener.session

    async def open(self) -> None:
        """``session.created``, and the session opening meanwhile (``early_session``)."""
        self._writer = asyncio.create_task(self.outbound.run())
        await self._emit(self.translator.session_created(self.view))
        self._opener.open(self._wanted())

    async def close(self) -> None:
        """The session ends with the socket (one still opening once it is open)."""
        session = await self._opener.close()
        if session is not None and not session.ended.is_set():
            await session.on_client_event(SessionEnd(reason="the client closed the socket"))
        self.outbound.close()
        if self._writer is not None:
            try:
                await asyncio.wait_for(self._writer, timeout=5)
            except (TimeoutError, ConnectionError):
                self._writer.cancel()

    def _wanted(self) -> SessionStart:
        return session_start(self.view, self._provider, self._check_tools, alias=self._alias)

    async def _started(self) -> Session:
        """The session in use, made what the client's session shows (``StartRefused``: the
        answer to its start)."""
        if self._live is None:
            self._live = await self._opener.in_use(self._wanted())
        return self._live

    # Client → session --------------------------------------------------------------------------

    def audio_in_now(self, frame: str) -> bool:
        """The hot path of ``input_audio_buffer.append`` (the socket's ``direct_text``): once
        the session is open as the client asked, a well-formed append is handed to it at once,
        as ``on_client_text`` would. Anything else is False, and takes ``on_client_text``, whose
        decoder refuses it with OpenAI's error (``append_audio`` takes no frame that
        ``decode_client_event`` refuses, and gives the same audio for what it takes)."""
        session = self._live or self._opener.ready()  # open, and what the client asked
        if session is None:
            return False
        appended = cw.append_audio(frame)
        if appended is None:
            return False
        pcm, encoded = appended
        if not session.audio_now(pcm, encoded):
            return False
        self._live = session  # in use from its first audio on, as ``_started`` makes it
        self.translator.input_appended(len(pcm))
        return True

    async def on_client_text(self, frame: str | bytes) -> None:
        """One GA client event; every refusal is an ``error`` event and changes nothing."""
        try:
            event = cw.decode_client_event(frame)
            await self._handle(event)
        except CompatError as error:
            await self._emit([self.translator.error_event(error)])
        except StartRefused as refused:
            await self._start_refused(refused)

    async def _start_refused(self, refused: StartRefused) -> None:
        """No upstream: the client is told, then the socket ends."""
        failure = CompatError(
            str(refused.event.code), refused.event.message, error_type="server_error"
        )
        await self._emit([self.translator.error_event(failure)])
        self.end_reason = "error"
        self.ended.set()

    async def audio_from_track(self, pcm: bytes) -> None:
        """A WebRTC microphone's frame (PCM16, 24 kHz) for the session open as the client
        asked, without putting it in use; dropped while it opens or reshapes. A start refused
        meanwhile is answered as at a first use."""
        session = self._live or self._opener.ready()
        if session is None:
            if self._opener.failed() and not self.ended.is_set():
                try:
                    await self._started()
                except StartRefused as refused:
                    await self._start_refused(refused)
            return
        self.translator.input_appended(len(pcm))
        if not session.audio_now(pcm):
            await session.on_client_event(BinaryAudio(pcm=pcm))

    async def _handle(self, event: cw.ClientEvent) -> None:
        match event:
            case cw.InputAudioAppend(audio=audio):
                session = await self._started()
                if audio:
                    self.translator.input_appended(len(audio))
                    await session.on_client_event(BinaryAudio(pcm=audio))
            case cw.InputAudioCommit(event_id=event_id):
                session = await self._started()
                echoes = self.translator.commit_input(event_id)
                self._committed_unanswered = True
                await self._emit(echoes)
                await session.on_client_event(AudioCommit(respond=False, event_id=event_id))
            case cw.InputAudioClear():
                session = await self._started()
                await self._emit(self.translator.clear_input())
                await session.on_client_event(AudioClear(event_id=event.event_id))
            case cw.ItemCreate():
                await self._create_item(event)
            case cw.ItemDelete():
                await self._delete_item(event)
            case cw.ItemRetrieve():
                await self._emit(self.translator.retrieve_item(event))
            case cw.ItemTruncate():
                truncation = self.translator.truncate_item(event)
                session = await self._started()
                await session.on_client_event(
                    AudioPlayback(
                        response_id=truncation.response_id, played_ms=truncation.played_ms
                    )
                )
                await self._emit(truncation.events)
            case cw.ResponseCreate():
                await self._respond(event)
            case cw.ResponseCancel():
                self.translator.cancel_target(event)  # refused when nothing is active
                session = await self._started()
                await session.on_client_event(ResponseCancel(event_id=event.event_id))
            case cw.SessionUpdate(session=patch):
                await self._update(patch, event.event_id)
            case cw.UnknownEvent(type="output_audio_buffer.clear") if self._sink is not None:
                await self._emit(self._sink.clear())
            case cw.UnknownEvent():
                raise event.error()

    async def _create_item(self, event: cw.ItemCreate) -> None:
        item = event.item
        if isinstance(item, FunctionCallOutput):
            await self._answer_call(event, item)
            return
        if not isinstance(item, UserMessage):
            raise _unsupported(
                "this gateway takes user messages and function_call_output items (no system "
                "messages)",
                event.event_id,
                "item.type",
            )
        if any(isinstance(part, InputAudio) for part in item.content):
            raise _unsupported(
                "send audio with input_audio_buffer.append, not in a message item",
                event.event_id,
                "item.content",
            )
        echoes = self.translator.create_item(event)
        added = echoes[0]["item"]
        self._pending_text.append((str(added["id"]), item.text))
        await self._emit(echoes)

    async def _answer_call(self, event: cw.ItemCreate, item: FunctionCallOutput) -> None:
        """The output of a call of the client's own tools (the translator knows which the model
        made and which are answered): the session's ``client_tool.output``."""
        try:
            output = ClientToolOutput(
                call_id=item.call_id, output=item.output, event_id=event.event_id
            )
        except ProtocolError as error:
            raise CompatError(
                "invalid_value", error.message, param="item.output", event_id=event.event_id
            ) from None
        echoes = self.translator.create_item(event)
        session = await self._started()
        self._tool_answer_expected = True
        self._tool_reply_started = False
        await self._emit(echoes)
        await session.on_client_event(output)

    async def _delete_item(self, event: cw.ItemDelete) -> None:
        pending = [
            i for i, (item_id, _) in enumerate(self._pending_text) if item_id == event.item_id
        ]
        if not pending:
            raise _unsupported(
                "the model has already seen this item; the gateway cannot take it back",
                event.event_id,
                "item_id",
            )
        del self._pending_text[pending[0]]
        await self._emit(self.translator.delete_item(event))

    async def _respond(self, event: cw.ResponseCreate) -> None:
        if self._tool_answer_expected and not self._pending_text:
            self._tool_answer_expected = False  # the reply to the outputs is on its way: this
            return
        self._tool_answer_expected = False
        self.translator.request_response(event)
        if self._pending_text:
            text = "\n".join(text for _, text in self._pending_text)
            self._pending_text.clear()
            self._committed_unanswered = False  # the reply to the text answers it too
            session = await self._started()
            await session.on_client_event(TextSend(text=text, event_id=event.event_id))
        elif self._committed_unanswered:
            self._committed_unanswered = False
            session = await self._started()
            await session.on_client_event(AnswerNow(event_id=event.event_id))
        else:
            raise _unsupported(
                "response.create needs a user message first (conversation.item.create) or "
                "committed audio; this gateway does not start a response on its own",
                event.event_id,
            )

    async def _update(self, patch: SessionPatch, event_id: str | None) -> None:
        session = self._live
        if patch.tools is not None:
            if session is None:
                try:
                    client_tools_of(patch.tools, self._check_tools)
                except CompatError as error:
                    raise error.for_event(event_id) from None
            elif patch.tools != self.view.tools:
                raise _unsupported(
                    "the tools cannot change once the session has started (the model is told "
                    "its tools when it opens): send them in a session.update before the first "
                    "message or audio",
                    event_id,
                    "session.tools",
                )
        try:
            view = self.view.apply(patch)
        except CompatError as error:
            raise error.for_event(event_id) from None
        if session is not None:
            if patch.voice is not None and view.voice != self.view.voice:
                raise _unsupported(
                    "the voice cannot change once the session has started", event_id, "voice"
                )
            mode = None
            if patch.modality is not None and view.modality != self.view.modality:
                mode = Mode.TEXT if view.modality == "text" else Mode.VOICE
            turns, choice = turn_changes(self.view, view)
            if any(c is not None for c in (mode, patch.instructions, turns, choice)):
                await session.on_client_event(
                    SessionUpdate(
                        mode=mode,
                        instructions=patch.instructions,
                        turn_detection=turns,
                        tool_choice=choice,
                        event_id=event_id,
                    )
                )
        self.view = view
        if session is None:  # the early session made this, before session.updated says so
            await self._opener.shape(self._wanted())
        await self._emit(self.translator.session_updated(view))

    # Session → client --------------------------------------------------------------------------

    async def _on_session_event(self, event: GatewayEvent) -> None:
        if self._tool_answer_expected and isinstance(event, ResponseStarted):
            self._tool_reply_started = True
        elif self._tool_reply_started and isinstance(event, ResponseDone):
            # The reply to the outputs has ended, and no response.create came for it.
            self._tool_answer_expected = self._tool_reply_started = False
        if isinstance(event, SessionEnded):
            self.end_reason = event.reason.value
        events = self.translator.on_event(event)
        if self._sink is not None:
            if self._live is None and isinstance(event, SpeechStarted | ResponseStarted):
                self._live = self._opener.ready()  # the track's user spoke, or was answered
            events += self._sink.after_event(event, events)
        await self._emit(events)
        if self.end_reason is not None:
            self.ended.set()

    async def _on_session_audio(self, pcm: bytes) -> None:
        if self._sink is None:
            await self._emit(self.translator.on_audio(pcm))
        else:
            await self._emit([*self.translator.on_audio(pcm, deltas=False), *self._sink.audio(pcm)])

    def _audio_out_now(self, pcm: bytes, encoded: str | None) -> bool:
        """The session's audio written now (the outbound queue is empty and its writer idle),
        translated exactly as ``_on_session_audio`` does (``encoded``: the upstream's base64 of
        ``pcm``, sent as is); False, untouched, while the socket holds unsent bytes."""
        assert self._write_now is not None
        writable, write = self._write_now
        if not writable():
            return False
        for event in self.translator.on_audio(pcm, encoded):
            write(orjson.dumps(event))
        return True

    async def _emit(self, events: list[ServerEvent]) -> None:
        for event in events:
            await self._send(orjson.dumps(event).decode())
