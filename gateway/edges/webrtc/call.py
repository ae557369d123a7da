"""One browser's peer connection carrying the native protocol: ``NativeCall``.

The data channel speaks the events of ``/v1/session`` (docs/protocol.md): ``session.start``
first (or a ``resume``), then everything else, at most ``GATEWAY_CLIENT_EVENTS_PER_S`` of them
as on the socket. The microphone track is the session's audio in, the reply track its audio
out, both 48 kHz PCM16 whatever ``session.start`` asked (the tracks are; the session resamples
for its upstream with the low-delay path).

What was played: the reply track counts what of each response it has handed to the encoder and
reports it to the session as ``audio.playback`` (every 60 ms), so a barge-in truncates at what
the browser was sent, not at what the model had produced. A client that sends its own
``audio.playback`` (its real play-out position) is believed instead from then on. Barge-in
(``speech.started``) and a response that ends cancelled or interrupted empty the track at once.

A failed or closed peer connection parks the session as a dropped socket does: a new peer
connection's ``session.start`` with ``resume`` picks it up within ``GATEWAY_RESUME_WINDOW_S``.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import replace
from typing import Any

import structlog

from gateway.edges.rtc.audio_out import RATE
from gateway.edges.rtc.peer import Channel, PeerLink, PeerOptions
from gateway.protocol import (
    AudioPlayback,
    EndReason,
    ErrorCode,
    ErrorEvent,
    Ping,
    Pong,
    ProtocolError,
    ResponseDone,
    ResponseStarted,
    ServerEvent,
    SessionEnd,
    SessionEnded,
    SessionUpdate,
    SpeechStarted,
)
from gateway.protocol.client_events import AudioFormat, BinaryAudio, SessionStart
from gateway.protocol.decode import decode_text
from gateway.protocol.encode import encode
from gateway.session import Session, SessionUser
from gateway.session.manager import SessionManager
from gateway.session.outbound import Outbound, as_is
from gateway.session.ratelimit import TokenBucket
from gateway.session.refusals import StartRefused

__all__ = ["NativeCall"]

_log = structlog.get_logger("webrtc")
_TRACK_AUDIO = AudioFormat(input_rate=RATE, output_rate=RATE)


class NativeCall:
    def __init__(
        self,
        manager: SessionManager,
        user: SessionUser,
        options: PeerOptions,
        calls: dict[str, NativeCall],
    ) -> None:
        settings = manager.settings
        self._manager = manager
        self._user = user
        self.user_id = user.user_id
        self.call_id = "rtc_" + secrets.token_hex(12)
        self._calls = calls
        calls[self.call_id] = self
        self.link = PeerLink(
            options, on_audio=self._audio_in, on_channel=self._on_channel, on_gone=self._on_gone
        )
        self.link.out.on_played = self._played
        self._events = TokenBucket(settings.client_events_per_s, settings.client_events_burst)
        self._max_text = settings.max_text_frame
        self.session: Session | None = None
        self._starting = False
        self._client_reports_playback = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._inbox: asyncio.Queue[str | bytes] = asyncio.Queue()
        self.outbound: Outbound[ServerEvent] = Outbound(
            self._on_event,
            self._on_audio_out,
            prepare=as_is,
            max_audio_frames=settings.outbound_audio_frames,
            ordered=True,
            edge="webrtc",
        )
        self._writer = asyncio.create_task(self.outbound.run())
        self._spawn(self._close_when_released())
        self._start_timer = asyncio.get_running_loop().call_later(
            settings.session_start_timeout_s, self._start_timed_out
        )
        self._closed = False
        self.closed = asyncio.Event()  # set once close() has let everything go

    async def accept(self, offer_sdp: str) -> str:
        return await self.link.accept(offer_sdp)

    # the peer → the session ---------------------------------------------------------------------

    async def _audio_in(self, pcm: bytes) -> None:
        session = self.session
        if session is None or session.outbound is not self.outbound or session.ended.is_set():
            return
        # The socket's hot path; a frame it declines takes the event path, which says why.
        try:
            if not session.client.audio_now(pcm):
                await session.on_client_event(BinaryAudio(pcm=pcm))
        except Exception:  # handled (perhaps in part): never run it a second time
            _log.exception("client_audio_failed", session_id=session.session_id)
            session.error(ErrorCode.INTERNAL, "internal error handling that audio")

    def _on_channel(self, channel: Channel) -> None:
        channel.on("message", self._received)
        self._spawn(self._read_inbox())

    def _received(self, message: str | bytes) -> None:
        # Spent here, as the message arrives: a flood never queues up.
        if not self._events.take(self._manager.clock.monotonic()):
            self._send(
                ErrorEvent(
                    code=ErrorCode.RATE_LIMITED,
                    message=f"too many events: at most {self._events.rate_per_s:g} per second; "
                    "this one was dropped",
                    retryable=True,
                )
            )
            return
        self._inbox.put_nowait(message)

    async def _read_inbox(self) -> None:
        """The channel's events, one at a time and in order (a ``text.send`` right behind its
        ``session.start`` waits for the session)."""
        while True:
            await self._on_message(await self._inbox.get())

    async def _on_message(self, message: str | bytes) -> None:
        event: Any = None
        try:
            event = decode_text(message, max_bytes=self._max_text)
            if self.session is not None:
                if isinstance(event, AudioPlayback):
                    self._client_reports_playback = True
                elif isinstance(event, SessionUpdate) and event.input_rate not in (None, RATE):
                    raise ProtocolError(
                        ErrorCode.INVALID_EVENT,
                        "session.update: 'audio.input_rate' is 48000 over WebRTC (the "
                        "microphone track's rate); it cannot change",
                        event_id=event.event_id,
                    )
                await self.session.on_client_event(event)
            else:
                await self._before_start(event)
        except ProtocolError as exc:
            self._send(ErrorEvent.from_error(exc))
        except Exception:
            _log.exception("webrtc_event_failed")
            self._send(
                ErrorEvent(
                    code=ErrorCode.INTERNAL,
                    message="internal error handling that event",
                    event_id=getattr(event, "event_id", None),
                )
            )

    async def _before_start(self, event: Any) -> None:
        if isinstance(event, Ping):
            self._send(Pong(id=event.id))
            return
        if isinstance(event, SessionEnd):
            self._send(SessionEnded(reason=EndReason.CLIENT))
            self._spawn(self.close())
            return
        if not isinstance(event, SessionStart) or self._starting:
            self._send(
                ErrorEvent(
                    code=ErrorCode.NOT_STARTED,
                    message="send session.start first",
                    event_id=getattr(event, "event_id", None),
                )
            )
            return
        self._starting = True
        # The tracks are 48 kHz: so is the session's audio, whatever session.start asked.
        event = replace(event, audio=_TRACK_AUDIO)
        try:
            if event.resume is not None:
                session = await self._manager.resume(event, self._user, self.outbound)
            else:
                session = await self._manager.start(event, self._user, self.outbound)
        except StartRefused as refused:
            self._send(refused.event)
            if refused.ended is not None:
                self._send(refused.ended)
            if refused.fatal:
                self._spawn(self.close())
            return
        finally:
            self._starting = False
        self._start_timer.cancel()
        profile = session.profile
        if (profile.input_rate, profile.output_rate, profile.encoding) != (RATE, RATE, "pcm16"):
            # A session begun on a socket at other rates: its audio cannot take these tracks.
            self._manager.park(session)
            self._send(
                ErrorEvent(
                    code=ErrorCode.RESUME_FAILED,
                    message="this session's audio is not 48 kHz PCM16: resume it where it "
                    "began (over the WebSocket); it stays resumable",
                    event_id=event.event_id,
                )
            )
            return
        session.share_event_budget(self._events)
        self.session = session

    def _start_timed_out(self) -> None:
        if self.session is None and not self._closed:
            self._send(
                ErrorEvent(
                    code=ErrorCode.SESSION_START_TIMEOUT,
                    message="send session.start within "
                    f"{self._manager.settings.session_start_timeout_s:g} s",
                    fatal=True,
                )
            )
            self._spawn(self.close())

    def _played(self, response_id: str, played_ms: int) -> None:
        session = self.session
        if session is not None and not self._client_reports_playback:
            self._spawn(
                session.on_client_event(AudioPlayback(response_id=response_id, played_ms=played_ms))
            )

    async def _close_when_released(self) -> None:
        # Another connection took the session over, or it moved to another node
        # (session.moving was sent): this one has nothing more to carry.
        await self.outbound.released.wait()
        await self.close()

    def _on_gone(self, why: str) -> None:
        _log.info("webrtc_peer_gone", why=why)
        self._spawn(self.close())

    # the session → the peer ---------------------------------------------------------------------

    async def _on_event(self, event: ServerEvent) -> None:
        out = self.link.out
        match event:
            case ResponseStarted(response_id=response_id):
                out.begin(response_id)
            case SpeechStarted():
                out.clear()
            case ResponseDone(status=status):
                if status == "completed":
                    out.flush()
                else:
                    out.clear()
                out.begin(None)
            case _:
                pass
        self._send(event)
        if isinstance(event, SessionEnded):
            self._spawn(self.close())

    async def _on_audio_out(self, pcm: bytes) -> None:
        self.link.out.push(pcm)

    def _send(self, event: ServerEvent) -> None:
        self.link.send(encode(event).decode())

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """The peer connection ends: its session is parked (resumable) unless it has ended, or
        another connection has taken it over."""
        if self._closed:
            return
        self._closed = True
        self._start_timer.cancel()
        session = self.session
        if session is not None and session.outbound is self.outbound:
            if session.ended.is_set():
                await self._manager.forget(session)
            else:
                self._manager.park(session)
        self.outbound.close()
        try:
            await asyncio.wait_for(self._writer, timeout=5)
        except (TimeoutError, ConnectionError):
            self._writer.cancel()
        await self.link.close()
        self._calls.pop(self.call_id, None)
        self.closed.set()
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
