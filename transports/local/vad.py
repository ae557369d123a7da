"""A deterministic energy VAD for the local model: PCM in, speech boundaries out.

Theory of operation: the audio is cut into 10 ms frames, each judged speech when its RMS is above
``threshold_dbfs``. ``min_speech_ms`` of *consecutive* speech frames make an utterance start (a
shorter burst is a click and is forgotten); ``end_silence_ms`` of silence after the last speech
frame end it. The utterance's duration runs from its first speech frame to the end of its last
speech frame. All positions are counted in samples of the audio itself, never in wall-clock time,
so the result depends only on the bytes fed in, not on how fast they arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

from transports.local.tones import n_samples, rms_dbfs

__all__ = ["EnergyVad", "UtteranceEnded", "VadEvent", "VadSpeechStarted"]

_FRAME_MS = 10


@dataclass(frozen=True, slots=True)
class VadSpeechStarted:
    """The user started talking (after ``min_speech_ms`` of speech)."""


@dataclass(frozen=True, slots=True)
class UtteranceEnded:
    duration_ms: int
    # False when a commit ended a buffer in which no speech was detected (push-to-talk).
    speech_detected: bool


VadEvent = VadSpeechStarted | UtteranceEnded


class EnergyVad:
    def __init__(
        self,
        rate: int,
        *,
        threshold_dbfs: float = -40.0,
        min_speech_ms: int = 60,
        end_silence_ms: int = 300,
    ) -> None:
        self.rate = rate
        self.threshold_dbfs = threshold_dbfs
        self._frame_bytes = 2 * max(1, n_samples(_FRAME_MS, rate))
        self._min_speech_samples = n_samples(min_speech_ms, rate)
        self._end_silence_samples = n_samples(end_silence_ms, rate)
        self._unframed = bytearray()
        self._position = 0  # samples judged so far (absolute; only differences matter)
        self._reset_utterance()

    @property
    def speaking(self) -> bool:
        """True between a speech start and the end of that utterance."""
        return self._utterance_start is not None

    def feed(self, pcm: bytes) -> list[VadEvent]:
        self._unframed += pcm
        events: list[VadEvent] = []
        frame_bytes = self._frame_bytes
        whole = len(self._unframed) - len(self._unframed) % frame_bytes
        for offset in range(0, whole, frame_bytes):
            event = self._judge(bytes(self._unframed[offset : offset + frame_bytes]))
            if event is not None:
                events.append(event)
        del self._unframed[:whole]
        return events

    def commit(self) -> UtteranceEnded | None:
        """End the utterance now (push-to-talk); ``None`` when nothing is buffered."""
        if self._utterance_start is not None:
            ended = UtteranceEnded(self._speech_ms(), speech_detected=True)
        else:
            buffered = self._buffered_samples + len(self._unframed) // 2
            if buffered == 0:
                return None
            ended = UtteranceEnded(round(buffered * 1000 / self.rate), speech_detected=False)
        self.clear()
        return ended

    def clear(self) -> None:
        """Drop buffered audio and any utterance in progress, without an event."""
        self._unframed.clear()
        self._reset_utterance()

    def _reset_utterance(self) -> None:
        self._buffered_samples = 0  # judged samples since the last utterance ended or a clear
        self._run_start: int | None = None  # first sample of the current run of speech frames
        self._utterance_start: int | None = None
        self._last_speech_end = 0
        self._silence_samples = 0

    def _speech_ms(self) -> int:
        assert self._utterance_start is not None
        return round((self._last_speech_end - self._utterance_start) * 1000 / self.rate)

    def _judge(self, frame: bytes) -> VadEvent | None:
        start = self._position
        end = start + len(frame) // 2
        self._position = end
        self._buffered_samples += end - start
        if rms_dbfs(frame) > self.threshold_dbfs:
            if self._run_start is None:
                self._run_start = start
            self._last_speech_end = end
            self._silence_samples = 0
            if self._utterance_start is None and end - self._run_start >= self._min_speech_samples:
                self._utterance_start = self._run_start
                return VadSpeechStarted()
            return None
        self._run_start = None
        if self._utterance_start is None:
            return None
        self._silence_samples += end - start
        if self._silence_samples < self._end_silence_samples:
            return None
        ended = UtteranceEnded(self._speech_ms(), speech_detected=True)
        self._reset_utterance()
        return ended
