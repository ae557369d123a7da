"""A WebRTC lane's microphone: a track that plays a ``TurnSchedule`` on a fixed 20 ms clock.

aiortc's sender calls ``recv()`` back to back and encodes what it returns (Opus, in a thread of
the loop's executor), so the track paces itself, as the gateway's ``PcmOutTrack`` does. Before
the schedule's start (the lane is open, the other lanes are still opening) it sends silence on
its own clock; from ``begin(start)`` frame ``k`` of the schedule is due at ``start + k × 20 ms``
on the loop's clock (``time.monotonic``, the same in every process of the bench), exactly as a
WebSocket lane's frame ``k`` (``bench.webrtc.lanes``). After the schedule: silence, until closed.

The **end of the user's speech** is the moment the turn's last speech frame is handed to the
encoder (``recv`` returns it): the WebSocket lane's is the moment its last speech frame is
handed to the socket. Opus encoding and packetisation come after, as the socket's send does.
"""

from __future__ import annotations

import asyncio
import fractions
from collections.abc import Callable

import av
from aiortc.mediastreams import MediaStreamTrack

from bench.latency.audio import FRAME_MS, WireAudio
from bench.latency.turns import TurnSchedule

__all__ = ["RATE", "ScheduledMic"]

RATE = 48000
_SAMPLES = RATE * FRAME_MS // 1000
_PERIOD_S = FRAME_MS / 1000
_TIME_BASE = fractions.Fraction(1, RATE)

# (turn, at_s): the first speech frame of turn ``turn`` left at ``at_s``; the same for the last
SpeechStamp = Callable[[int, float], None]


class ScheduledMic(MediaStreamTrack):
    kind = "audio"

    def __init__(
        self,
        schedule: TurnSchedule,
        audio: WireAudio,
        on_speech_start: SpeechStamp,
        on_speech_end: SpeechStamp,
    ) -> None:
        super().__init__()
        if audio.rate != RATE or audio.wire != "pcm16":
            raise ValueError("the microphone is PCM16 at 48 kHz")
        self._schedule = schedule
        self._audio = audio
        self._on_start = on_speech_start
        self._on_end = on_speech_end
        self._start: float | None = None
        self._index = 0  # the next frame of the schedule
        self._next_at: float | None = None  # the pre-roll's clock
        self._pts = 0
        self.send_lags_s: list[float] = []  # per scheduled frame: handed over − due

    def begin(self, start: float) -> None:
        """Frame 0 of the schedule is due at ``start`` (the loop's clock)."""
        self._start = start

    @property
    def finished(self) -> bool:
        return self._index >= self._schedule.total_frames

    async def recv(self) -> av.AudioFrame:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._next_at is None:
            self._next_at = now
        start = self._start
        scheduled = start is not None and (
            self._index > 0 or self._next_at >= start - _PERIOD_S / 2
        )
        if scheduled and start is not None:
            due = start + self._index * _PERIOD_S
        else:
            due = self._next_at
            self._next_at += _PERIOD_S
        if due > now:
            await asyncio.sleep(due - now)
        pcm = self._audio.silence
        if scheduled and not self.finished:
            frame = self._index
            index = self._schedule.speech_index(frame)
            handed = loop.time()
            if index is not None:
                pcm = self._audio.speech[index]
                if index == 0:
                    self._on_start(self._schedule.turn_of(frame), handed)
                if self._schedule.is_last_speech(frame):
                    self._on_end(self._schedule.turn_of(frame), handed)
            self.send_lags_s.append(handed - due)
        if scheduled:
            self._index += 1
        frame_out = av.AudioFrame(format="s16", layout="mono", samples=_SAMPLES)
        frame_out.planes[0].update(pcm)
        frame_out.sample_rate = RATE
        frame_out.pts = self._pts
        frame_out.time_base = _TIME_BASE
        self._pts += _SAMPLES
        return frame_out
