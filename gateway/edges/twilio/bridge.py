"""One phone call: a Twilio Media Streams socket made into a voice session like any other.

The bridge is the session's client. It turns Twilio's messages into client events (µ-law 8 kHz
audio → binary audio, mark echoes → ``audio.playback``, DTMF ``1``/``2`` →
``confirmation.respond``, ``stop`` → ``session.end``) and the session's output back into Twilio's
(µ-law in 20 ms ``media`` frames paced at real time, a ``mark`` after each chunk, ``clear`` on
``speech.started``). The session is opened in G.711 µ-law at 8 kHz both ways, so the bridge never
converts audio: on an upstream that takes µ-law itself (OpenAI Realtime) the caller's bytes reach
the provider untouched and the provider's reach the caller untouched; elsewhere the session's
own converter decodes, resamples and encodes.

Decisions live in the pure modules beside it (``codec``, ``playback``'s ``PlaybackTracker``) and
in ``gateway.audio.g711``; this class only moves bytes and keeps time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

from gateway.edges.twilio import codec
from gateway.edges.twilio.playback import Frame, MarkOut, PlaybackTracker
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

__all__ = ["FRAME_MS", "TwilioBridge"]

_log = structlog.get_logger("twilio")

FRAME_MS = 20
TWILIO_RATE = 8000
# Frames sent ahead of real time: enough to ride out scheduling jitter, small enough that a
# barge-in's ``clear`` finds little queued at Twilio.
LEAD_FRAMES = 3

StartSession = Callable[[SessionStart, ClientOutput], Awaitable[Session]]


class TwilioBridge:
    def __init__(
        self,
        send: Callable[[str], Awaitable[None]],
        *,
        stream_sid: str,
        greeting: str | None,
        max_audio_frames: int,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._send = send
        self.stream_sid = stream_sid
        self._greeting = greeting
        self._clock = clock or asyncio.get_running_loop().time
        self.tracker = PlaybackTracker()
        self.session: Session | None = None
        self.outbound: Outbound[ServerEvent] = Outbound(
            self._on_session_event,
            self._on_session_audio,
            prepare=as_is,
            max_audio_frames=max_audio_frames,
            ordered=True,
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
        self.end_reason: str | None = None

    # Lifecycle -------------------------------------------------------------------------------

    async def open(
        self, start_session: StartSession, provider: str | None, model: str | None = None
    ) -> Session:
        """Start the writer and the pacer, then the voice session (8 kHz both ways) on
        ``provider`` or the model alias ``model`` (None: the gateway's default)."""
        self._writer = asyncio.create_task(self.outbound.run())
        self._pacer = asyncio.create_task(self._pace())
        start = SessionStart(
            mode=Mode.VOICE,
            provider=provider,
            model=model,
            audio=AudioFormat(input_rate=TWILIO_RATE, output_rate=TWILIO_RATE, encoding="pcmu"),
        )
        self.session = await start_session(start, self.outbound)
        if self._greeting:
            await self.session.on_client_event(TextSend(text=self._greeting))
        return self.session

    async def play_out(self, limit_s: float) -> None:
        """Wait until Twilio has played everything sent (its last mark echoed), ``limit_s`` at
        most. The caller keeps reading the socket meanwhile, so the echoes arrive."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._played_all.wait(), limit_s)

    async def close(self) -> None:
        """Stop the writer and the pacer; the caller closes the socket."""
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

    # Twilio → session ------------------------------------------------------------------------

    async def on_twilio(self, event: codec.TwilioEvent) -> bool:
        """Handle one Twilio message; False once the call is over (``stop``)."""
        session = self.session
        if session is None:
            return True
        if session.ended.is_set():
            # The stream stays open while the last words play out: the caller's echoes count
            # for that; the caller's keys and voice reach no session any more.
            if isinstance(event, codec.Mark):
                self.tracker.echoed(event.name)
                self._check_played_all()
            return not isinstance(event, codec.Stop)
        match event:
            case codec.Media(payload=payload) if payload:
                audio = self._odd_byte + payload
                # Frames hold whole PCM16 samples: an odd µ-law byte (Twilio sends 160) waits.
                whole = len(audio) & ~1
                self._odd_byte = audio[whole:]
                if whole:
                    await session.on_client_event(BinaryAudio(pcm=audio[:whole]))
            case codec.Mark(name=name):
                played = self.tracker.echoed(name)
                self._check_played_all()
                if played is not None:
                    response_id, played_ms = played
                    await session.on_client_event(
                        AudioPlayback(response_id=response_id, played_ms=played_ms)
                    )
            case codec.Dtmf(digit=digit):
                await self._dtmf(session, digit)
            case codec.Stop():
                await session.on_client_event(SessionEnd(reason="twilio stop"))
                return False
            case _:
                pass
        return True

    async def _dtmf(self, session: Session, digit: str) -> None:
        if digit not in ("1", "2") or not self._confirmations:
            # Never the digit itself: callers type PINs and card numbers on keypads.
            _log.info("twilio_dtmf_ignored", pending=len(self._confirmations))
            return
        decision = Decision.APPROVE if digit == "1" else Decision.REJECT
        confirmation_id = self._confirmations[-1]  # the one the caller just heard about
        await session.on_client_event(
            ConfirmationRespond(confirmation_id=confirmation_id, decision=decision)
        )

    # Session → Twilio ------------------------------------------------------------------------

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
                # (the caller hears no half-sentence twice). Twilio drops what it buffered.
                self.tracker.clear()
                await self._send(codec.clear(self.stream_sid))
            case ConfirmationRequested(confirmation_id=confirmation_id):
                self._confirmations.append(confirmation_id)
            case ConfirmationResolved(confirmation_id=confirmation_id):
                if confirmation_id in self._confirmations:
                    self._confirmations.remove(confirmation_id)
            case SessionEnded(reason=reason):
                self.end_reason = reason.value
                self._ended.set()
            case ErrorEvent(code=code):
                level = "warning" if code != ErrorCode.RATE_LIMITED else "info"
                getattr(_log, level)("twilio_session_error", code=code)
            case _:
                pass  # the rest has no form on a phone line

    async def _on_session_audio(self, ulaw: bytes) -> None:
        response_id = self._speaking
        if response_id is None:
            return  # audio outside a response (none is expected): nothing to attribute it to
        try:
            self.tracker.add(response_id, ulaw)
        except ValueError:  # audio of a response already ended: a bug upstream of us, logged
            _log.warning("twilio_late_audio", response_id=response_id)
            return
        self._played_all.clear()
        self._wake.set()

    def _check_played_all(self) -> None:
        if not self.tracker.pending_frames and not self.tracker.unconfirmed_ms:
            self._played_all.set()

    async def _pace(self) -> None:
        """Send queued frames at real time, ``LEAD_FRAMES`` ahead at most; marks as they come.

        The timeline runs from the first frame after an underrun: a reply arriving in bursts
        (faster than real time, as providers send it) keeps one timeline, so it is never sent
        faster than it plays."""
        started = 0.0
        sent_ms = 0
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
            now = self._clock()
            ahead_ms = sent_ms - (now - started) * 1000
            if ahead_ms < 0:  # Twilio ran out (or this is the first frame): start afresh
                started, sent_ms, ahead_ms = now, 0, 0.0
            if ahead_ms >= LEAD_FRAMES * FRAME_MS:
                await asyncio.sleep((ahead_ms - (LEAD_FRAMES - 1) * FRAME_MS) / 1000)
                continue
            for item in self.tracker.next_items(1):
                await self._send_item(item)
                if isinstance(item, Frame):
                    sent_ms += FRAME_MS

    async def _send_item(self, item: Frame | MarkOut) -> None:
        if isinstance(item, Frame):
            await self._send(codec.media(self.stream_sid, item.ulaw))
        else:
            await self._send(codec.mark(self.stream_sid, item.name))
