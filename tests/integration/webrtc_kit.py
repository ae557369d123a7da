"""A WebRTC peer for tests (aiortc, over loopback), as a browser would be: a microphone track
the test pushes 48 kHz PCM16 into, a data channel, and the gateway's reply track read into
per-frame peak levels."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from gateway.edges.rtc.audio_out import PcmOutTrack

LOUD = 1000  # a frame whose peak is over this carries speech, not silence


class Peer:
    def __init__(self, label: str = "events", *, audio: bool = True) -> None:
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.microphone = PcmOutTrack()
        if audio:
            self.pc.addTrack(self.microphone)
        self.channel = self.pc.createDataChannel(label)
        self.events: list[dict[str, Any]] = []
        self.levels: list[int] = []  # peak of each frame received
        self.opened = asyncio.Event()
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.channel.on("open", self.opened.set)
        self.channel.on("message", self._on_message)
        self.pc.on(
            "track", lambda track: self._tasks.append(asyncio.create_task(self._listen(track)))
        )

    def _on_message(self, message: str) -> None:
        self.events.append(orjson.loads(message))
        self._changed.set()

    async def _listen(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            self.levels.append(int(np.abs(frame.to_ndarray()).max()))  # type: ignore[union-attr]
            self._changed.set()

    async def offer(self) -> str:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        sdp: str = self.pc.localDescription.sdp
        return sdp

    async def answered(self, answer: dict[str, Any]) -> None:
        await self.pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], answer["type"]))
        await asyncio.wait_for(self.opened.wait(), 10)

    def send(self, event: dict[str, Any]) -> None:
        self.channel.send(orjson.dumps(event).decode())

    def kinds(self) -> list[str]:
        return [e["type"] for e in self.events]

    def first(self, kind: str) -> dict[str, Any]:
        return next(e for e in self.events if e["type"] == kind)

    def loud_frames(self) -> int:
        return sum(level > LOUD for level in self.levels)

    async def until(self, done: Callable[[], bool], within: float = 10.0) -> None:
        async with asyncio.timeout(within):
            while not done():
                self._changed.clear()
                await self._changed.wait()

    async def until_event(self, kind: str, within: float = 10.0) -> dict[str, Any]:
        await self.until(lambda: kind in self.kinds(), within)
        return self.first(kind)

    async def close(self) -> None:
        await self.pc.close()
        for task in self._tasks:
            task.cancel()


async def connect(http: Any, url: str, bearer: str, peer: Peer) -> None:
    """Offer to ``url`` (``/v1/webrtc/offer``), take the answer, wait for the data channel."""
    async with http.post(
        url,
        json={"sdp": await peer.offer(), "type": "offer"},
        headers={"Authorization": f"Bearer {bearer}"},
    ) as response:
        assert response.status == 200, await response.text()
        answer = await response.json()
    await peer.answered(answer)
