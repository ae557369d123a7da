"""The user's audio on its way to Gemini Live. Pure.

Sent in ``realtimeInput`` blocks of at least ``MIN_APPEND_BYTES``; kept while there is no
connection (at most ``OFFLINE_AUDIO_BYTES``) and given to the next one. And what was sent since
the service last saved the session (a resumable handle) or answered the user (a completed
turn): a session resumed from the last handle, or a new one given the history, does not have it
(audio after the last handle is lost, https://ai.google.dev/gemini-api/docs/live-session), so
it is given again before the audio that came while offline: an utterance cut by a ``goAway`` or
a lost connection reaches the model whole."""

from __future__ import annotations

import base64

from transports.gemini_live import wire

__all__ = ["MIN_APPEND_BYTES", "OFFLINE_AUDIO_BYTES", "Uplink"]

MIN_APPEND_BYTES = 20 * wire.INPUT_RATE * 2 // 1000  # 20 ms of 16 kHz PCM16
OFFLINE_AUDIO_BYTES = 15 * wire.INPUT_RATE * 2  # 15 s
RESUME_BLOCK_BYTES = 50 * MIN_APPEND_BYTES  # one second per message when given again


class Uplink:
    def __init__(self) -> None:
        self._pending = bytearray()  # less than a block, not sent yet
        self._offline = bytearray()  # for the next connection
        self._unsaved = bytearray()  # sent since the service last saved or answered it

    def audio(self, pcm: bytes, *, connected: bool) -> list[str]:
        """The frames to send now for ``pcm`` (none while offline: it is kept)."""
        if not connected:
            self._offline += pcm
            _bound(self._offline)
            return []
        self._unsaved += pcm
        _bound(self._unsaved)
        if not self._pending and len(pcm) >= MIN_APPEND_BYTES:
            return [_frame(pcm)]
        self._pending += pcm
        if len(self._pending) < MIN_APPEND_BYTES:
            return []
        frame = _frame(bytes(self._pending))
        self._pending.clear()
        return [frame]

    def flush(self) -> list[str]:
        """What is pending, now (push-to-talk release)."""
        if not self._pending:
            return []
        frame = _frame(bytes(self._pending))
        self._pending.clear()
        return [frame]

    def clear(self) -> None:
        """The client discarded what it said."""
        self._pending.clear()
        self._offline.clear()
        self._unsaved.clear()

    def saved(self) -> None:
        """The service holds what was sent so far (a resumable handle, or the user answered)."""
        self._unsaved.clear()

    def connection_lost(self) -> None:
        """What the next connection must be given: the unsaved audio, then the offline."""
        self._offline[:0] = self._unsaved
        _bound(self._offline)
        self._unsaved.clear()
        self._pending.clear()

    def for_new_connection(self) -> list[str]:
        audio, self._offline = bytes(self._offline), bytearray()
        return [
            _frame(audio[start : start + RESUME_BLOCK_BYTES])
            for start in range(0, len(audio), RESUME_BLOCK_BYTES)
        ]


def _frame(pcm: bytes) -> str:
    return wire.audio_input(base64.b64encode(pcm).decode("ascii"))


def _bound(audio: bytearray) -> None:
    if len(audio) > OFFLINE_AUDIO_BYTES:
        del audio[: len(audio) - OFFLINE_AUDIO_BYTES]
