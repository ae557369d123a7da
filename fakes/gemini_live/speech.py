"""How the fake Gemini Live model says something: one generation as a pure stepper.

``SpeechRun.next_step()`` yields the model's output piece by piece; the session adds what ends a
turn (``generationComplete``, ``turnComplete``), so the run only speaks:

- AUDIO modality: per word (``plan_speech(text, 24000)`` from ``transports.local``) an
  ``outputTranscription`` with the word (when enabled; it comes before the word's audio, so the
  last transcript precedes ``generationComplete``), then one ``serverContent.modelTurn`` per
  20 ms chunk with one ``inlineData`` part (``audio/pcm;rate=24000``, standard base64). Each chunk
  is a step with ``audio_s = 0.02`` so the shell can pace it;
- TEXT modality: one ``modelTurn`` with one ``text`` part per word (the deltas join back into
  the text);
- ``delay_ms`` (``/slow``) is a wait before the first word; ``drop_after`` (``/drop``) closes the
  socket with 1011 right after that many model messages; ``HangPlan`` yields a step that waits
  until the generation is halted, forever;
- ``unannounced`` (``/unknown``): what the service may add without notice, a message whose
  top-level key the API reference does not list before the first word, and on every model message a
  ``serverContent`` field it does not list (``messages.unannounced``).

``spoken`` is what was said so far (what an interrupted turn keeps in the history).
"""

from __future__ import annotations

import base64
from collections.abc import Generator, Iterator
from dataclasses import dataclass

from fakes.gemini_live.messages import (
    AUDIO_TOKENS_PER_S,
    model_audio,
    model_text,
    output_transcription,
    text_tokens,
    unannounced_field,
    unannounced_message,
)
from fakes.gemini_live.wire import INTERNAL, Action, Close, Send, Step
from transports.local.speech import plan_speech, split_words

__all__ = ["INTERNAL_ERROR", "OUTPUT_RATE", "HangPlan", "SpeechPlan", "SpeechRun"]

OUTPUT_RATE = 24000
INTERNAL_ERROR = "Internal error occurred"


@dataclass(frozen=True, slots=True)
class SpeechPlan:
    text: str
    delay_ms: int = 0
    drop_after: int | None = None  # close 1011 after this many model messages
    unannounced: bool = False  # a message and fields the API reference does not list (``/unknown``)


@dataclass(frozen=True, slots=True)
class HangPlan:
    """Say nothing and never finish, until interrupted."""


class SpeechRun:
    def __init__(
        self, plan: SpeechPlan | HangPlan, *, modality: str, output_transcription: bool
    ) -> None:
        self.plan = plan
        self.modality = modality
        self.output_transcription = output_transcription
        self.spoken = ""
        self.audio_ms = 0
        self.finished = False
        self._messages = 0
        self._steps = self._generate()

    @property
    def response_tokens(self) -> int:
        if self.modality == "AUDIO":
            return self.audio_ms * AUDIO_TOKENS_PER_S // 1000
        return text_tokens(self.spoken) if self.spoken else 0

    def next_step(self) -> Step | None:
        if self.finished:
            return None
        step = next(self._steps, None)
        if step is None:
            self.finished = True
        return step

    def halt(self) -> None:
        self._steps.close()
        self.finished = True

    def _generate(self) -> Generator[Step, None, None]:
        plan = self.plan
        if isinstance(plan, HangPlan):
            while True:
                yield Step(hang=True)
        if plan.delay_ms > 0:
            yield Step(wait_s=plan.delay_ms / 1000)
        if plan.unannounced:
            yield Step((Send(unannounced_message()),))
        if self.modality == "AUDIO":
            yield from self._speak_audio(plan)
        else:
            for word in split_words(plan.text):
                self.spoken += word
                yield self._counted(plan, [Send(model_text(word))])

    def _speak_audio(self, plan: SpeechPlan) -> Iterator[Step]:
        for word in plan_speech(plan.text, OUTPUT_RATE):
            self.spoken += word.delta
            actions: list[Action] = []
            if self.output_transcription:
                actions.append(Send(output_transcription(word.delta)))
            for chunk in word.chunks:
                chunk_ms = len(chunk) // 2 * 1000 // OUTPUT_RATE
                self.audio_ms += chunk_ms
                actions.append(Send(model_audio(base64.b64encode(chunk).decode())))
                yield self._counted(plan, actions, audio_s=chunk_ms / 1000)
                actions = []

    def _counted(self, plan: SpeechPlan, actions: list[Action], audio_s: float = 0.0) -> Step:
        self._messages += 1
        if plan.unannounced:
            actions = [
                Send(unannounced_field(a.message)) if isinstance(a, Send) else a for a in actions
            ]
        if plan.drop_after is not None and self._messages >= plan.drop_after:
            actions.append(Close(INTERNAL, INTERNAL_ERROR))
        return Step(tuple(actions), audio_s=audio_s)
