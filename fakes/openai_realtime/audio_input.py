"""The input audio buffer of the fake, with its server-VAD emulation.

Pure: audio bytes in, facts out. Without turn detection the buffer only accumulates until a
commit. With ``server_vad`` (or ``semantic_vad``, emulated the same way) the decoded audio feeds
an ``EnergyVad`` in 10 ms frames, so positions are exact to a frame:

- ``SpeechStarted(audio_start_ms)``: the VAD saw ``min_speech_ms`` of speech; the position counts
  all audio of the session and, as the API documents, includes ``prefix_padding_ms``;
- ``SpeechStopped(audio_end_ms, duration_ms, audio)``: ``silence_duration_ms`` of silence ended
  the utterance; ``audio_end_ms`` includes that silence, ``duration_ms`` is the speech the local
  brain hears, ``audio`` is the buffer being committed.

While nobody speaks only the last ``prefix_padding_ms`` of audio is kept, so a long silent
stream does not grow the buffer. A manual ``commit`` under 100 ms raises
``input_audio_buffer_commit_empty`` with the API's message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fakes.openai_realtime.audio import AudioFormat
from fakes.openai_realtime.wire import ClientError
from transports.local.vad import EnergyVad, VadSpeechStarted

__all__ = [
    "MIN_COMMIT_MS",
    "MIN_SPEECH_MS",
    "Committed",
    "InputAudio",
    "InputEvent",
    "SpeechStarted",
    "SpeechStopped",
]

MIN_SPEECH_MS = 60
MIN_COMMIT_MS = 100.0


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    audio_start_ms: int


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    audio_end_ms: int
    duration_ms: int
    audio: bytes


InputEvent = SpeechStarted | SpeechStopped


@dataclass(frozen=True, slots=True)
class Committed:
    duration_ms: int
    audio: bytes


class InputAudio:
    def __init__(self, wire: AudioFormat) -> None:
        self.wire = wire
        self._buffer = bytearray()
        self._position_ms = 0.0  # all audio of the session
        self._vad: EnergyVad | None = None
        self._vad_key: tuple[int, int] | None = None
        self._prefix_padding_ms = 0

    @property
    def vad_on(self) -> bool:
        return self._vad is not None

    @property
    def speaking(self) -> bool:
        return self._vad is not None and self._vad.speaking

    @property
    def buffered_ms(self) -> float:
        return self.wire.duration_ms(len(self._buffer))

    def configure(self, wire: AudioFormat, turn_detection: dict[str, Any] | None) -> None:
        """Follow the session: a new format or silence duration restarts the VAD."""
        self.wire = wire
        if turn_detection is None:
            self._vad, self._vad_key = None, None
            return
        self._prefix_padding_ms = int(turn_detection.get("prefix_padding_ms") or 0)
        key = (wire.rate, int(turn_detection.get("silence_duration_ms") or 500))
        if key != self._vad_key:
            self._vad = EnergyVad(key[0], min_speech_ms=MIN_SPEECH_MS, end_silence_ms=key[1])
            self._vad_key = key

    def append(self, data: bytes) -> list[InputEvent]:
        self._buffer += data
        vad = self._vad
        if vad is None:
            self._position_ms += self.wire.duration_ms(len(data))
            return []
        pcm = self.wire.to_pcm16(data)
        frame = 2 * self.wire.rate // 100  # 10 ms, the VAD's own frame
        events: list[InputEvent] = []
        for offset in range(0, len(pcm), frame):
            piece = pcm[offset : offset + frame]
            self._position_ms += len(piece) / 2 * 1000 / self.wire.rate
            for found in vad.feed(piece):
                position = round(self._position_ms)
                if isinstance(found, VadSpeechStarted):
                    start = position - MIN_SPEECH_MS - self._prefix_padding_ms
                    events.append(SpeechStarted(max(0, start)))
                else:
                    events.append(SpeechStopped(position, found.duration_ms, self._take()))
        if not vad.speaking:  # keep only the prefix padding while nobody speaks
            keep = self._prefix_padding_ms * self.wire.bytes_per_ms
            del self._buffer[: max(0, len(self._buffer) - keep)]
        return events

    def commit(self) -> Committed:
        buffered_ms = self.buffered_ms
        if buffered_ms < MIN_COMMIT_MS:
            raise ClientError(
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least 100ms "
                f"of audio, but buffer only has {buffered_ms:.2f}ms of audio.",
            )
        duration_ms = round(buffered_ms)
        if self._vad is not None:
            ended = self._vad.commit()
            if ended is not None and ended.speech_detected:
                duration_ms = ended.duration_ms
        return Committed(duration_ms, self._take())

    def clear(self) -> None:
        self._buffer.clear()
        if self._vad is not None:
            self._vad.clear()

    def _take(self) -> bytes:
        audio = bytes(self._buffer)
        self._buffer.clear()
        return audio
