"""``POST /v1/webrtc/offer``: a browser's peer connection made into a session.

The client POSTs ``{"sdp", "type": "offer"}`` with its credential (as for ``/v1/session``: its
budgets are read, and a key out of budget gets 429); the answer comes back once the gateway's
candidates are gathered (aiortc does not trickle). The client's data channel carries the native
protocol's JSON events both ways, ``session.start`` first; its audio track is the microphone,
decoded to 48 kHz mono PCM16 for the session; the gateway's track carries the replies, paced
at real time and cleared on barge-in. A failed or closed peer connection ends the session.
ICE servers are none: the gateway's host candidates only (work in progress: STUN/TURN, a port
range and the public address are issue 35's).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

import av
import orjson
import structlog
from aiohttp import web
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from gateway.admission import Admission, json_error
from gateway.config import Settings
from gateway.edges.webrtc.audio_in import mono_pcm16
from gateway.edges.webrtc.audio_out import RATE, PcmOutTrack
from gateway.protocol import (
    EndReason,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    ResponseDone,
    ServerEvent,
    SessionEnded,
    SpeechStarted,
)
from gateway.protocol.client_events import AudioFormat, BinaryAudio, SessionStart
from gateway.protocol.decode import decode_text
from gateway.protocol.encode import encode
from gateway.session import Session, SessionUser
from gateway.session.manager import SessionManager
from gateway.session.outbound import Outbound, as_is
from gateway.session.refusals import StartRefused

__all__ = ["WebRtcRoutes"]

_log = structlog.get_logger("webrtc")


class WebRtcRoutes:
    def __init__(self, settings: Settings, admission: Admission, manager: SessionManager) -> None:
        self._settings = settings
        self._admission = admission
        self._manager = manager
        self._calls: set[_Call] = set()

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/v1/webrtc/offer", self.offer)

    async def offer(self, request: web.Request) -> web.Response:
        if self._admission.draining:
            return json_error(503, "draining", "the gateway is draining")
        user = await self._admission.user(request)
        if isinstance(user, web.Response):
            return user
        try:
            body = orjson.loads(await request.read())
            sdp, kind = body["sdp"], body.get("type", "offer")
            if not isinstance(sdp, str) or kind != "offer":
                raise ValueError
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return json_error(
                400, "invalid_request", 'the body must be {"sdp": …, "type": "offer"}'
            )
        call = _Call(self._manager, user, self._settings.outbound_audio_frames, self._calls)
        try:
            answer = await call.accept(sdp)
        except ValueError as exc:  # aiortc refuses an SDP it cannot read
            await call.close()
            return json_error(400, "invalid_request", f"the offer is not usable: {exc}")
        return web.json_response({"sdp": answer.sdp, "type": answer.type})


class _Call:
    """One peer connection and its session."""

    def __init__(
        self, manager: SessionManager, user: SessionUser, max_frames: int, calls: set[_Call]
    ) -> None:
        self._manager = manager
        self._user = user
        self._calls = calls
        calls.add(self)
        self._pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self._out = PcmOutTrack()
        self._channel: Any = None
        self._session: Session | None = None
        self._starting = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.outbound: Outbound[ServerEvent] = Outbound(
            self._on_event, self._on_audio, prepare=as_is, max_audio_frames=max_frames, ordered=True
        )
        self._writer = asyncio.create_task(self.outbound.run())
        self._closed = False
        pc = self._pc
        pc.on("track", self._on_track)
        pc.on("datachannel", self._on_datachannel)
        pc.on("connectionstatechange", self._on_state)

    async def accept(self, sdp: str) -> RTCSessionDescription:
        await self._pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        answer = await self._pc.createAnswer()
        await self._pc.setLocalDescription(answer)
        return self._pc.localDescription

    # the peer → the session ----------------------------------------------------------------

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            self._pc.addTrack(self._out)
            self._spawn(self._read_audio(track))

    async def _read_audio(self, track: MediaStreamTrack) -> None:
        # Always drained: aiortc queues decoded frames without bound.
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            session = self._session
            if session is None or session.ended.is_set() or not isinstance(frame, av.AudioFrame):
                continue
            channels = len(frame.layout.channels)
            pcm = mono_pcm16(frame.to_ndarray(), channels)
            await session.on_client_event(BinaryAudio(pcm=pcm))

    def _on_datachannel(self, channel: Any) -> None:
        self._channel = channel
        channel.on("message", lambda message: self._spawn(self._on_message(message)))

    async def _on_message(self, message: str | bytes) -> None:
        try:
            event = decode_text(message)
        except ProtocolError as exc:
            self._send(ErrorEvent(code=exc.code, message=str(exc)))
            return
        session = self._session
        if session is not None:
            await session.on_client_event(event)
            return
        if not isinstance(event, SessionStart) or self._starting:
            self._send(ErrorEvent(code=ErrorCode.NOT_STARTED, message="send session.start first"))
            return
        self._starting = True
        # Both tracks are 48 kHz: the session's audio is, whatever session.start asked.
        event = replace(event, audio=AudioFormat(input_rate=RATE, output_rate=RATE))
        try:
            self._session = await self._manager.start(event, self._user, self.outbound)
        except StartRefused as refused:
            self._send(refused.event)
        finally:
            self._starting = False

    def _on_state(self) -> None:
        if self._pc.connectionState in ("failed", "closed"):
            self._spawn(self.close())

    # the session → the peer ----------------------------------------------------------------

    async def _on_event(self, event: ServerEvent) -> None:
        match event:
            case SpeechStarted():
                self._out.clear()
            case ResponseDone():
                self._out.flush()
            case _:
                pass
        self._send(event)
        if isinstance(event, SessionEnded):
            self._spawn(self.close())

    async def _on_audio(self, pcm: bytes) -> None:
        self._out.push(pcm)

    def _send(self, event: ServerEvent) -> None:
        channel = self._channel
        if channel is not None and channel.readyState == "open":
            channel.send(encode(event).decode())

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        session = self._session
        if session is not None:
            if not session.ended.is_set():
                await session.end(EndReason.CLIENT, "the peer connection closed")
            await self._manager.forget(session)
        self.outbound.close()
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer
        await self._pc.close()
        self._calls.discard(self)
