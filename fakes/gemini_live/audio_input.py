"""The user's audio as the fake Gemini Live server hears it: server VAD or manual activity.

Pure: PCM in, facts out. Audio is 16-bit little-endian mono PCM at the rate its MIME type names
(``audio/pcm;rate=16000``; 16 kHz when no rate is given). Two modes, fixed by the setup:

- automatic activity detection (the default): the PCM feeds an ``EnergyVad`` (``transports.local``)
  whose end-of-speech silence is the setup's ``silenceDurationMs`` (the VAD's own default when
  unset). ``SpeechStarted`` when it hears speech (the barge-in trigger), ``UtteranceEnded`` with
  the speech's duration when the silence ends it. ``audioStreamEnd`` ends an utterance in
  progress at once (the microphone was closed);
- manual (``automaticActivityDetection.disabled``): ``activity_start`` opens an utterance, the
  audio until ``activity_end`` is counted, and ``activity_end`` gives its duration. Audio outside
  an activity is heard (it counts in ``heard_ms``) but is no utterance.

Durations depend only on the bytes fed in, never on a clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from transports.local.vad import EnergyVad, VadSpeechStarted

__all__ = [
    "DEFAULT_INPUT_RATE",
    "AudioInput",
    "InputEvent",
    "SpeechStarted",
    "UtteranceEnded",
    "pcm_rate",
]

DEFAULT_INPUT_RATE = 16000
_RATE = re.compile(r";\s*rate\s*=\s*(\d+)")


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The user started talking (or sent ``activityStart``)."""


@dataclass(frozen=True, slots=True)
class UtteranceEnded:
    duration_ms: int


InputEvent = SpeechStarted | UtteranceEnded


def pcm_rate(mime_type: object) -> int | None:
    """The sample rate of an ``audio/pcm`` MIME type; ``None`` for anything else."""
    if not isinstance(mime_type, str) or not mime_type.strip().lower().startswith("audio/pcm"):
        return None
    match = _RATE.search(mime_type)
    rate = int(match.group(1)) if match else DEFAULT_INPUT_RATE
    return rate if 1000 <= rate <= 192000 else None


class AudioInput:
    def __init__(self, *, automatic: bool = True, silence_duration_ms: int | None = None) -> None:
        self.automatic = automatic
        self.silence_duration_ms = silence_duration_ms
        self.heard_ms = 0.0  # all audio received
        self._vad: EnergyVad | None = None
        self._activity_ms: float | None = None  # manual mode: audio in the open activity

    @property
    def in_activity(self) -> bool:
        """Manual mode: between ``activity_start`` and ``activity_end``."""
        return self._activity_ms is not None

    @property
    def speaking(self) -> bool:
        return self._vad is not None and self._vad.speaking

    def feed(self, pcm: bytes, rate: int = DEFAULT_INPUT_RATE) -> list[InputEvent]:
        duration_ms = len(pcm) // 2 * 1000 / rate
        self.heard_ms += duration_ms
        if not self.automatic:
            if self._activity_ms is not None:
                self._activity_ms += duration_ms
            return []
        vad = self._vad_for(rate)
        return [
            SpeechStarted()
            if isinstance(found, VadSpeechStarted)
            else UtteranceEnded(found.duration_ms)
            for found in vad.feed(pcm)
        ]

    def stream_end(self) -> list[InputEvent]:
        """``audioStreamEnd``: an utterance in progress ends now; partial audio is dropped."""
        if self._vad is None:
            return []
        if self._vad.speaking:
            ended = self._vad.commit()
            if ended is not None:
                return [UtteranceEnded(ended.duration_ms)]
        self._vad.clear()
        return []

    def activity_start(self) -> None:
        self._activity_ms = 0.0

    def activity_end(self) -> UtteranceEnded | None:
        if self._activity_ms is None:
            return None
        duration_ms, self._activity_ms = self._activity_ms, None
        return UtteranceEnded(round(duration_ms))

    def clear(self) -> None:
        if self._vad is not None:
            self._vad.clear()

    def _vad_for(self, rate: int) -> EnergyVad:
        if self._vad is None or self._vad.rate != rate:
            if self.silence_duration_ms is None:
                self._vad = EnergyVad(rate)
            else:
                self._vad = EnergyVad(rate, end_silence_ms=self.silence_duration_ms)
        return self._vad
