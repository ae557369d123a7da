"""The session's audio on a WebRTC call's reply track, and OpenAI's ``output_audio_buffer.*``
events that say what the track is doing (``AudioSink`` of the call's ``CompatBridge``).

The session speaks PCM16 at 24 kHz (the GA format the translator counts in); the track takes
48 kHz (``gateway.edges.rtc.audio_out.PcmOutTrack``: 20 ms frames paced at real time, each
remembering its response, reporting what of each response it has sent). Per response:

- ``response.started``: the track's audio from now on is that response's (``begin``);
- its first audio: ``output_audio_buffer.started`` (after the translator's
  ``response.content_part.added``, as OpenAI sends it);
- its ``response.done``: its last partial frame goes (``flush``); once the track has sent every
  frame of it (now, or at the track's report of its last frame),
  ``output_audio_buffer.stopped``;
- the user's speech (``speech.started``), a response ending ``interrupted``, or the client's
  ``output_audio_buffer.clear``: the track is emptied at once and the response playing gets
  ``output_audio_buffer.cleared`` instead of ``stopped``; the rest of its audio is dropped.

What the track has sent of each response is handed on (``played``: the call makes it the
session's ``audio.playback``), so a barge-in truncates the model's memory at what the peer was
sent. The track's reports come from its own task: the events they cause go out through
``emit`` at once. Imports no aiortc (the track is a ``Track``): testable without a peer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gateway.audio.convert import AudioConverter
from gateway.edges.realtime.opening import AUDIO_RATE
from gateway.edges.realtime.server_wire import Ids, ServerEvent
from gateway.protocol import ResponseDone, ResponseStarted, ResponseStatus, SpeechStarted
from gateway.protocol import ServerEvent as GatewayEvent

__all__ = ["TRACK_RATE", "Track", "TrackPlayout"]

TRACK_RATE = 48000  # the track's PCM16 (PcmOutTrack.RATE), 20 ms a frame
FRAME_MS = 20
FRAME_BYTES = TRACK_RATE * FRAME_MS // 1000 * 2


class Track(Protocol):
    """What of ``PcmOutTrack`` this uses."""

    def begin(self, response_id: str | None) -> None: ...

    def push(self, pcm: bytes) -> None: ...

    def flush(self) -> None: ...

    def clear(self) -> None: ...


@dataclass(slots=True)
class _Playing:
    """One response's audio on the track."""

    ga_id: str  # its GA id (resp_…), what the events name
    pushed: int = 0  # bytes queued on the track (48 kHz)
    sent_ms: int = 0  # what the track reported sent
    started: bool = False  # output_audio_buffer.started said
    done: bool = False  # its response.done came: ``pushed`` is final
    over: bool = False  # stopped or cleared said (or nothing to say)


class TrackPlayout:
    def __init__(
        self,
        track: Track | None,
        *,
        ids: Ids,
        emit: Callable[[list[ServerEvent]], None],
        played: Callable[[str, int], None],
    ) -> None:
        """``track`` None: the peer offered no audio, and the audio goes nowhere. ``emit``:
        sends events at once (for the track's reports); ``played(response_id, ms)``: what the
        track has sent of one of the session's responses."""
        self._track = track
        self._ids = ids
        self._emit = emit
        self._played = played
        self._up = AudioConverter("pcm16", AUDIO_RATE, "pcm16", TRACK_RATE)
        self._responses: dict[str, _Playing] = {}  # by the session's response id, the last few
        self._current: str | None = None  # whose audio ``audio`` queues

    # AudioSink -------------------------------------------------------------------------------

    def audio(self, pcm: bytes) -> list[ServerEvent]:
        current = self._current
        playing = None if current is None else self._responses.get(current)
        if self._track is None or playing is None or playing.over:
            return []
        events = []
        if not playing.started:
            playing.started = True
            events.append(self._event("output_audio_buffer.started", playing))
        out = self._up.process(pcm)
        playing.pushed += len(out)
        self._track.push(out)
        return events

    def after_event(self, event: GatewayEvent, translated: list[ServerEvent]) -> list[ServerEvent]:
        match event:
            case ResponseStarted(response_id=ours):
                return self._started(ours, translated)
            case SpeechStarted():
                return self._clear()
            case ResponseDone(response_id=ours, status=status):
                cut = status == ResponseStatus.INTERRUPTED
                events = self._clear() if cut else self._done(ours)
                if self._current == ours:
                    self._current = None
                    if self._track is not None:
                        self._track.begin(None)
                return events
        return []

    def clear(self) -> list[ServerEvent]:
        """The client's ``output_audio_buffer.clear``."""
        return self._clear()

    # The track's reports -----------------------------------------------------------------------

    def on_played(self, ours: str, played_ms: int) -> None:
        """``PcmOutTrack.on_played``: ``played_ms`` of response ``ours`` sent so far."""
        self._played(ours, played_ms)
        playing = self._responses.get(ours)
        if playing is None:
            return
        playing.sent_ms = played_ms
        if self._drained(playing):
            self._emit([self._stopped(playing)])

    # Internals ---------------------------------------------------------------------------------

    def _started(self, ours: str, translated: list[ServerEvent]) -> list[ServerEvent]:
        created = next((e for e in translated if e["type"] == "response.created"), None)
        ga_id = str(created["response"]["id"]) if created is not None else ours
        self._responses[ours] = _Playing(ga_id)
        while len(self._responses) > 8:
            del self._responses[next(iter(self._responses))]
        self._current = ours
        self._up.reset()
        if self._track is not None:
            self._track.begin(ours)  # the previous response's last frame goes first
        return []

    def _done(self, ours: str) -> list[ServerEvent]:
        playing = self._responses.get(ours)
        if playing is None or playing.over:
            return []
        if self._current == ours and self._track is not None:
            tail = self._up.flush()
            playing.pushed += len(tail)
            self._track.push(tail)
            self._track.flush()
        playing.done = True
        if not playing.started:
            playing.over = True  # no audio: nothing started, nothing to stop
            return []
        return [self._stopped(playing)] if self._drained(playing) else []

    def _clear(self) -> list[ServerEvent]:
        if self._track is not None:
            self._track.clear()
        self._up.reset()
        events = []
        for playing in self._responses.values():
            if playing.started and not playing.over:
                playing.over = True
                events.append(self._event("output_audio_buffer.cleared", playing))
            elif not playing.done:
                playing.over = True  # what else it says is not played
        return events

    @staticmethod
    def _drained(playing: _Playing) -> bool:
        frames = math.ceil(playing.pushed / FRAME_BYTES)
        return playing.done and not playing.over and playing.sent_ms >= frames * FRAME_MS

    def _stopped(self, playing: _Playing) -> ServerEvent:
        playing.over = True
        return self._event("output_audio_buffer.stopped", playing)

    def _event(self, kind: str, playing: _Playing) -> ServerEvent:
        return {"type": kind, "event_id": self._ids("event"), "response_id": playing.ga_id}
