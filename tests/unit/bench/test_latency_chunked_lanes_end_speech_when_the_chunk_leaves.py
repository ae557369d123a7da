"""A lane whose peer streams longer chunks than 20 ms (Exotel's 100 ms) sends a message only when
a chunk is whole, and its turns' speech ends when the chunk holding the last speech frame
leaves, not when that frame was due."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.latency.audio import utterance
from bench.latency.carrier_peers import ExotelPhone
from bench.latency.lanes import LaneResult, LaneSpec, _Lane, _send
from bench.latency.turns import TurnSchedule, TurnTracker


class Stamps(TurnTracker):
    """The tracker, remembering when each turn's speech ended."""

    def __init__(self) -> None:
        super().__init__()
        self.ended: list[tuple[int, float]] = []

    def speech_ended(self, index: int, at_s: float) -> None:
        self.ended.append((index, at_s))
        super().speech_ended(index, at_s)


class Socket:
    """Records each message sent, with how many speech ends were stamped before it."""

    def __init__(self, tracker: Stamps) -> None:
        self.tracker = tracker
        self.sent: list[tuple[int, str | bytes]] = []

    async def send(self, message: str | bytes) -> None:
        self.sent.append((len(self.tracker.ended), message))

    def ends_before(self) -> list[int]:
        """The index of each message sent right after a speech end was stamped."""
        counts = [0] + [ended for ended, _ in self.sent]
        return [i for i in range(len(self.sent)) if counts[i + 1] > counts[i]]


async def run(peer: Any, speech_ms: int, slot_ms: int) -> tuple[Socket, Stamps, LaneResult]:
    loop = asyncio.get_running_loop()
    schedule = TurnSchedule(turns=2, warmup=0, slot_ms=slot_ms, speech_ms=speech_ms)
    spec = LaneSpec(
        "phone_exotel", "openai", "gateway", lambda: peer, utterance("pcm16", 8000, speech_ms)
    )
    tracker = Stamps()
    result = LaneResult(spec, tracker)
    socket = Socket(tracker)
    lane = _Lane(spec, peer, socket, result)  # type: ignore[arg-type]
    await _send(lane, schedule, loop.time() - 10)  # every frame overdue: sent at once, in order
    return socket, tracker, result


async def test_a_chunked_lane_sends_one_message_per_chunk_and_ends_speech_with_it() -> None:
    socket, tracker, result = await run(ExotelPhone("http://gw"), speech_ms=100, slot_ms=200)
    assert result.frames_sent == len(socket.sent) == 4  # 2 turns × 200 ms in 100 ms chunks
    assert [index for index, _ in tracker.ended] == [0, 1]
    assert socket.ends_before() == [0, 2]  # each turn's first chunk holds all its speech
    assert tracker.counts(0)["turns"] == 2


async def test_a_speech_end_inside_a_chunk_waits_for_the_chunk() -> None:
    socket, tracker, result = await run(ExotelPhone("http://gw"), speech_ms=60, slot_ms=200)
    # the 3rd frame ends the speech; it leaves with the 5th, in the turn's first chunk
    assert [index for index, _ in tracker.ended] == [0, 1]
    assert socket.ends_before() == [0, 2]
    assert len(result.send_lags_s) == 4


async def test_a_frame_by_frame_lane_ends_speech_with_its_last_speech_frame() -> None:
    class Frames:
        def encode(self, frame: bytes) -> bytes:
            return frame

    socket, _, result = await run(Frames(), speech_ms=60, slot_ms=200)
    assert result.frames_sent == 20
    assert socket.ends_before() == [2, 12]
