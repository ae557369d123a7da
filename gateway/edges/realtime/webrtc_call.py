"""One call of OpenAI's WebRTC interface: a browser's peer connection carrying a GA Realtime
session (``RealtimeCall``). Importing this loads aiortc and PyAV (``gateway.edges.rtc``): the
routes (``webrtc_calls``) do so in a thread at the first call.

It is ``/v1/realtime`` with its media on tracks: the same ``CompatBridge`` (its session opened
as the call is answered, with the config the ephemeral key and the call's ``session`` part
gave it; ``session.created`` first on the data channel, whatever the peer sends meanwhile),
the same translation of every GA event, on every upstream. What differs is the audio:

- the peer's microphone track (48 kHz from ``PeerLink``) is resampled to the session's 24 kHz
  and given to the session without putting it in use (``CompatBridge.audio_from_track``),
  server VAD by default, as on OpenAI's WebRTC;
- the session's audio goes to the reply track (``TrackPlayout``), never as
  ``response.output_audio.delta`` (OpenAI sends none over WebRTC; the transcript deltas go),
  with ``output_audio_buffer.started`` / ``.stopped`` / ``.cleared`` as OpenAI sends them and
  the client's ``output_audio_buffer.clear`` honoured; what the track sent of each response is
  the session's ``audio.playback`` (every 60 ms), so a barge-in empties the track at once and
  truncates the model's memory at what the peer was sent, as ``NativeCall`` does.

The data channel's messages are handled one at a time, in order (at most ``INBOX_LIMIT`` bytes
held; beyond, an ``error`` and the message dropped). The call ends with its peer connection
(failed, closed, never connected), with its session (the channel gets the session's last
``error``, if any, then the connection closes), or by ``POST …/hangup``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
import structlog

from gateway.audio.convert import AudioConverter
from gateway.edges.realtime.bridge import CompatBridge
from gateway.edges.realtime.call_setup import CallSetup
from gateway.edges.realtime.errors import CompatError
from gateway.edges.realtime.opening import AUDIO_RATE
from gateway.edges.realtime.server_wire import ServerEvent, SessionIds
from gateway.edges.realtime.track_playout import TRACK_RATE, TrackPlayout
from gateway.edges.rtc.peer import Channel, PeerLink, PeerOptions
from gateway.protocol import AudioPlayback, EndReason, SessionStart
from gateway.session import Session, SessionUser
from gateway.session.client_output import ClientOutput
from gateway.session.manager import SessionManager

__all__ = ["INBOX_LIMIT", "RealtimeCall"]

_log = structlog.get_logger("realtime_calls")

INBOX_LIMIT = 4 * 1024 * 1024  # bytes of the peer's messages held, as the socket's inbox
UNSENT_LIMIT = 256  # events held for the data channel until it opens


class RealtimeCall:
    def __init__(
        self,
        call_id: str,
        *,
        manager: SessionManager,
        user: SessionUser,
        options: PeerOptions,
        setup: CallSetup,
        show_tools: bool,
        has_audio: bool,
        on_closed: Callable[[RealtimeCall], None],
    ) -> None:
        self.call_id = call_id
        self.user = user
        self._manager = manager
        self._on_closed = on_closed
        self.link = PeerLink(
            options, on_audio=self._audio_in, on_channel=self._on_channel, on_gone=self._on_gone
        )
        self.playout = TrackPlayout(
            self.link.out if has_audio else None,
            ids=SessionIds(),
            emit=self._send_events,
            played=self._played,
        )
        self.link.out.on_played = self.playout.on_played
        self._down = AudioConverter("pcm16", TRACK_RATE, "pcm16", AUDIO_RATE)
        self.bridge = CompatBridge(
            self._send,
            model=setup.model,
            provider=setup.provider,
            start_session=self._start_session,
            end_unused=self._end_unused,
            max_audio_frames=manager.settings.outbound_audio_frames,
            check_tools=setup.check_tools,
            show_tools=show_tools,
            alias=setup.alias,
            audio_sink=self.playout,
        )
        for patch in setup.patches:  # checked already (call_setup): session.created shows it
            self.bridge.view = self.bridge.view.apply(patch)
        self._unsent: list[str] | None = []  # None once the channel is open
        self._inbox: asyncio.Queue[str | bytes] = asyncio.Queue()
        self._held = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def accept(self, offer_sdp: str) -> str:
        """The answer (ValueError: an offer aiortc cannot use; then ``close``); the session
        opens meanwhile, its ``session.created`` held for the data channel."""
        answer = await self.link.accept(offer_sdp)
        await self.bridge.open()
        self._spawn(self._read())
        self._spawn(self._end_with_session())
        return answer

    # The session's two ways to the bridge --------------------------------------------------------

    async def _start_session(self, start: SessionStart, outbound: ClientOutput) -> Session:
        session = await self._manager.start(start, self.user, outbound)
        session.movable = False  # like /v1/realtime: it ends with its connection
        return session

    async def _end_unused(self, session: Session) -> None:
        session.detach()  # its end is no news to the client: another session replaces it
        await session.end(EndReason.CLIENT, "replaced before its first use")
        await self._manager.forget(session)

    # The peer → the session ----------------------------------------------------------------------

    async def _audio_in(self, pcm: bytes) -> None:
        pcm = self._down.process(pcm)
        if not pcm or self._closed:
            return
        try:
            await self.bridge.audio_from_track(pcm)
        except Exception:
            _log.exception("realtime_call_audio_failed", call_id=self.call_id)
            self._spawn(self.close())

    def _on_channel(self, channel: Channel) -> None:
        channel.on("message", self._on_message)
        if channel.readyState == "open":
            self._channel_opened()
        else:
            channel.on("open", self._channel_opened)

    def _on_message(self, message: str | bytes) -> None:
        if self._held + len(message) > INBOX_LIMIT:
            error = CompatError(
                "rate_limit_exceeded",
                f"More than {INBOX_LIMIT // (1024 * 1024)} MiB of events are waiting to be "
                "handled: this one was dropped.",
            )
            self._send_events([self.bridge.translator.error_event(error)])
            return
        self._held += len(message)
        self._inbox.put_nowait(message)

    async def _read(self) -> None:
        try:
            while True:
                message = await self._inbox.get()
                self._held -= len(message)
                await self.bridge.on_client_text(message)
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.exception("realtime_call_event_failed", call_id=self.call_id)
            self._spawn(self.close())

    def _played(self, response_id: str, played_ms: int) -> None:
        session = self.bridge.session
        if session is not None and not session.ended.is_set():
            playback = AudioPlayback(response_id=response_id, played_ms=played_ms)
            self._spawn(session.on_client_event(playback))

    def _on_gone(self, why: str) -> None:
        _log.info("realtime_call_peer_gone", call_id=self.call_id, why=why)
        self._spawn(self.close())

    # The session → the peer ----------------------------------------------------------------------

    def _channel_opened(self) -> None:
        unsent, self._unsent = self._unsent, None
        for text in unsent or ():
            self.link.send(text)

    async def _send(self, text: str) -> None:
        self._deliver(text)

    def _send_events(self, events: list[ServerEvent]) -> None:
        for event in events:
            self._deliver(orjson.dumps(event).decode())

    def _deliver(self, text: str) -> None:
        if self._unsent is None:
            self.link.send(text)  # dropped once the channel has closed
        elif len(self._unsent) < UNSENT_LIMIT:
            self._unsent.append(text)

    # The end -------------------------------------------------------------------------------------

    async def _end_with_session(self) -> None:
        await self.bridge.ended.wait()
        await self.close()

    async def close(self) -> None:
        """The call ends: its session (if still on), its peer connection."""
        if self._closed:
            return
        self._closed = True
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        try:
            await self.bridge.close()
            if self.bridge.session is not None:
                await self._manager.forget(self.bridge.session)
            await self._channel_drained()  # the session's last words reach the peer first
        finally:
            await self.link.close()
            self._on_closed(self)
            _log.info("realtime_call_closed", call_id=self.call_id, why=self.bridge.end_reason)

    async def _channel_drained(self, within_s: float = 1.0) -> None:
        channel = self.link.channel
        if channel is None or channel.readyState != "open" or channel.bufferedAmount == 0:
            return
        low = asyncio.Event()
        channel.on("bufferedamountlow", low.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(low.wait(), within_s)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
