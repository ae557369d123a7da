"""User audio on its way up: batching, what the server may still hold, and what waits offline.

Pure. Appends of at least 20 ms go up as they are; smaller pieces are gathered first. The audio
sent since the server last committed its input buffer is remembered (bounded): if the socket
drops mid-utterance, the new session gets the whole utterance again, not only its second half.
With server VAD the server keeps only ``prefix_padding_ms`` of audio while nobody speaks, so
between utterances the tail is that much plus a second for the VAD's detection delay (about 62 KB
at 24 kHz, not 10 s of silence per session); from ``speech_started`` to the commit it holds the
utterance. While offline, audio is kept (bounded, newest first) and sent once the new session is
ready.
"""

from __future__ import annotations

from collections import deque

from transports.openai_realtime import wire

__all__ = [
    "MIN_APPEND_BYTES",
    "MIN_APPEND_MS",
    "MIN_COMMIT_BYTES",
    "MIN_COMMIT_MS",
    "OFFLINE_AUDIO_BYTES",
    "OFFLINE_AUDIO_MS",
    "REPLAY_APPEND_BYTES",
    "UNCOMMITTED_TAIL_BYTES",
    "UNCOMMITTED_TAIL_MS",
    "VAD_DETECTION_MARGIN_MS",
    "Uplink",
]

# Uplink audio is sent in appends of at least 20 ms.
MIN_APPEND_MS = 20
# A commit of less than 100 ms is refused by the server (input_audio_buffer_commit_empty).
MIN_COMMIT_MS = 100
# Audio kept while the upstream reconnects, and of an utterance the server had not committed.
OFFLINE_AUDIO_MS = 15_000
UNCOMMITTED_TAIL_MS = 10_000
# Between utterances under server VAD: its prefix padding, plus the time the VAD takes to report.
VAD_DETECTION_MARGIN_MS = 1000
# Offline audio goes up in appends of one second.
REPLAY_APPEND_MS = 1000
# The same in bytes of the default format, PCM16 at 24 kHz.
MIN_APPEND_BYTES = MIN_APPEND_MS * wire.AUDIO_BYTES_PER_MS
MIN_COMMIT_BYTES = MIN_COMMIT_MS * wire.AUDIO_BYTES_PER_MS
OFFLINE_AUDIO_BYTES = OFFLINE_AUDIO_MS * wire.AUDIO_BYTES_PER_MS
UNCOMMITTED_TAIL_BYTES = UNCOMMITTED_TAIL_MS * wire.AUDIO_BYTES_PER_MS
REPLAY_APPEND_BYTES = REPLAY_APPEND_MS * wire.AUDIO_BYTES_PER_MS


class Uplink:
    """``bytes_per_ms``: of the session's input format (48 for PCM16 at 24 kHz, 8 for G.711)."""

    def __init__(self, bytes_per_ms: int = wire.AUDIO_BYTES_PER_MS) -> None:
        self.bytes_per_ms = bytes_per_ms
        self.min_append = MIN_APPEND_MS * bytes_per_ms
        self.min_commit = MIN_COMMIT_MS * bytes_per_ms
        self._offline_limit = OFFLINE_AUDIO_MS * bytes_per_ms
        self._tail_limit = UNCOMMITTED_TAIL_MS * bytes_per_ms
        self._replay_append = REPLAY_APPEND_MS * bytes_per_ms
        self._pending = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self._offline = bytearray()
        self.uncommitted = 0  # bytes appended since the server's buffer was last committed
        # The tail's bound between utterances: everything (no VAD: the server holds it all)
        # until server VAD is reported with its prefix padding.
        self._quiet_limit = self._tail_limit
        self._speaking = False  # from speech_started (or a replay) to the next commit
        self._limit = self._tail_limit

    def server_vad(self, prefix_padding_ms: int | None) -> None:
        """The session's turn detection: server VAD with this prefix padding, or None (no VAD,
        or a detector whose padding is not known): the server holds all it has not committed."""
        if prefix_padding_ms is None:
            self._quiet_limit = self._tail_limit
        else:
            quiet_ms = max(0, prefix_padding_ms) + VAD_DETECTION_MARGIN_MS
            self._quiet_limit = min(self._tail_limit, quiet_ms * self.bytes_per_ms)
        self._set_speaking(self._speaking)

    def speech_started(self) -> None:
        """The server heard speech: it keeps the utterance until it commits it."""
        self._set_speaking(True)

    def _set_speaking(self, speaking: bool) -> None:
        self._speaking = speaking
        self._limit = self._tail_limit if speaking else self._quiet_limit
        self._trim()

    def take(self, pcm: bytes) -> bytes | None:
        """Online: the chunk to append now (at least 20 ms), or None while gathering."""
        if not self._pending and len(pcm) >= self.min_append:
            chunk = pcm  # a whole frame: no copy
        else:
            self._pending += pcm
            if len(self._pending) < self.min_append:
                return None
            chunk = bytes(self._pending)
            self._pending.clear()
        self._appended(chunk)
        return chunk

    def flush(self) -> bytes | None:
        """Whatever is gathered, however short (before a commit)."""
        if not self._pending:
            return None
        chunk = bytes(self._pending)
        self._pending.clear()
        self._appended(chunk)
        return chunk

    def _appended(self, chunk: bytes) -> None:
        self.uncommitted += len(chunk)
        self._tail.append(chunk)
        self._tail_bytes += len(chunk)
        if self._tail_bytes > self._limit:
            self._trim()

    def _trim(self) -> None:
        while self._tail_bytes > self._limit:
            self._tail_bytes -= len(self._tail.popleft())

    def committed(self) -> None:
        """The server committed (or cleared) its input buffer."""
        self.uncommitted = 0
        self._tail.clear()
        self._tail_bytes = 0
        self._set_speaking(False)

    def clear(self) -> None:
        self.committed()
        self._pending.clear()
        self._offline.clear()

    def keep_offline(self, pcm: bytes) -> None:
        self._offline += pcm
        if len(self._offline) > self._offline_limit:
            del self._offline[: len(self._offline) - self._offline_limit]

    def lost(self) -> None:
        """The socket is gone: what the server held uncommitted is sent again, first."""
        held = b"".join(self._tail) + self._pending
        self._offline[:0] = held
        if len(self._offline) > self._offline_limit:
            del self._offline[: len(self._offline) - self._offline_limit]
        self._pending.clear()
        self.committed()

    def replay(self) -> list[bytes]:
        """The offline audio, in appends, for a new connection (counted as uncommitted).

        It is an utterance in progress as far as we know: kept whole until the next commit."""
        audio, self._offline = bytes(self._offline), bytearray()
        if audio:
            self._set_speaking(True)
        chunks = [
            audio[start : start + self._replay_append]
            for start in range(0, len(audio), self._replay_append)
        ]
        for chunk in chunks:
            self._appended(chunk)
        return chunks
