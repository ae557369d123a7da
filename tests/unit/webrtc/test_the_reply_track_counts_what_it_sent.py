"""The reply track: 20 ms frames at real time, silence when idle, each response's sent audio
reported (every 60 ms and at its last queued frame), nothing of a cleared response sent."""

from __future__ import annotations

import numpy as np

from gateway.edges.rtc.audio_out import FRAME_BYTES, FRAME_SAMPLES, RATE, PcmOutTrack


def tone(ms: int) -> bytes:
    return np.full(RATE * ms // 1000, 5000, dtype="<i2").tobytes()


async def frames(track: PcmOutTrack, count: int) -> list[int]:
    peaks = []
    for _ in range(count):
        frame = await track.recv()
        assert frame.samples == FRAME_SAMPLES
        assert frame.sample_rate == RATE
        peaks.append(int(np.abs(frame.to_ndarray()).max()))
    return peaks


async def test_each_responses_sent_audio_is_reported_and_a_clear_sends_nothing_more() -> None:
    reports: list[tuple[str, int]] = []
    track = PcmOutTrack(on_played=lambda rid, ms: reports.append((rid, ms)))
    track.begin("resp_a")
    track.push(tone(150))  # 7 whole frames and 10 ms held
    track.flush()  # the reply ended: its last 10 ms go, padded
    assert track.queued_ms == 160
    peaks = await frames(track, 10)
    assert [p > 0 for p in peaks] == [True] * 8 + [False] * 2  # then silence
    assert reports == [("resp_a", 60), ("resp_a", 120), ("resp_a", 160)]
    assert track.sent_audio_ms == 160

    reports.clear()
    track.begin("resp_b")
    track.push(tone(200))
    await frames(track, 4)
    track.clear()  # barge-in: what is queued never goes
    assert track.queued_ms == 0
    assert max(await frames(track, 3)) == 0
    assert reports == [("resp_b", 60)]

    reports.clear()
    track.begin(None)  # audio of no response (a holding line): sent, not reported
    track.push(tone(60))
    assert max(await frames(track, 3)) > 0
    assert reports == []


async def test_frames_keep_their_timestamps_continuous() -> None:
    track = PcmOutTrack()
    track.push(bytes(FRAME_BYTES * 2))
    stamps = [(await track.recv()).pts for _ in range(4)]
    assert stamps == [0, FRAME_SAMPLES, 2 * FRAME_SAMPLES, 3 * FRAME_SAMPLES]
