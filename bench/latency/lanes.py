"""The lanes of one phase of the latency bench, run side by side on one frame clock.

A lane is one client session (``bench.latency.peers``) that streams a 20 ms frame every 20 ms
from its start to the end of its ``TurnSchedule``, speech or silence, as a microphone or a phone
line does, while its reader stamps the arrival of reply audio (``TurnTracker``). Every lane of a
phase starts on the same schedule, lane ``i`` shifted by ``i / lanes`` of a slot: the lanes take
turns ending their utterances, so no two replies are computed at the same moment, and a direct
lane and its gateway lane are neighbours in time, hit alike by whatever else the machine does.

Frame ``n`` is due at ``start + n × 20 ms`` on the loop clock (a late frame does not push the
later ones back). A peer that streams longer chunks (Exotel's 100 ms) holds frames until one is
whole; the chunk leaves at its last frame's due time, and a turn's speech ends when the message
holding its last speech frame leaves. Everything is bounded: the opening (``OPEN_TIMEOUT_S``
per lane), the reader (the schedule's end plus ``GRACE_S``), the closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench.latency.audio import FRAME_MS, WireAudio
from bench.latency.peers import Peer
from bench.latency.turns import TurnSchedule, TurnTracker

__all__ = ["LaneResult", "LaneSpec", "run_phase"]

OPEN_TIMEOUT_S = 15.0
GRACE_S = 2.0
CLOSE_TIMEOUT_S = 5.0
START_MARGIN_S = 0.5
Target = Literal["direct", "gateway"]


@dataclass(frozen=True)
class LaneSpec:
    path: str  # e.g. "browser_16k", "phone", "phone_exotel"
    upstream: str  # "openai" | "gemini"
    target: Target
    make_peer: Callable[[], Peer]
    audio: WireAudio
    ca_file: Path | None = None  # to trust a wss:// fake

    @property
    def name(self) -> str:
        return f"{self.upstream}/{self.path}/{self.target}"


@dataclass
class LaneResult:
    spec: LaneSpec
    tracker: TurnTracker
    setup_s: float = 0.0
    frames_sent: int = 0
    send_lags_s: list[float] = field(default_factory=list)
    closed_early: bool = False
    events: dict[str, int] = field(default_factory=dict)


@dataclass
class _Lane:
    spec: LaneSpec
    peer: Peer
    ws: ClientConnection
    result: LaneResult


async def _open(spec: LaneSpec, loop: asyncio.AbstractEventLoop) -> _Lane:
    began = loop.time()
    peer = spec.make_peer()
    tls = None
    if peer.url.startswith("wss://"):
        tls = ssl.create_default_context(cafile=None if spec.ca_file is None else str(spec.ca_file))
    async with asyncio.timeout(OPEN_TIMEOUT_S):
        await peer.prepare()
        ws = await connect(
            peer.url,
            additional_headers=peer.headers,
            compression=None,
            max_size=None,
            ping_interval=None,
            close_timeout=2.0,
            ssl=tls,
        )
        try:
            await peer.handshake(ws)
        except BaseException:
            await ws.close()
            raise
    result = LaneResult(spec, TurnTracker(), setup_s=loop.time() - began)
    return _Lane(spec, peer, ws, result)


async def _send(lane: _Lane, schedule: TurnSchedule, start: float) -> None:
    loop = asyncio.get_running_loop()
    audio, tracker, result = lane.spec.audio, lane.result.tracker, lane.result
    period = FRAME_MS / 1000
    ended: int | None = None  # a turn whose last speech frame is held by the peer
    try:
        for frame in range(schedule.total_frames):
            due = start + frame * period
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            index = schedule.speech_index(frame)
            data = audio.silence if index is None else audio.speech[index]
            message = lane.peer.encode(data)
            now = loop.time()
            if index == 0:
                tracker.speech_started(schedule.turn_of(frame), now)
            if schedule.is_last_speech(frame):
                ended = schedule.turn_of(frame)
            if message is None:
                continue  # held: it leaves with the frame that completes the peer's chunk
            if ended is not None:  # the speech ends when its last frame leaves
                tracker.speech_ended(ended, now)
                ended = None
            await lane.ws.send(message)
            result.frames_sent += 1
            result.send_lags_s.append(now - due)
    except ConnectionClosed:
        result.closed_early = True


async def _receive(lane: _Lane, deadline: float) -> None:
    loop = asyncio.get_running_loop()
    tracker = lane.result.tracker
    try:
        async with asyncio.timeout_at(deadline):
            while True:
                message = await lane.ws.recv()
                arrived = loop.time()
                heard = lane.peer.hear(message)
                if heard.audio:
                    tracker.audio(arrived)
                for reply in heard.replies:
                    await lane.ws.send(reply)
    except TimeoutError:
        pass
    except ConnectionClosed:
        lane.result.closed_early = True


async def _close(lane: _Lane) -> None:
    with contextlib.suppress(ConnectionClosed, OSError):
        for message in lane.peer.goodbye():
            await lane.ws.send(message)
        await lane.ws.close()


async def run_phase(
    specs: list[LaneSpec], schedule: TurnSchedule, on_open: Callable[[str], None] | None = None
) -> list[LaneResult]:
    """Open every lane (one after the other), run them all on one clock, close them."""
    loop = asyncio.get_running_loop()
    lanes: list[_Lane] = []
    try:
        for spec in specs:
            lanes.append(await _open(spec, loop))
            if on_open is not None:
                on_open(spec.name)
        start = loop.time() + START_MARGIN_S
        slot_s = schedule.slot_ms / 1000
        tasks: list[asyncio.Task[None]] = []
        for index, lane in enumerate(lanes):
            lane_start = start + index * slot_s / len(lanes)
            tasks.append(asyncio.create_task(_send(lane, schedule, lane_start)))
            deadline = lane_start + schedule.duration_s + GRACE_S
            tasks.append(asyncio.create_task(_receive(lane, deadline)))
        try:
            async with asyncio.timeout(START_MARGIN_S + slot_s + schedule.duration_s + 2 * GRACE_S):
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        closing = asyncio.gather(*(_close(lane) for lane in lanes))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
    for lane in lanes:
        lane.result.events = dict(lane.peer.events)
    return [lane.result for lane in lanes]
