"""The user's turns on Gemini Live as the session chose them (``TurnDetection``). Pure.

Server turns (the default): Gemini's automatic activity detection ends each turn and the model
answers it. A commit that asks for the answer sends ``audioStreamEnd`` (the microphone is
closed: the turn ends now); one that does not leaves it to the detector, and a later
``request_response`` sends it.

Push-to-talk (``manual``): automatic activity detection is off (``wire.live_config``), and
Gemini answers at ``activityEnd``, so a turn cannot be ended without being answered. The user's
audio is therefore held here, not streamed: ``commit`` ends an utterance (it joins the audio
committed before it and not answered yet), and ``request_response`` sends the whole turn,
``activityStart``, the audio, ``activityEnd``, when the model is to answer. Until its reply
starts the turn's frames are kept: a connection lost meanwhile may have taken only part of
them, and the next connection gets the whole turn again. Held audio is bounded
(``MAX_HELD_BYTES``, the oldest dropped first and counted in ``dropped_bytes``); ``clear``
drops what is not committed, as an input buffer's clear does.

A request with nothing to send is an empty complete turn (``wire.ANSWER_NOW``): the model
answers from the conversation as it is.
"""

from __future__ import annotations

import base64
import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

from transports import events as ev
from transports.base import ToolChoice, TurnDetection, UpstreamConfig
from transports.gemini_live import wire
from transports.gemini_live.codec import GeminiCodec

__all__ = ["MAX_HELD_BYTES", "PushToTalk", "TurnsCodec"]

MAX_HELD_BYTES = 120 * wire.INPUT_RATE * 2  # two minutes of 16 kHz PCM16
_CHUNK_BYTES = wire.INPUT_RATE * 2  # one second a message


class PushToTalk:
    """The held audio of push-to-talk turns and the frames of the one sent."""

    def __init__(self) -> None:
        self.held = bytearray()  # since the last commit or clear
        self.committed = bytearray()  # committed, not answered yet
        self.sent: list[str] = []  # the frames of the turn sent, whose reply has not started
        self.dropped_bytes = 0

    @property
    def has_committed(self) -> bool:
        return bool(self.committed)

    def audio(self, pcm: bytes) -> None:
        self.held += pcm
        excess = len(self.held) + len(self.committed) - MAX_HELD_BYTES
        if excess > 0:
            from_committed = min(excess, len(self.committed))
            del self.committed[:from_committed]
            del self.held[: excess - from_committed]
            self.dropped_bytes += excess

    def commit(self) -> bool:
        """The utterance so far is committed; False when there was none."""
        if not self.held:
            return False
        self.committed += self.held
        self.held.clear()
        return True

    def clear(self) -> None:
        self.held.clear()

    def turn(self) -> list[str]:
        """The frames of the committed turn (none: ``[]``), remembered until ``answered``."""
        if not self.committed:
            return []
        audio, self.committed = bytes(self.committed), bytearray()
        frames = [wire.ACTIVITY_START]
        for start in range(0, len(audio), _CHUNK_BYTES):
            chunk = audio[start : start + _CHUNK_BYTES]
            frames.append(wire.audio_input(base64.b64encode(chunk).decode("ascii")))
        frames.append(wire.ACTIVITY_END)
        self.sent = frames
        return list(frames)

    def answered(self) -> None:
        self.sent = []

    def lost(self, queued: list[str]) -> list[str]:
        """``queued`` (frames for the next connection) with the unanswered turn whole again,
        at the end: whatever part of it was sent went with the connection."""
        if not self.sent:
            return queued
        unsent = Counter(self.sent)  # this turn's frames still queued: the last such ones
        kept: list[str] = []
        for frame in reversed(queued):
            if unsent[frame] > 0:
                unsent[frame] -= 1
            else:
                kept.append(frame)
        return kept[::-1] + self.sent

    def take_all(self) -> bytes:
        """Everything held and committed (turn detection is going back to the server)."""
        audio = bytes(self.committed + self.held)
        self.committed.clear()
        self.held.clear()
        return audio


class TurnsCodec(GeminiCodec):
    """``GeminiCodec`` with the session's turn detection (see the module docstring) and tool
    choice (its setup: ``wire.live_config``), both changed by ``reconfigure``."""

    def __init__(self, config: UpstreamConfig) -> None:
        super().__init__(config)
        self.push_to_talk = PushToTalk()
        self._stream_end_due = False  # server turns: a commit that did not ask for the answer

    @property
    def manual(self) -> bool:
        return self.config.turn_detection.manual

    def reconfigure(
        self, turn_detection: TurnDetection | None, tool_choice: ToolChoice | None
    ) -> bool:
        """Take the session's new choices (None: unchanged); True when the setup changed (a
        new connection is needed). Audio held for push-to-talk goes up as it is when the
        detector takes over again."""
        changes: dict[str, Any] = {"turn_detection": turn_detection, "tool_choice": tool_choice}
        given = {
            name: value
            for name, value in changes.items()
            if value is not None and value != getattr(self.config, name)
        }
        if not given:
            return False
        was_manual = self.manual
        self.config = dataclasses.replace(self.config, **given)
        if was_manual and not self.manual:
            held = self.push_to_talk.take_all()
            if held:
                super().audio(held)
        return True

    def receive(self, message: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        out = super().receive(message)
        if any(isinstance(event, ev.ResponseStarted) for event in out):
            self.push_to_talk.answered()
            self._stream_end_due = False
        return out

    def audio(self, pcm: bytes) -> None:
        if self.config.turn_detection.manual:
            self.push_to_talk.audio(pcm)
        else:
            super().audio(pcm)

    def commit(self, *, respond: bool = True) -> None:
        if self.manual:
            if self.push_to_talk.commit() and respond:
                self.request_response()
        elif respond:
            self._stream_end_due = False
            super().commit()  # audioStreamEnd: the turn ends now, and the model answers
        else:
            self._stream_end_due = True  # the detector ends it, or request_response does

    def request_response(self) -> None:
        if self.manual:
            frames = self.push_to_talk.turn() or [wire.ANSWER_NOW]
        elif self._stream_end_due:
            self.commit()
            return
        else:
            frames = [wire.ANSWER_NOW]
        for frame in frames:
            self._send(frame, keep=True)

    def clear(self) -> None:
        super().clear()
        self.push_to_talk.clear()
        self._stream_end_due = False

    def connection_lost(self) -> list[ev.UpstreamEvent]:
        out = super().connection_lost()
        self._queued = self.push_to_talk.lost(self._queued)
        return out
