"""One response of the fake, as a pure stepper: its GA server events, in OpenAI's order.

``ResponseRun.created()`` is the ``response.created`` event (the session sends it at once, so a
cancel that follows can never overtake it); ``next_step()`` then yields the rest piece by piece
and ``cancel(reason)`` closes out whatever is open. Theory of operation:

- speech (``SpeechPlan``), audio modality: ``response.output_item.added`` (assistant message,
  ``in_progress``, empty content), ``conversation.item.added``, ``response.content_part.added``
  (``audio``); per word one ``response.output_audio_transcript.delta`` then its 20 ms
  ``response.output_audio.delta`` chunks, one step each (``audio_s`` = 0.02 for pacing); then
  ``output_audio.done``, ``output_audio_transcript.done``, ``content_part.done``,
  ``output_item.done``, ``conversation.item.done``;
- speech, text modality: the same with an ``output_text`` part, one ``response.output_text.delta``
  per word and ``response.output_text.done``;
- tool calls (``CallsPlan``): per call ``output_item.added`` (``function_call``, ``arguments: ""``)
  and ``conversation.item.added``, the arguments in ``arg_fragment``-character
  ``function_call_arguments.delta``s, then ``function_call_arguments.done``,
  ``conversation.item.done``, ``output_item.done``; calls at increasing ``output_index``;
- every response ends with ``response.done`` (``status``, ``status_details``, ``output`` without
  audio bytes, ``usage``) and ``rate_limits.updated``;
- ``cancel``: the open item gets its done events with ``status: "incomplete"`` (a function call
  that was streaming stays in the conversation, so its output is accepted later), then
  ``response.done`` ``cancelled`` with ``status_details.reason``;
- ``FailPlan``: ``response.done`` ``failed`` right away; ``HangPlan``: nothing until cancelled;
  ``CallsPlan(hang=True)``: the calls in full, then nothing until cancelled;
- ``SpeechPlan(unannounced=True)`` (``/unknown``): what the API may add without notice, before
  the speech an event of a type the API reference does not list (``UNANNOUNCED_EVENT``), and on each
  of its deltas a field it does not list (``UNANNOUNCED_FIELD``).

Output items are written to the conversation unless the response is out-of-band
(``conversation: "none"``, ``conversation_id: null``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

from fakes.openai_realtime.audio import format_of
from fakes.openai_realtime.conversation import Conversation, Entry
from fakes.openai_realtime.wire import (
    Action,
    Close,
    Event,
    IdSource,
    Send,
    Step,
    TokenMeter,
    rate_limits,
    usage,
)
from transports.local.brain import ToolCall
from transports.local.speech import plan_speech, split_words

__all__ = [
    "DROP_REASON",
    "UNANNOUNCED_EVENT",
    "UNANNOUNCED_FIELD",
    "CallsPlan",
    "FailPlan",
    "HangPlan",
    "Plan",
    "ResponseRun",
    "ResponseSettings",
    "RunContext",
    "SpeechPlan",
]

DROP_REASON = "simulated upstream fault"
# Names the API reference does not list: a client must ignore them (providers add such events).
UNANNOUNCED_EVENT = "response.unannounced_feature.added"
UNANNOUNCED_FIELD = "unannounced_field"


@dataclass(frozen=True, slots=True)
class SpeechPlan:
    text: str
    delay_ms: int = 0
    drop_after: int | None = None  # close the socket (1011) after this many deltas
    unannounced: bool = False  # an event and fields the API reference does not list (``/unknown``)


@dataclass(frozen=True, slots=True)
class CallsPlan:
    calls: tuple[ToolCall, ...]
    hang: bool = False  # after the calls, no response.done until cancelled


@dataclass(frozen=True, slots=True)
class FailPlan:
    message: str


@dataclass(frozen=True, slots=True)
class HangPlan:
    pass


Plan = SpeechPlan | CallsPlan | FailPlan | HangPlan


@dataclass(frozen=True, slots=True)
class ResponseSettings:
    modality: str  # "audio" | "text"
    audio_format: dict[str, Any]
    voice: Any
    conversation_id: str | None  # None: out-of-band, nothing written to the conversation
    max_output_tokens: int | str = "inf"
    metadata: dict[str, Any] | None = None
    input_text_tokens: int = 0
    input_audio_tokens: int = 0


@dataclass(frozen=True, slots=True)
class RunContext:
    """What a run needs from its session."""

    event: Callable[..., Event]  # event(type, **fields) → a stamped server event
    ids: IdSource
    conversation: Conversation
    meter: TokenMeter
    arg_fragment: int = 3
    on_audio_output: Callable[[], None] = lambda: None


@dataclass(eq=False, slots=True)
class _Open:
    """The output item being streamed."""

    entry: Entry
    output_index: int
    previous_item_id: str | None
    text: str = ""  # transcript, text or arguments so far
    call: ToolCall | None = None
    part_open: bool = False


@dataclass(eq=False, slots=True)
class _Tally:
    words: int = 0
    audio_ms: int = 0
    argument_chars: int = 0
    deltas: int = 0


class ResponseRun:
    def __init__(
        self, ctx: RunContext, response_id: str, settings: ResponseSettings, plan: Plan
    ) -> None:
        self.ctx = ctx
        self.response_id = response_id
        self.settings = settings
        self.plan = plan
        self.finished = False
        self.status = "in_progress"
        self.outputs: list[Entry] = []
        self._open: _Open | None = None
        self._tally = _Tally()
        self._steps = self._generate()

    # Interface ------------------------------------------------------------------------------

    def created(self) -> Event:
        return self.ctx.event("response.created", response=self._response("in_progress", None))

    def next_step(self) -> Step | None:
        if self.finished:
            return None
        return next(self._steps, None)

    def cancel(self, reason: str) -> list[Event]:
        """Close out what is open; ``response.done`` ``cancelled``. Nothing once finished."""
        if self.finished:
            return []
        self._steps.close()
        events = self._close_open("incomplete")
        return events + self._finish("cancelled", {"type": "cancelled", "reason": reason})

    def abandon(self) -> None:
        """The socket is going away: no more events of any kind."""
        self._steps.close()
        self.finished = True

    # Events ---------------------------------------------------------------------------------

    def _response(self, status: str, details: dict[str, Any] | None) -> dict[str, Any]:
        settings = self.settings
        done = status != "in_progress"
        return {
            "object": "realtime.response",
            "id": self.response_id,
            "status": status,
            "status_details": details,
            "output": [entry.snapshot() for entry in self.outputs] if done else [],
            "conversation_id": settings.conversation_id,
            "output_modalities": [settings.modality],
            "max_output_tokens": settings.max_output_tokens,
            "audio": {"output": {"format": settings.audio_format, "voice": settings.voice}},
            "usage": self._usage() if done else None,
            "metadata": settings.metadata,
        }

    def _usage(self) -> dict[str, Any]:
        tally = self._tally
        return usage(
            input_text=self.settings.input_text_tokens,
            input_audio=self.settings.input_audio_tokens,
            output_text=tally.words + (tally.argument_chars + 3) // 4,
            output_audio=tally.audio_ms // 50,
        )

    def _finish(self, status: str, details: dict[str, Any] | None) -> list[Event]:
        self.finished = True
        self.status = status
        done = self.ctx.event("response.done", response=self._response(status, details))
        self.ctx.meter.settle(done["response"]["usage"]["total_tokens"])
        return [
            done,
            self.ctx.event("rate_limits.updated", rate_limits=rate_limits(self.ctx.meter)),
        ]

    def _ids(self, opened: _Open) -> dict[str, Any]:
        return {
            "response_id": self.response_id,
            "item_id": opened.entry.id,
            "output_index": opened.output_index,
        }

    def _add_output(self, item: dict[str, Any]) -> tuple[list[Event], _Open]:
        entry = Entry(item)
        previous = None
        in_conversation = self.settings.conversation_id is not None
        if in_conversation:
            previous = self.ctx.conversation.insert(entry)
        opened = _Open(entry, len(self.outputs), previous)
        self.outputs.append(entry)
        self._open = opened
        events = [
            self.ctx.event(
                "response.output_item.added",
                response_id=self.response_id,
                output_index=opened.output_index,
                item=entry.snapshot(),
            )
        ]
        if in_conversation:
            events.append(
                self.ctx.event(
                    "conversation.item.added", previous_item_id=previous, item=entry.snapshot()
                )
            )
        return events, opened

    def _item_done(self, opened: _Open) -> list[Event]:
        """``output_item.done`` and ``conversation.item.done``, in the order of the item kind."""
        output_done = self.ctx.event(
            "response.output_item.done",
            response_id=self.response_id,
            output_index=opened.output_index,
            item=opened.entry.snapshot(),
        )
        if self.settings.conversation_id is None:
            return [output_done]
        conversation_done = self.ctx.event(
            "conversation.item.done",
            previous_item_id=opened.previous_item_id,
            item=opened.entry.snapshot(),
        )
        if opened.call is not None:  # 6.3: the conversation hears first
            return [conversation_done, output_done]
        return [output_done, conversation_done]  # 6.1

    def _close_open(self, status: str) -> list[Event]:
        opened, self._open = self._open, None
        if opened is None:
            return []
        opened.entry.item["status"] = status
        if opened.call is not None:
            args_done = self.ctx.event(
                "response.function_call_arguments.done",
                **self._ids(opened),
                call_id=opened.call.call_id,
                name=opened.call.name,
                arguments=opened.text,
            )
            return [args_done, *self._item_done(opened)]
        events: list[Event] = []
        part_ids = {**self._ids(opened), "content_index": 0}
        if opened.part_open:
            if self.settings.modality == "audio":
                part = {"type": "audio", "transcript": opened.text}
                events.append(self.ctx.event("response.output_audio.done", **part_ids))
                events.append(
                    self.ctx.event(
                        "response.output_audio_transcript.done",
                        **part_ids,
                        transcript=opened.text,
                    )
                )
            else:
                part = {"type": "text", "text": opened.text}
                events.append(
                    self.ctx.event("response.output_text.done", **part_ids, text=opened.text)
                )
            events.append(self.ctx.event("response.content_part.done", **part_ids, part=part))
        return events + self._item_done(opened)

    # Steps ----------------------------------------------------------------------------------

    def _generate(self) -> Generator[Step, None, None]:
        plan = self.plan
        if isinstance(plan, FailPlan):
            details = {
                "type": "failed",
                "error": {"type": "server_error", "code": "server_error", "message": plan.message},
            }
            yield _sends(self._finish("failed", details))
        elif isinstance(plan, HangPlan):
            while True:
                yield Step(hang=True)
        elif isinstance(plan, SpeechPlan):
            if plan.delay_ms > 0:
                yield Step(wait_s=plan.delay_ms / 1000)
            if plan.unannounced:
                novelty = {"kind": "a feature this fake made up", "version": 2}
                event = self.ctx.event(
                    UNANNOUNCED_EVENT, response_id=self.response_id, feature=novelty
                )
                yield _sends([event])
            yield from self._speak(plan)
            yield _sends(self._finish("completed", None))
        else:
            for call in plan.calls:
                yield from self._call(call)
            while plan.hang:
                yield Step(hang=True)
            yield _sends(self._finish("completed", None))

    def _speak(self, plan: SpeechPlan) -> Iterator[Step]:
        audio = self.settings.modality == "audio"
        item: dict[str, Any] = {
            "id": self.ctx.conversation.new_item_id(),
            "object": "realtime.item",
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        events, opened = self._add_output(item)
        if audio:
            part = {"type": "audio", "transcript": ""}
            content = {"type": "output_audio", "transcript": ""}
        else:
            part = {"type": "text", "text": ""}
            content = {"type": "output_text", "text": ""}
        item["content"] = [content]
        opened.part_open = True
        part_ids = {**self._ids(opened), "content_index": 0}
        events.append(self.ctx.event("response.content_part.added", **part_ids, part=part))
        yield _sends(events)
        if audio:
            yield from self._speak_audio(plan, opened, content, part_ids)
        else:
            for word in split_words(plan.text):
                opened.text += word
                content["text"] = opened.text
                self._tally.words += 1
                delta = self.ctx.event("response.output_text.delta", **part_ids, delta=word)
                yield self._counted(plan, [delta])
        yield _sends(self._close_open("completed"))

    def _speak_audio(
        self, plan: SpeechPlan, opened: _Open, content: dict[str, Any], part_ids: dict[str, Any]
    ) -> Iterator[Step]:
        wire = format_of(self.settings.audio_format)
        entry = opened.entry
        for word in plan_speech(plan.text, wire.rate):
            opened.text += word.delta
            content["transcript"] = opened.text
            entry.word_starts.append((word.delta, entry.audio_ms))
            self._tally.words += 1
            events = [
                self.ctx.event(
                    "response.output_audio_transcript.delta", **part_ids, delta=word.delta
                )
            ]
            for chunk in word.chunks:
                data = wire.from_pcm16(chunk)
                chunk_ms = round(len(chunk) / 2 * 1000 / wire.rate)
                entry.audio += data
                entry.audio_ms += chunk_ms
                self._tally.audio_ms += chunk_ms
                self.ctx.on_audio_output()
                delta = base64.b64encode(data).decode()
                events.append(
                    self.ctx.event("response.output_audio.delta", **part_ids, delta=delta)
                )
                yield self._counted(plan, events, audio_s=chunk_ms / 1000)
                events = []

    def _counted(self, plan: SpeechPlan, events: list[Event], audio_s: float = 0.0) -> Step:
        """A delta step; the ``drop_after``-th delta is followed by an abrupt close."""
        self._tally.deltas += 1
        if plan.unannounced:
            for event in events:
                event[UNANNOUNCED_FIELD] = {"kind": "a field this fake made up"}
        actions: list[Action] = [Send(event) for event in events]
        if plan.drop_after is not None and self._tally.deltas >= plan.drop_after:
            actions.append(Close(1011, DROP_REASON))
        return Step(tuple(actions), audio_s=audio_s)

    def _call(self, call: ToolCall) -> Iterator[Step]:
        item = {
            "id": self.ctx.conversation.new_item_id(),
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "name": call.name,
            "call_id": call.call_id,
            "arguments": "",
        }
        events, opened = self._add_output(item)
        opened.call = call
        yield _sends(events)
        size = max(1, self.ctx.arg_fragment)
        for start in range(0, len(call.arguments), size):
            fragment = call.arguments[start : start + size]
            opened.text += fragment
            item["arguments"] = opened.text
            self._tally.argument_chars += len(fragment)
            delta = self.ctx.event(
                "response.function_call_arguments.delta",
                **self._ids(opened),
                call_id=call.call_id,
                delta=fragment,
            )
            yield _sends([delta])
        yield _sends(self._close_open("completed"))


def _sends(events: list[Event]) -> Step:
    return Step(tuple(Send(event) for event in events))
