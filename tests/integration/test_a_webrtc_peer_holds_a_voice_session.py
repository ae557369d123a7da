"""A WebRTC peer (aiortc, over loopback) ↔ the gateway's ``/v1/webrtc/offer`` ↔ the local model:
the data channel carries the native protocol, the microphone track a spoken turn, and the
gateway's track the reply's audio. (Work in progress for issue 35: Chromium comes next.)"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import orjson
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from harness import GatewayFactory, pcm_silence, pcm_tone, token

from gateway.edges.webrtc.audio_out import PcmOutTrack


async def test_a_spoken_turn_over_webrtc_is_answered_with_audio(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    microphone = PcmOutTrack()
    pc.addTrack(microphone)
    channel = pc.createDataChannel("events")
    events: list[dict[str, Any]] = []
    changed = asyncio.Event()
    heard: list[int] = []  # peak level of each frame the gateway sent
    opened = asyncio.Event()

    channel.on("open", opened.set)

    @channel.on("message")
    def _on_message(message: str) -> None:
        events.append(orjson.loads(message))
        changed.set()

    async def listen(track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            heard.append(int(np.abs(frame.to_ndarray()).max()))  # type: ignore[union-attr]
            changed.set()

    listening: list[asyncio.Task[None]] = []
    pc.on("track", lambda track: listening.append(asyncio.ensure_future(listen(track))))

    async def until(done: Any) -> None:
        async with asyncio.timeout(10):
            while not done():
                changed.clear()
                await changed.wait()

    try:
        await pc.setLocalDescription(await pc.createOffer())
        async with gateway.http.post(
            f"{gateway.url}/v1/webrtc/offer",
            json={"sdp": pc.localDescription.sdp, "type": "offer"},
            headers={"Authorization": f"Bearer {token('alice')}"},
        ) as response:
            assert response.status == 200, await response.text()
            answer = await response.json()
        await pc.setRemoteDescription(RTCSessionDescription(**answer))
        await asyncio.wait_for(opened.wait(), 10)
        start = {"type": "session.start", "mode": "voice"}
        start["audio"] = {"input_rate": 16000, "output_rate": 24000}  # type: ignore[assignment]
        channel.send(orjson.dumps(start).decode())
        await until(lambda: any(e["type"] == "session.started" for e in events))
        started = next(e for e in events if e["type"] == "session.started")
        # The tracks are 48 kHz whatever the client asked: so is the session's audio.
        audio = started["audio"]
        assert (audio["input_rate"], audio["output_rate"]) == (48000, 48000)
        microphone.push(pcm_tone(500, rate=48000) + pcm_silence(900, rate=48000))
        await until(lambda: any(e["type"] == "response.done" for e in events))
        await until(lambda: sum(level > 1000 for level in heard) >= 10)
        assert "session.ended" not in [e["type"] for e in events]
        (session,) = gateway.manager.sessions.values()
    finally:
        await pc.close()
        for task in listening:
            task.cancel()
    # The peer connection closed: its session ends with it.
    await asyncio.wait_for(session.ended.wait(), 10)
    assert session.end_reason is not None
    assert session.end_reason.value == "client"
