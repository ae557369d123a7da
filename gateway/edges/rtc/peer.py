"""``PeerLink``: one browser's peer connection, on aiortc, as an edge needs it.

The edge hands it the offer and gets the answer (aiortc gathers every candidate first: no
trickle, so the answer is complete; host candidates take milliseconds, a STUN or TURN server
up to its timeout). From then on the link calls the edge back: ``on_audio`` with each 20 ms of
the peer's microphone as 48 kHz mono PCM16 (the track is always drained, as aiortc queues
decoded frames without bound), ``on_channel`` when the peer's data channel opens, ``on_gone``
once when the connection fails, closes, or is not connected within the timeout. ``out`` is the
reply track (``PcmOutTrack``), added when the offer brings an audio track.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import av
import structlog
from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.sdp import candidate_from_sdp

from gateway.edges.rtc.audio_in import mono_pcm16
from gateway.edges.rtc.audio_out import PcmOutTrack
from gateway.edges.rtc.ice import announce_public_ip
from gateway.edges.rtc.jitter import InOrderAudio, use_in_order_audio
from gateway.rtc_settings import IceServer

__all__ = ["Channel", "PeerLink", "PeerOptions"]

_log = structlog.get_logger("webrtc")

Channel = Any  # aiortc's RTCDataChannel: send(str), readyState, label, on("message")


class PeerOptions:
    """What every link of a gateway shares: ICE servers, the public address, the timeout."""

    def __init__(
        self,
        servers: tuple[IceServer, ...] = (),
        *,
        public_ip: str | None = None,
        connect_timeout_s: float = 15.0,
        count: Callable[[int], None] | None = None,
    ) -> None:
        """``count``: told +1 when a link opens and -1 when it closes (a gauge's ``inc``)."""
        # aioice uses one STUN and one TURN server: the first of each kind listed.
        self.servers = [
            RTCIceServer(urls=list(s.urls), username=s.username, credential=s.credential)
            for s in servers
        ]
        self.public_ip = public_ip
        self.connect_timeout_s = connect_timeout_s
        self.count = count


class PeerLink:
    live = 0  # links not closed yet, in this process (a gauge, and the leak check's count)

    def __init__(
        self,
        options: PeerOptions,
        *,
        on_audio: Callable[[bytes], Awaitable[None]],
        on_channel: Callable[[Channel], None],
        on_gone: Callable[[str], None],
    ) -> None:
        self._options = options
        self._on_audio = on_audio
        self._on_channel = on_channel
        self._on_gone = on_gone
        # An explicit (possibly empty) list: aiortc's default is Google's STUN server.
        self._pc = RTCPeerConnection(RTCConfiguration(iceServers=options.servers))
        self.out = PcmOutTrack()
        self.channel: Channel | None = None
        self.trickling = False  # the offer came without candidates: they follow
        self.received: InOrderAudio | None = None  # the microphone's buffer (lost, late)
        self._tasks: set[asyncio.Task[None]] = set()
        self._gone = False
        self._closed = False
        self._connected = asyncio.Event()
        PeerLink.live += 1
        if options.count is not None:
            options.count(1)
        self._pc.on("track", self._on_track)
        self._pc.on("datachannel", self._on_datachannel)
        self._pc.on("connectionstatechange", self._on_state)

    async def accept(self, offer_sdp: str) -> str:
        """The answer's SDP (ValueError: an offer aiortc cannot use)."""
        if "\nm=audio " not in offer_sdp and "\nm=application " not in offer_sdp:
            raise ValueError("it has neither an audio track nor a data channel")
        pc = self._pc
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        except (AssertionError, LookupError, TypeError) as exc:  # aiortc's parser asserts
            raise ValueError(f"the SDP cannot be read ({type(exc).__name__})") from None
        # An offer with candidates is complete (browsers leave end-of-candidates out): say so,
        # or aioice waits for more before it gives up on a pair. One without any trickles
        # them (``add_candidates``).
        self.trickling = "\na=candidate:" not in offer_sdp
        if not self.trickling:
            await pc.addIceCandidate(None)
        await pc.setLocalDescription(await pc.createAnswer())
        self._spawn(self._connected_within(self._options.connect_timeout_s))
        sdp: str = pc.localDescription.sdp
        if self._options.public_ip is not None:
            sdp = announce_public_ip(sdp, self._options.public_ip)
        return sdp

    async def add_candidates(
        self, candidates: list[tuple[str, str | None, int | None]], *, done: bool
    ) -> None:
        """The browser's trickled candidates (``candidate:…`` lines, with ``sdpMid`` or
        ``sdpMLineIndex``); ``done``: it has no more. ValueError: a line aiortc cannot read."""
        for line, mid, index in candidates:
            try:
                candidate = candidate_from_sdp(line.removeprefix("a=").removeprefix("candidate:"))
            except (ValueError, IndexError, AssertionError):  # aiortc's parser asserts
                raise ValueError(f"not an ICE candidate: {line[:80]!r}") from None
            candidate.sdpMid, candidate.sdpMLineIndex = mid, index
            await self._pc.addIceCandidate(candidate)
        if done and self.trickling:
            self.trickling = False
            await self._pc.addIceCandidate(None)

    def send(self, text: str) -> bool:
        channel = self.channel
        if channel is None or channel.readyState != "open":
            return False
        channel.send(text)
        return True

    @property
    def connected(self) -> bool:
        return self._pc.connectionState == "connected"

    # aiortc's callbacks -------------------------------------------------------------------------

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            for transceiver in self._pc.getTransceivers():
                if transceiver.receiver.track is track:
                    self.received = use_in_order_audio(transceiver.receiver)
            self._pc.addTrack(self.out)
            self._spawn(self._drain(track))

    async def _drain(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            if isinstance(frame, av.AudioFrame):
                channels = len(frame.layout.channels)
                try:
                    await self._on_audio(mono_pcm16(frame.to_ndarray(), channels))
                except Exception:  # a frame lost, never the drain (aiortc would queue on)
                    _log.exception("webrtc_audio_in_failed")

    def _on_datachannel(self, channel: Channel) -> None:
        if self.channel is not None:
            channel.close()  # one channel per link: a second is refused
            return
        self.channel = channel
        self._on_channel(channel)

    def _on_state(self) -> None:
        state = self._pc.connectionState
        if state == "connected":
            self._connected.set()
        elif state in ("failed", "closed"):
            self._gone_because(state)

    async def _connected_within(self, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(self._connected.wait(), timeout_s)
        except TimeoutError:
            self._gone_because("connect_timeout")

    def _gone_because(self, why: str) -> None:
        if not self._gone:
            self._gone = True
            self._on_gone(why)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._gone_because("closed")  # once: the edge's own close is told, and returns at once
        PeerLink.live -= 1
        if self._options.count is not None:
            self._options.count(-1)
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        await self._pc.close()
