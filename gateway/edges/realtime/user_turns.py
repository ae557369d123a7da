"""The user's side of the conversation as GA events: the input buffer, server-VAD turns and
their transcription (docs/protocol.md 10.15; OpenAI's server VAD:
https://platform.openai.com/docs/guides/realtime-vad). Pure.

With server VAD::

    speech.started           → input_audio_buffer.speech_started {audio_start_ms, item_id U}
    (the user stops)           our protocol has no such event: the turn is taken as ended at
                               the next response.started, speech.started or user
                               transcript.done, which first emit input_audio_buffer.speech_stopped
                               {audio_end_ms, U}, input_audio_buffer.committed {U},
                               conversation.item.added / .done (user message, ``input_audio``,
                               transcript null)
    transcript.delta (user)  → conversation.item.input_audio_transcription.delta {U}
                               (it does not end the utterance: Gemini Live transcribes while
                               the user talks)
    transcript.done (user)   → conversation.item.input_audio_transcription.completed {U}

A manual ``input_audio_buffer.commit`` (``commit``) gives ``committed`` and the user item at
once; under 100 ms buffered it is OpenAI's ``input_audio_buffer_commit_empty``. ``clear`` gives
``input_audio_buffer.cleared``.

What cannot be reproduced exactly: ``speech_stopped`` comes late (when the reply starts, not
when the silence began), so ``audio_end_ms`` includes the model's thinking time; positions
count the audio the client appended (``appended``), and ``audio_start_ms`` is that position
less ``prefix_padding_ms``. Transcription events follow the session's ``transcription``
setting (none while it is null, as on OpenAI); a transcript belongs to the oldest committed
utterance still without one (at most 8 wait), or, with none, to a user item of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import CompatError
from .responses import StreamContext
from .server_wire import BYTES_PER_MS, ServerEvent, user_audio_item

__all__ = ["MIN_COMMIT_MS", "UserTurns"]

MIN_COMMIT_MS = 100
_UNTRANSCRIBED_KEPT = 8  # utterances a late transcript may still belong to


@dataclass(frozen=True, slots=True)
class _Speech:
    item_id: str
    start_ms: int


class UserTurns:
    def __init__(self, ctx: StreamContext) -> None:
        self._ctx = ctx
        self._input_bytes = 0  # all audio the client appended
        self._buffered_bytes = 0  # since the last commit or clear
        self._speech: _Speech | None = None
        self._untranscribed: list[tuple[str, int]] = []  # (user item, duration ms), oldest first

    @property
    def _input_ms(self) -> int:
        return self._input_bytes // BYTES_PER_MS

    def appended(self, n_bytes: int) -> None:
        self._input_bytes += n_bytes
        self._buffered_bytes += n_bytes

    def speech_started(self, prefix_padding_ms: int) -> list[ServerEvent]:
        events = self.end_speech()  # an utterance no reply followed has ended by now
        speech = _Speech(self._ctx.ids("item"), max(0, self._input_ms - prefix_padding_ms))
        self._speech = speech
        started = self._ctx.event(
            "input_audio_buffer.speech_started",
            audio_start_ms=speech.start_ms,
            item_id=speech.item_id,
        )
        events.append(started)
        return events

    def end_speech(self) -> list[ServerEvent]:
        """The pending utterance has ended: ``speech_stopped``, then its commit."""
        speech, self._speech = self._speech, None
        if speech is None:
            return []
        end_ms = self._input_ms
        stopped = self._ctx.event(
            "input_audio_buffer.speech_stopped", audio_end_ms=end_ms, item_id=speech.item_id
        )
        return [stopped, *self._commit(speech.item_id, end_ms - speech.start_ms)]

    def commit(self, event_id: str | None = None) -> list[ServerEvent]:
        buffered_ms = self._buffered_bytes / BYTES_PER_MS
        if buffered_ms < MIN_COMMIT_MS:
            raise CompatError(
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least 100ms "
                f"of audio, but buffer only has {buffered_ms:.2f}ms of audio.",
                event_id=event_id,
            )
        speech, self._speech = self._speech, None
        item_id = speech.item_id if speech is not None else self._ctx.ids("item")
        return self._commit(item_id, round(buffered_ms))

    def clear(self) -> list[ServerEvent]:
        self._buffered_bytes = 0
        self._speech = None
        return [self._ctx.event("input_audio_buffer.cleared")]

    def transcript_delta(self, delta: str, *, shown: bool) -> list[ServerEvent]:
        """A piece of the user's transcript. It does not end the utterance being spoken: some
        providers (Gemini Live) transcribe while the user talks."""
        if self._speech is not None:
            events: list[ServerEvent] = []
            item_id = self._speech.item_id
        else:
            events, item_id = self._transcript_target()
        if shown:
            events.append(
                self._ctx.event(
                    "conversation.item.input_audio_transcription.delta",
                    item_id=item_id,
                    content_index=0,
                    delta=delta,
                )
            )
        return events

    def transcript_done(self, text: str, *, shown: bool) -> list[ServerEvent]:
        events, item_id = self._transcript_target()
        duration_ms = self._untranscribed.pop(0)[1]
        if shown:
            self._ctx.items.set_transcript(item_id, text)
            completed = self._ctx.event(
                "conversation.item.input_audio_transcription.completed",
                item_id=item_id,
                content_index=0,
                transcript=text,
                usage={"type": "duration", "seconds": round(duration_ms / 1000, 3)},
            )
            events.append(completed)
        return events

    def _commit(self, item_id: str, duration_ms: int) -> list[ServerEvent]:
        self._buffered_bytes = 0
        item = user_audio_item(item_id)
        previous = self._ctx.items.add(item)
        self._untranscribed.append((item_id, duration_ms))
        del self._untranscribed[:-_UNTRANSCRIBED_KEPT]  # a provider that never transcribes
        event = self._ctx.event
        return [
            event("input_audio_buffer.committed", previous_item_id=previous, item_id=item_id),
            event("conversation.item.added", previous_item_id=previous, item=item),
            event("conversation.item.done", previous_item_id=previous, item=item),
        ]

    def _transcript_target(self) -> tuple[list[ServerEvent], str]:
        """The user item a transcript belongs to: the pending utterance (committed now), else
        the oldest committed one without a transcript, else a new one committed now."""
        events = self.end_speech()
        if not self._untranscribed:
            events += self._commit(self._ctx.ids("item"), 0)
        return events, self._untranscribed[0][0]
