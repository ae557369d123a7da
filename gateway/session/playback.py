"""What the client has heard of the assistant's responses, for truncation on barge-in. Pure.

Theory of operation. A response's audio is counted as it goes to the client (in milliseconds of
the provider's audio, from the time its first audio left; the session's audio path adds to
``audio_ms`` and sets ``first_audio_at`` itself, for every frame). The client may say
how much it actually played (``audio.playback``); without that, it cannot have played more than
the wall time since the first audio, nor more than was sent.

When the user starts talking (``barge_in``):
- a response still arriving is interrupted: its remaining audio is dropped, and the provider is
  told how much of it the user heard;
- otherwise the last response that spoke may still be playing on the client (providers send
  audio faster than real time): if the user heard less than all of it, it is cut there too, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BargeIn", "PlaybackCursor", "SpokenResponse"]


@dataclass(slots=True)
class SpokenResponse:
    response_id: str
    text: list[str] = field(default_factory=list)
    audio_ms: float = 0.0
    first_audio_at: float | None = None  # monotonic time its first audio went to the client
    played_ms: int | None = None  # what the client says it played (audio.playback)
    interrupted: bool = False
    aside: bool = False  # said outside the conversation (a holding line): not remembered

    def heard_ms(self, now: float) -> int:
        """What the user heard: the client's report, else the time since the first audio (a
        client cannot play faster than real time); never more than was sent."""
        if self.played_ms is not None:
            heard = float(self.played_ms)
        elif self.first_audio_at is not None:
            heard = (now - self.first_audio_at) * 1000
        else:
            heard = 0.0
        return int(max(0.0, min(heard, self.audio_ms)))


@dataclass(frozen=True, slots=True)
class BargeIn:
    """What a barge-in does: whether a response was interrupted, and what to truncate."""

    interrupted: bool
    truncate: tuple[str, int] | None = None  # (response id, heard ms)


class PlaybackCursor:
    def __init__(self) -> None:
        self.current: SpokenResponse | None = None
        # The last response that spoke and completed: the client may still be playing it.
        self.last_spoken: SpokenResponse | None = None

    def start(self, response_id: str) -> SpokenResponse:
        self.current = SpokenResponse(response_id)
        return self.current

    def played(self, response_id: str, played_ms: int) -> None:
        """``audio.playback``: only the response being played counts (truncation needs no
        other), so made-up ids grow nothing."""
        for response in (self.current, self.last_spoken):
            if response is not None and response.response_id == response_id:
                response.played_ms = played_ms

    def barge_in(self, now: float, *, can_truncate: bool) -> BargeIn:
        current = self.current
        interrupt = current is not None and not current.interrupted
        if interrupt:
            assert current is not None
            current.interrupted = True
        target = current if interrupt else (self.last_spoken if current is None else None)
        if target is None or not can_truncate:
            return BargeIn(interrupt)
        heard = target.heard_ms(now)
        if not interrupt and heard >= int(target.audio_ms):
            return BargeIn(interrupt)  # it had played to its end before the user spoke
        self.last_spoken = None  # cut once
        return BargeIn(interrupt, (target.response_id, heard))

    def done(self, response_id: str, status: str) -> tuple[SpokenResponse | None, str]:
        """A response ended: the one it was (None if another is in progress) and the status to
        report (a completed response the user talked over was ``interrupted``)."""
        current = self.current
        if current is None or current.response_id != response_id:
            return None, status  # e.g. a held tool response ending while the next is in progress
        self.current = None
        if current.interrupted and status == "completed":
            status = "interrupted"
        if current.audio_ms > 0 and not current.interrupted:
            self.last_spoken = current
        return current, status
