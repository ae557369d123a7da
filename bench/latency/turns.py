"""The turns of one lane of the latency bench: when it speaks, and what each turn measured.

Pure (times are given, never read). A lane is one client session streaming 20 ms frames on a
fixed clock, as a microphone or a phone line does: every ``slot_ms`` a turn begins with
``speech_ms`` of speech, and silence fills the rest of the slot, while the fake's VAD hears the
silence out and answers. ``TurnSchedule`` says what frame ``k`` carries.

``TurnTracker`` turns what happened into one ``Turn`` per slot. The **end of the user's speech**
is the moment the turn's last speech frame was handed to the socket; the **first reply sound**
is the arrival of the first message carrying reply audio after it. Their difference is the
turn's voice-to-voice latency. A turn is not measured when:

- ``missed``: no reply audio came before the next turn began;
- ``overlapped``: the previous reply had not started when this turn's speech began, or reply
  audio arrived from ``quiet_s`` before this turn's speech began until its end (the previous
  reply was still playing: the next audio could be its tail, and the fake would take the speech
  for a barge-in).

With a slot long enough for the reply to play out (the bench's plans), neither happens; both are
counted and reported, with the shortest quiet between a reply's last audio and the next turn's
speech (``min_quiet_ms``). Audio that arrives outside a reply is counted as ``stray``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.latency.audio import FRAME_MS

__all__ = ["Turn", "TurnSchedule", "TurnTracker"]


@dataclass(frozen=True)
class TurnSchedule:
    turns: int  # measured turns
    warmup: int  # unmeasured turns before them
    slot_ms: int
    speech_ms: int

    def __post_init__(self) -> None:
        if self.turns < 1 or self.warmup < 0:
            raise ValueError("turns must be ≥ 1 and warmup ≥ 0")
        if self.speech_ms % FRAME_MS or self.slot_ms % FRAME_MS:
            raise ValueError(f"slot_ms and speech_ms must be multiples of {FRAME_MS}")
        if not 0 < self.speech_ms < self.slot_ms:
            raise ValueError("speech_ms must be > 0 and shorter than slot_ms")

    @property
    def frames_per_slot(self) -> int:
        return self.slot_ms // FRAME_MS

    @property
    def speech_frames(self) -> int:
        return self.speech_ms // FRAME_MS

    @property
    def total_turns(self) -> int:
        return self.warmup + self.turns

    @property
    def total_frames(self) -> int:
        return self.total_turns * self.frames_per_slot

    @property
    def duration_s(self) -> float:
        return self.total_frames * FRAME_MS / 1000

    def turn_of(self, frame: int) -> int:
        return frame // self.frames_per_slot

    def speech_index(self, frame: int) -> int | None:
        """Which frame of the utterance frame ``frame`` carries; ``None``: silence."""
        index = frame % self.frames_per_slot
        return index if index < self.speech_frames else None

    def is_last_speech(self, frame: int) -> bool:
        return frame % self.frames_per_slot == self.speech_frames - 1


@dataclass
class Turn:
    index: int  # from 0, warm-up turns included
    speech_start_s: float
    speech_end_s: float | None = None
    first_audio_s: float | None = None
    last_audio_s: float | None = None
    overlapped: bool = False

    @property
    def latency_s(self) -> float | None:
        if self.overlapped or self.speech_end_s is None or self.first_audio_s is None:
            return None
        return self.first_audio_s - self.speech_end_s

    @property
    def missed(self) -> bool:
        return self.speech_end_s is not None and self.first_audio_s is None


@dataclass
class TurnTracker:
    quiet_s: float = 0.1
    turns: list[Turn] = field(default_factory=list)
    stray: int = 0  # audio messages outside any reply
    _last_audio_s: float | None = None
    _current: Turn | None = None  # the latest turn

    def speech_started(self, index: int, at_s: float) -> None:
        """The first speech frame of turn ``index`` is sent at ``at_s``."""
        previous = self._current
        turn = Turn(index, speech_start_s=at_s)
        turn.overlapped = (previous is not None and previous.first_audio_s is None) or (
            self._recent(at_s)
        )
        self.turns.append(turn)
        self._current = turn

    def speech_ended(self, index: int, at_s: float) -> None:
        """The last speech frame of turn ``index`` is sent at ``at_s``."""
        turn = self._current
        if turn is None or turn.index != index:
            raise ValueError(f"turn {index} ended without its start")
        turn.speech_end_s = at_s

    def audio(self, at_s: float) -> None:
        """A message carrying reply audio arrived at ``at_s``."""
        self._last_audio_s = at_s
        turn = self._current
        if turn is None:
            self.stray += 1
        elif turn.speech_end_s is None:  # while the user speaks: the previous reply's tail
            turn.overlapped = True
            self.stray += 1
        else:
            if turn.first_audio_s is None:
                turn.first_audio_s = at_s
            turn.last_audio_s = at_s

    def _recent(self, at_s: float) -> bool:
        return self._last_audio_s is not None and at_s - self._last_audio_s < self.quiet_s

    def latencies_s(self, warmup: int) -> list[float | None]:
        """Per measured turn (warm-up turns left out): its latency, or ``None``."""
        return [turn.latency_s for turn in self.turns if turn.index >= warmup]

    def counts(self, warmup: int) -> dict[str, int | float | None]:
        measured = [turn for turn in self.turns if turn.index >= warmup]
        quiet = [
            later.speech_start_s - turn.last_audio_s
            for turn, later in zip(self.turns, self.turns[1:], strict=False)
            if turn.index >= warmup and turn.last_audio_s is not None
        ]
        return {
            "turns": len(measured),
            "measured": sum(turn.latency_s is not None for turn in measured),
            "missed": sum(turn.missed for turn in measured),
            "overlapped": sum(turn.overlapped for turn in measured),
            "stray_audio_messages": self.stray,
            "min_quiet_ms": round(min(quiet) * 1000, 1) if quiet else None,
        }
