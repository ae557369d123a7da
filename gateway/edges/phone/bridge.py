"""One phone call, on any carrier: its media stream made into a voice session like any other.

The bridge is the session's client. It turns a carrier's events (``gateway.edges.phone.wire``)
into client events (the caller's audio → binary audio, marker echoes → ``audio.playback``, DTMF
``1``/``2`` → ``confirmation.respond``, a hang-up → ``session.end``) and the session's output
back into the carrier's messages through the stream's ``Speaker``: audio in whole 20 ms frames
paced at real time, a marker after each chunk, ``clear`` on ``speech.started`` (barge-in) and
on a change of upstream.

The session is opened in the line's own format (G.711 µ-law or A-law at 8 kHz, or PCM16 at the
line's rate), so the bridge never converts what it sends: on an upstream that takes the line's
format itself (OpenAI Realtime and G.711) the caller's bytes reach the provider untouched and
the provider's reach the caller untouched; elsewhere the session's converter decodes and
resamples. Only a call whose carrier sends another encoding than it plays (rare: a Telnyx call
negotiated in A-law, played in µ-law) has its inbound audio converted here.

A carrier that does not echo markers gets them echoed by the bridge on its own clock, when the
audio sent before a marker has had the time to play: the pacer keeps at most one frame and
``SLACK_MS`` ahead of real time, so that is when the carrier plays it too.

Decisions live in the pure modules beside it (``playback``'s ``PlaybackTracker``, ``reorder``);
this class only moves bytes and keeps time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from gateway.audio.convert import AudioConverter
from gateway.edges.phone.playback import Frame, MarkOut, PlaybackTracker
from gateway.edges.phone.reorder import SequenceReorder
from gateway.edges.phone.wire import (
    Audio,
    CarrierEvent,
    Digit,
    Hangup,
    LineFormat,
    Outgoing,
    Played,
    Speaker,
    Unknown,
)
from gateway.protocol import (
    ConfirmationRequested,
    ConfirmationResolved,
    ErrorCode,
    ErrorEvent,
    ProviderChanged,
    ResponseDone,
    ResponseStarted,
    ServerEvent,
    SessionEnded,
    SpeechStarted,
)
from gateway.protocol.client_events import (
    AudioFormat,
    AudioPlayback,
    BinaryAudio,
    ConfirmationRespond,
    Decision,
    Mode,
    SessionEnd,
    SessionStart,
    TextSend,
)
from gateway.session.client_output import ClientOutput
from gateway.session.outbound import Outbound, as_is
from gateway.session.session import Session

__all__ = ["FRAME_MS", "SLACK_MS", "PhoneBridge"]

_log = structlog.get_logger("phone")

FRAME_MS = 20  # most carriers' frame; a speaker may ask for longer ones (Exotel)
# Sent ahead of real time beyond the frame being played: enough to ride out scheduling jitter,
# small enough that a barge-in's ``clear`` finds little queued at the carrier (60 ms in all
# with 20 ms frames).
SLACK_MS = 2 * FRAME_MS
MARK_EVERY_MS = 100  # a marker after each 100 ms of a reply, at least after each frame

StartSession = Callable[[SessionStart, ClientOutput], Awaitable[Session]]


class PhoneBridge:
    def __init__(
        self,
        send: Callable[[Outgoing], Awaitable[None]],
        speaker: Speaker,
        *,
        inbound: LineFormat,
        greeting: str | None,
        max_audio_frames: int,
        carrier: str = "twilio",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._send = send
        self.speaker = speaker
        self._greeting = greeting
        self._loop = asyncio.get_running_loop()
        self._clock = clock or self._loop.time
        self._log = _log.bind(carrier=carrier)
        line = speaker.line
        self._line = line
        self._frame_ms = speaker.frame_ms
        self.tracker = PlaybackTracker(
            line.bytes_per_ms * self._frame_ms,
            max(MARK_EVERY_MS // self._frame_ms, 1),
            bytes_per_ms=line.bytes_per_ms,
            silence=line.silence,
        )
        # The session speaks the line's format; audio the carrier sends in another is converted.
        self._inbound = (
            None
            if inbound.encoding == line.encoding
            else AudioConverter(inbound.encoding, inbound.rate, line.encoding, inbound.rate)
        )
        self._input_rate = inbound.rate
        self._sample_bytes = 2 if line.encoding == "pcm16" else 1
        self._reorder: SequenceReorder | None = None
        self.session: Session | None = None
        self.outbound: Outbound[ServerEvent] = Outbound(
            self._on_session_event,
            self._on_session_audio,
            prepare=as_is,
            max_audio_frames=max_audio_frames,
            ordered=True,
            edge=carrier,
        )
        # Events arrive in order with the audio (``ordered``), so audio belongs to the response
        # started last, until it is done (an earlier one may be held for its tools meanwhile).
        self._speaking: str | None = None
        self._confirmations: list[str] = []  # pending, oldest first
        self._wake = asyncio.Event()
        self._pacer: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()
        self._played_all = asyncio.Event()  # nothing queued, nothing sent unconfirmed
        self._odd_byte = b""
        # The pacer's timeline: when its current run of frames started, and how much it sent.
        self._timeline_start = 0.0
        self._timeline_sent_ms = 0
        self._closed = False
        self.end_reason: str | None = None
        self.end_usage: Mapping[str, Any] | None = None  # the session's, once it ended
        self.ignored_frames = 0  # malformed audio (half a sample) dropped

    # Lifecycle -------------------------------------------------------------------------------

    async def open(
        self,
        start_session: StartSession,
        provider: str | None,
        model: str | None = None,
        *,
        instructions: str | None = None,
        tools: tuple[str, ...] | None = None,
    ) -> Session:
        """Start the writer and the pacer, then the voice session in the line's format on
        ``provider`` or the model alias ``model`` (None: the gateway's default), with a call's
        own ``instructions`` and ``tools`` when it has them (a call the gateway placed)."""
        self._writer = asyncio.create_task(self.outbound.run())
        self._pacer = asyncio.create_task(self._pace())
        line = self._line
        start = SessionStart(
            mode=Mode.VOICE,
            provider=provider,
            model=model,
            instructions=instructions,
            tools=tools,
            audio=AudioFormat(
                input_rate=self._input_rate if line.encoding == "pcm16" else line.rate,
                output_rate=line.rate,
                encoding=line.encoding,
            ),
        )
        self.session = await start_session(start, self.outbound)
        if self._greeting:
            await self.session.on_client_event(TextSend(text=self._greeting))
        return self.session

    async def play_out(self, limit_s: float) -> None:
        """Wait until the carrier has played everything sent (its last marker echoed),
        ``limit_s`` at most. The caller keeps reading the socket meanwhile, so echoes arrive."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._played_all.wait(), limit_s)

    async def close(self) -> None:
        """Stop the writer and the pacer; the caller closes the socket."""
        self._closed = True
        self.outbound.close()
        for task in (self._pacer, self._writer):
            if task is not None:
                task.cancel()
        await asyncio.gather(
            *(t for t in (self._pacer, self._writer) if t is not None), return_exceptions=True
        )

    @property
    def ended(self) -> asyncio.Event:
        """Set when the session said ``session.ended``."""
        return self._ended

    # Carrier → session -----------------------------------------------------------------------

    async def on_carrier(self, event: CarrierEvent) -> bool:
        """Handle one of the carrier's events; False once the call is over (a hang-up)."""
        session = self.session
        if session is None:
            return True
        if session.ended.is_set():
            # The stream stays open while the last words play out: the caller's echoes count
            # for that; the caller's keys and voice reach no session any more.
            if isinstance(event, Played):
                self.tracker.echoed(event.name)
                self._check_played_all()
            return not isinstance(event, Hangup)
        match event:
            case Audio(payload=payload, sequence=sequence) if payload:
                if sequence is None:
                    await self._caller_audio(session, payload)
                else:
                    if self._reorder is None:
                        self._reorder = SequenceReorder()
                    for ordered in self._reorder.push(sequence, payload):
                        await self._caller_audio(session, ordered)
            case Played(name=name):
                await self._played(session, name)
            case Digit(digit=digit):
                await self._dtmf(session, digit)
            case Hangup():
                await session.on_client_event(SessionEnd(reason="the carrier ended the call"))
                return False
            case Unknown(event=name):
                self._log.info("phone_event_unknown", name=name[:64])
            case _:
                pass
        return True

    async def _caller_audio(self, session: Session, payload: bytes) -> None:
        if self._inbound is not None:
            payload = self._inbound.process(payload)
        if self._sample_bytes == 2:
            if len(payload) % 2:  # half a sample: every later sample would be misread
                self.ignored_frames += 1
                self._log.info("phone_audio_ignored", reason="odd length", size=len(payload))
                return
            audio = payload
        else:
            audio = self._odd_byte + payload
            # The session's frames hold an even number of bytes: an odd G.711 byte waits.
            whole = len(audio) & ~1
            self._odd_byte = audio[whole:]
            audio = audio[:whole]
        if audio:
            await session.on_client_event(BinaryAudio(pcm=audio))

    async def _played(self, session: Session, name: str) -> None:
        played = self.tracker.echoed(name)
        self._check_played_all()
        if played is not None:
            response_id, played_ms = played
            await session.on_client_event(
                AudioPlayback(response_id=response_id, played_ms=played_ms)
            )

    async def _dtmf(self, session: Session, digit: str) -> None:
        if digit not in ("1", "2") or not self._confirmations:
            # Never the digit itself: callers type PINs and card numbers on keypads.
            self._log.info("phone_dtmf_ignored", pending=len(self._confirmations))
            return
        decision = Decision.APPROVE if digit == "1" else Decision.REJECT
        confirmation_id = self._confirmations[-1]  # the one the caller just heard about
        await session.on_client_event(
            ConfirmationRespond(confirmation_id=confirmation_id, decision=decision)
        )

    # Session → carrier -----------------------------------------------------------------------

    async def _on_session_event(self, event: ServerEvent) -> None:
        match event:
            case ResponseStarted(response_id=response_id):
                self._speaking = response_id
            case ResponseDone(response_id=response_id):
                if self._speaking == response_id:
                    self._speaking = None
                self.tracker.end(response_id)
                if self.tracker.pending_frames:  # its padded last frame is still to be played
                    self._played_all.clear()
                self._wake.set()
            case SpeechStarted() | ProviderChanged():
                # Barge-in, or another upstream took over: nothing more of the reply may play
                # (the caller hears no half-sentence twice). The carrier drops what it buffered.
                self.tracker.clear()
                await self._send(self.speaker.clear())
            case ConfirmationRequested(confirmation_id=confirmation_id):
                self._confirmations.append(confirmation_id)
            case ConfirmationResolved(confirmation_id=confirmation_id):
                if confirmation_id in self._confirmations:
                    self._confirmations.remove(confirmation_id)
            case SessionEnded(reason=reason, usage=usage):
                self.end_reason = reason.value
                self.end_usage = usage
                self._ended.set()
            case ErrorEvent(code=code):
                level = "warning" if code != ErrorCode.RATE_LIMITED else "info"
                getattr(self._log, level)("phone_session_error", code=code)
            case _:
                pass  # the rest has no form on a phone line

    async def _on_session_audio(self, audio: bytes) -> None:
        response_id = self._speaking
        if response_id is None:
            return  # audio outside a response (none is expected): nothing to attribute it to
        try:
            self.tracker.add(response_id, audio)
        except ValueError:  # audio of a response already ended: a bug upstream of us, logged
            self._log.warning("phone_late_audio", response_id=response_id)
            return
        self._played_all.clear()
        self._wake.set()

    def _check_played_all(self) -> None:
        if not self.tracker.pending_frames and not self.tracker.unconfirmed_ms:
            self._played_all.set()

    async def _pace(self) -> None:
        """Send queued frames at real time, a frame and ``SLACK_MS`` ahead at most; marks as
        they come.

        The timeline runs from the first frame after an underrun: a reply arriving in bursts
        (faster than real time, as providers send it) keeps one timeline, so it is never sent
        faster than it plays."""
        while True:
            if not self.tracker.pending_frames:
                # Cleared before the awaits below: audio queued meanwhile wakes us again.
                self._wake.clear()
                for item in self.tracker.next_items(0):  # a reply's last mark, after its audio
                    await self._send_item(item)
                self._check_played_all()
                if not self.tracker.pending_frames:
                    await self._wake.wait()
                continue
            ahead_ms = self._ahead_ms()
            if ahead_ms < 0:  # the carrier ran out (or this is the first frame): start afresh
                self._timeline_start, self._timeline_sent_ms, ahead_ms = self._clock(), 0, 0.0
            if ahead_ms >= self._frame_ms + SLACK_MS:
                await asyncio.sleep((ahead_ms - SLACK_MS) / 1000)
                continue
            for item in self.tracker.next_items(1):
                await self._send_item(item)
                if isinstance(item, Frame):
                    self._timeline_sent_ms += self._frame_ms

    def _ahead_ms(self) -> float:
        """How far what was sent runs ahead of what the carrier has played, by the clock."""
        return self._timeline_sent_ms - (self._clock() - self._timeline_start) * 1000

    async def _send_item(self, item: Frame | MarkOut) -> None:
        if isinstance(item, Frame):
            await self._send(self.speaker.media(item.audio))
        elif self.speaker.echoes_markers:
            await self._send(self.speaker.marker(item.name))
        else:
            # No echo will come: the audio before this marker plays once what runs ahead has.
            delay_s = max(self._ahead_ms(), 0.0) / 1000
            self._loop.call_later(delay_s, self._echo_on_clock, item.name)

    def _echo_on_clock(self, name: str) -> None:
        session = self.session
        if session is None or self._closed:
            return
        if session.ended.is_set():
            self.tracker.echoed(name)
            self._check_played_all()
            return
        task = asyncio.ensure_future(self._played(session, name))
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.error("phone_played_failed", exc_info=task.exception())
