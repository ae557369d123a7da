"""The two kinds of lane of ``scripts/bench webrtc``: one client session each, on one clock.

A lane is a voice session that streams a 20 ms frame every 20 ms, speech or silence, as a
microphone does (``TurnSchedule``, from ``bench.latency``), while it stamps the arrival of reply
audio (``TurnTracker``). Both kinds use the same session: voice mode, PCM16 at 48 kHz in and out
(a WebRTC session is 48 kHz both ways whatever it asks; the WebSocket lane asks for 48 kHz), so
the gateway resamples the same way for both and only the transport differs.

- ``WsLane``: ``/v1/session``, ``session.start`` then binary frames. Reply audio: a binary
  frame whose peak is over ``THRESHOLD``.
- ``WebRtcLane``: ``POST /v1/webrtc/offer`` with an aiortc peer (no ICE servers: host
  candidates on loopback), a data channel for the native protocol, the microphone a
  ``ScheduledMic``. Reply audio: a frame of the received track (Opus decoded, out of aiortc's
  jitter buffer) whose peak is over ``THRESHOLD``. A second tracker stamps the arrival of the
  reply's RTP packets before the jitter buffer (an Opus packet of more than ``RTP_AUDIO_BYTES``:
  digital silence encodes to 3 bytes, a tone to about 300), to say what the client's own jitter
  buffer holds back.

The end of the user's speech is when its last speech frame is handed to the socket (WebSocket)
or to the encoder (WebRTC). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import aiohttp
import av
import numpy as np
import orjson
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtp import RtpPacket
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench.latency.audio import FRAME_MS, WireAudio
from bench.latency.turns import TurnSchedule, TurnTracker
from bench.webrtc.mic import RATE, ScheduledMic

__all__ = ["THRESHOLD", "Lane", "LaneConfig", "LaneRun", "WebRtcLane", "WsLane", "peak"]

THRESHOLD = 1000  # of 32767: about -30 dBFS; the fake's reply tones peak at 0.3 of full scale
RTP_AUDIO_BYTES = 20
OPEN_TIMEOUT_S = 20.0
CLOSE_TIMEOUT_S = 5.0
Kind = Literal["webrtc", "ws"]


@dataclass(frozen=True)
class LaneConfig:
    kind: Kind
    group: str  # "webrtc", "ws", and the A/A groups "webrtc_aa", "ws_aa"
    offset_s: float  # its turns start this far into the common clock


@dataclass
class LaneRun:
    config: LaneConfig
    tracker: TurnTracker = field(default_factory=TurnTracker)
    rtp_tracker: TurnTracker | None = None  # WebRTC: reply RTP packets, before the jitter buffer
    setup_s: float = 0.0
    send_lags_s: list[float] = field(default_factory=list)
    frames_in: int = 0
    closed_early: bool = False
    events: Counter[str] = field(default_factory=Counter)


class Lane(Protocol):
    run: LaneRun

    async def open(self) -> None: ...

    async def play(self, start: float, deadline: float) -> None: ...

    async def close(self) -> None: ...


def peak(pcm: bytes | np.ndarray[Any, Any]) -> int:
    """The largest absolute sample of PCM16 audio (bytes, or an int16 array of any shape)."""
    samples = np.frombuffer(pcm, "<i2") if isinstance(pcm, bytes) else pcm
    if samples.size == 0:
        return 0
    return max(int(samples.max()), -int(samples.min()))


def _session_start() -> str:
    audio = {"input_rate": RATE, "output_rate": RATE}
    return orjson.dumps({"type": "session.start", "mode": "voice", "audio": audio}).decode()


class WsLane:
    def __init__(
        self, config: LaneConfig, base_url: str, schedule: TurnSchedule, audio: WireAudio
    ) -> None:
        self.run = LaneRun(config)
        self._url = base_url.replace("http://", "ws://", 1) + "/v1/session"
        self._schedule = schedule
        self._audio = audio
        self._ws: ClientConnection | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.timeout(OPEN_TIMEOUT_S):
            ws = await connect(self._url, compression=None, max_size=None, ping_interval=None)
            self._ws = ws
            await ws.send(_session_start())
            while True:
                event = orjson.loads(await ws.recv())
                self._note(event)
                if event.get("type") == "session.started":
                    break
                if event.get("type") in ("error", "session.ended"):
                    raise RuntimeError(f"session.start refused: {event}")
        self.run.setup_s = loop.time() - began

    def _note(self, event: Any) -> None:
        if isinstance(event, dict):
            self.run.events[str(event.get("type"))] += 1

    async def play(self, start: float, deadline: float) -> None:
        sender = asyncio.create_task(self._send(start))
        try:
            await self._receive(deadline)
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender

    async def _send(self, start: float) -> None:
        loop, ws, run = asyncio.get_running_loop(), self._ws, self.run
        assert ws is not None
        schedule, audio, tracker = self._schedule, self._audio, self.run.tracker
        try:
            for frame in range(schedule.total_frames):
                due = start + frame * FRAME_MS / 1000
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                index = schedule.speech_index(frame)
                now = loop.time()
                if index == 0:
                    tracker.speech_started(schedule.turn_of(frame), now)
                if schedule.is_last_speech(frame):
                    tracker.speech_ended(schedule.turn_of(frame), now)
                await ws.send(audio.silence if index is None else audio.speech[index])
                run.send_lags_s.append(now - due)
        except ConnectionClosed:
            run.closed_early = True

    async def _receive(self, deadline: float) -> None:
        loop, ws, run = asyncio.get_running_loop(), self._ws, self.run
        assert ws is not None
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    message = await ws.recv()
                    arrived = loop.time()
                    if isinstance(message, bytes):
                        run.frames_in += 1
                        if peak(message) > THRESHOLD:
                            run.tracker.audio(arrived)
                    else:
                        self._note(orjson.loads(message))
        except TimeoutError:
            pass
        except ConnectionClosed:
            run.closed_early = True

    async def close(self) -> None:
        ws = self._ws
        if ws is None:
            return
        with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await ws.send('{"type":"session.end"}')
                await ws.close()


class WebRtcLane:
    def __init__(
        self,
        config: LaneConfig,
        base_url: str,
        schedule: TurnSchedule,
        audio: WireAudio,
        http: aiohttp.ClientSession,
    ) -> None:
        self.run = LaneRun(config, rtp_tracker=TurnTracker())
        self._url = base_url + "/v1/webrtc/offer"
        self._http = http
        self._mic = ScheduledMic(schedule, audio, self._speech_started, self._speech_ended)
        self._pc: RTCPeerConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._ended = asyncio.Event()
        self._closing = False
        self._channel: Any = None
        self._failed: str | None = None

    def _speech_started(self, turn: int, at_s: float) -> None:
        self.run.tracker.speech_started(turn, at_s)
        assert self.run.rtp_tracker is not None
        self.run.rtp_tracker.speech_started(turn, at_s)

    def _speech_ended(self, turn: int, at_s: float) -> None:
        self.run.tracker.speech_ended(turn, at_s)
        assert self.run.rtp_tracker is not None
        self.run.rtp_tracker.speech_ended(turn, at_s)

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self._pc = pc
        pc.addTrack(self._mic)
        channel = self._channel = pc.createDataChannel("events")
        opened = asyncio.Event()
        channel.on("open", opened.set)
        channel.on("message", self._on_message)
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_state)
        async with asyncio.timeout(OPEN_TIMEOUT_S):
            await pc.setLocalDescription(await pc.createOffer())
            offer = {"sdp": pc.localDescription.sdp, "type": "offer"}
            async with self._http.post(self._url, json=offer) as response:
                if response.status != 200:
                    raise RuntimeError(f"offer refused: {response.status} {await response.text()}")
                answer = await response.json()
            await pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], answer["type"]))
            for receiver in pc.getReceivers():
                self._stamp_rtp(receiver)
            await opened.wait()
            channel.send(_session_start())
            await self._started.wait()
        if self._failed is not None:
            raise RuntimeError(self._failed)
        self.run.setup_s = loop.time() - began

    def _stamp_rtp(self, receiver: Any) -> None:
        """Wrap the receiver's RTP entry point: reply audio's arrival before the jitter buffer."""
        handle = receiver._handle_rtp_packet
        tracker = self.run.rtp_tracker
        assert tracker is not None
        loop = asyncio.get_running_loop()

        async def stamped(packet: RtpPacket, arrival_time_ms: int) -> None:
            if len(packet.payload) > RTP_AUDIO_BYTES:
                tracker.audio(loop.time())
            await handle(packet, arrival_time_ms=arrival_time_ms)

        receiver._handle_rtp_packet = stamped

    def _on_message(self, message: str | bytes) -> None:
        event = orjson.loads(message)
        kind = str(event.get("type")) if isinstance(event, dict) else "?"
        self.run.events[kind] += 1
        if kind == "session.started":
            self._started.set()
        elif kind in ("error", "session.ended") and not self._started.is_set():
            self._failed = f"session.start refused: {event}"
            self._started.set()
        elif kind == "session.ended":
            if not self._closing:
                self.run.closed_early = True
            self._ended.set()

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio" and self._reader is None:
            self._reader = asyncio.ensure_future(self._listen(track))

    def _on_state(self) -> None:
        pc = self._pc
        failed = pc is not None and pc.connectionState in ("failed", "closed")
        if failed and self._mic.readyState == "live":  # not our own close
            self.run.closed_early = True

    async def _listen(self, track: MediaStreamTrack) -> None:
        loop, run = asyncio.get_running_loop(), self.run
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            arrived = loop.time()
            if not isinstance(frame, av.AudioFrame):
                continue
            run.frames_in += 1
            if peak(frame.to_ndarray()) > THRESHOLD:
                run.tracker.audio(arrived)

    async def play(self, start: float, deadline: float) -> None:
        self._mic.begin(start)
        delay = deadline - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(delay)
        self.run.send_lags_s = list(self._mic.send_lags_s)

    async def close(self) -> None:
        """``session.end`` first, as the WebSocket lane does (a closed peer connection alone
        leaves the session resumable for a while), then the peer connection."""
        channel = self._channel
        self._closing = True
        if channel is not None and channel.readyState == "open" and self._started.is_set():
            channel.send('{"type":"session.end"}')
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), CLOSE_TIMEOUT_S)
        self._mic.stop()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                if self._pc is not None:
                    await self._pc.close()
        reader = self._reader
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
