"""One response as GA server events, in OpenAI's order (docs/protocol.md 10.15). Pure.

A ``ResponseStream`` is made at our ``response.started`` and says ``response.created`` at once.
Its assistant message is opened by the first delta or audio frame (a response that only ran
the gateway's tools has no output item)::

    response.output_item.added  (message, in_progress, no content)
    conversation.item.added     (unless out-of-band: ``conversation: "none"``)
    response.content_part.added (``audio`` with an empty transcript, or ``text``)
    … response.output_audio.delta / response.output_audio_transcript.delta
      | response.output_text.delta
    response.output_audio.done, response.output_audio_transcript.done (whole transcript)
      | response.output_text.done
    response.content_part.done, response.output_item.done, conversation.item.done

``finish`` closes what is open (items of a response that did not complete end
``incomplete`` with the partial transcript) and says ``response.done`` with the output items
(no audio bytes), the status and the usage. A call of one of the client's own tools
(``client_call``) closes the open message, then streams a ``function_call`` item at the next
``output_index``: ``output_item.added``, ``conversation.item.added``,
``function_call_arguments.delta`` / ``.done``, ``conversation.item.done``, ``output_item.done``.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .conversation import ItemLog
from .server_wire import (
    Ids,
    PartKind,
    ServerEvent,
    assistant_item,
    ga_status,
    ga_usage,
    response_object,
)
from .session_config import Modality

__all__ = ["AssistantMessage", "ResponseStream", "StreamContext"]


@dataclass(frozen=True, slots=True)
class StreamContext:
    """What every response of a session shares."""

    event: Callable[..., ServerEvent]  # event(type, **fields) → a stamped server event
    ids: Ids
    items: ItemLog
    conversation_id: str


@dataclass(eq=False, slots=True)
class AssistantMessage:
    """The assistant message a response is streaming (truncation looks its audio up)."""

    item_id: str
    output_index: int
    part: PartKind
    response_ours: str  # the gateway's response id
    text: list[str] = field(default_factory=list)
    audio_bytes: int = 0


class ResponseStream:
    def __init__(
        self,
        ctx: StreamContext,
        *,
        ours: str,
        modality: Modality,
        voice: Any,
        in_conversation: bool = True,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self._ctx = ctx
        self.ours = ours
        self.id = ctx.ids("resp")
        self.modality = modality
        self.in_conversation = in_conversation
        self._voice = voice
        self._metadata = metadata
        self._output: list[dict[str, Any]] = []  # finished items
        self.message: AssistantMessage | None = None  # open
        self.transcript_done: str | None = None  # our transcript.done (assistant)

    def created(self) -> ServerEvent:
        return self._ctx.event("response.created", response=self._object("in_progress"))

    def delta(self, part: PartKind, text: str) -> list[ServerEvent]:
        """A transcript (``audio`` part) or text delta; the part's kind is the first one's."""
        events = self._open(part)
        message = self.message
        assert message is not None
        message.text.append(text)
        kind = (
            "response.output_audio_transcript.delta"
            if message.part == "audio"
            else "response.output_text.delta"
        )
        events.append(self._ctx.event(kind, **self._part_ids(message), delta=text))
        return events

    def audio(
        self, pcm: bytes, encoded: str | None = None, *, delta: bool = True
    ) -> list[ServerEvent]:
        """``encoded``: ``pcm`` as standard base64 already (the upstream's), sent as is.
        ``delta`` False: the audio goes elsewhere (a WebRTC track), counted, without its event."""
        events = self._open("audio")
        message = self.message
        assert message is not None
        if message.part != "audio":  # audio in a text response: nothing to carry it
            return events
        message.audio_bytes += len(pcm)
        if not delta:
            return events
        if encoded is None:
            encoded = binascii.b2a_base64(pcm, newline=False).decode("ascii")
        # Every audio frame takes this: the event built at once, as ``ctx.event`` would.
        events.append(
            {
                "type": "response.output_audio.delta",
                "event_id": self._ctx.ids("event"),
                "response_id": self.id,
                "item_id": message.item_id,
                "output_index": message.output_index,
                "content_index": 0,
                "delta": encoded,
            }
        )
        return events

    def client_call(self, call_id: str, name: str, arguments: str) -> list[ServerEvent]:
        """A call of one of the client's own tools, whole (its arguments in one delta)."""
        ctx = self._ctx
        events = self._close("completed")
        index = len(self._output)
        item: dict[str, Any] = {
            "id": ctx.ids("item"),
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "name": name,
            "call_id": call_id,
            "arguments": "",
        }
        at = {"response_id": self.id, "output_index": index}
        events.append(ctx.event("response.output_item.added", **at, item=item))
        previous = self._add_to_conversation(item, events)
        args = {**at, "item_id": item["id"], "call_id": call_id}
        events.append(ctx.event("response.function_call_arguments.delta", **args, delta=arguments))
        events.append(
            ctx.event(
                "response.function_call_arguments.done", **args, name=name, arguments=arguments
            )
        )
        item = {**item, "status": "completed", "arguments": arguments}
        if self.in_conversation:
            ctx.items.replace(item)
            events.append(ctx.event("conversation.item.done", previous_item_id=previous, item=item))
        events.append(ctx.event("response.output_item.done", **at, item=item))
        self._output.append(item)
        return events

    def finish(
        self,
        status: str,
        *,
        text: str = "",
        usage: Mapping[str, Any] | None = None,
        error_message: str | None = None,
    ) -> list[ServerEvent]:
        """Our ``response.done``: ``status`` and ``text`` are ours, ``usage`` the provider's."""
        ga, details = ga_status(status, error_message)
        events: list[ServerEvent] = []
        if self.message is None and not self._output and text and ga == "completed":
            # Nothing was streamed (a provider that does not stream this text): say it now.
            events += self.delta("text" if self.modality == "text" else "audio", text)
        events += self._close("completed" if ga == "completed" else "incomplete")
        done = self._object(ga, details=details, usage=ga_usage(usage))
        events.append(self._ctx.event("response.done", response=done))
        return events

    # Internals ------------------------------------------------------------------------------

    def _object(
        self,
        status: str,
        *,
        details: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return response_object(
            response_id=self.id,
            status=status,
            conversation_id=self._ctx.conversation_id if self.in_conversation else None,
            modality=self.modality,
            voice=self._voice,
            metadata=self._metadata,
            output=None if status == "in_progress" else self._output,
            status_details=details,
            usage=usage,
        )

    def _part_ids(self, message: AssistantMessage) -> dict[str, Any]:
        return {
            "response_id": self.id,
            "item_id": message.item_id,
            "output_index": message.output_index,
            "content_index": 0,
        }

    def _add_to_conversation(self, item: dict[str, Any], events: list[ServerEvent]) -> str | None:
        if not self.in_conversation:
            return None
        previous = self._ctx.items.add(item)
        events.append(
            self._ctx.event("conversation.item.added", previous_item_id=previous, item=item)
        )
        return previous

    def _open(self, part: PartKind) -> list[ServerEvent]:
        if self.message is not None:
            return []
        ctx = self._ctx
        message = AssistantMessage(ctx.ids("item"), len(self._output), part, self.ours)
        self.message = message
        item = assistant_item(message.item_id, "in_progress")
        events = [
            ctx.event(
                "response.output_item.added",
                response_id=self.id,
                output_index=message.output_index,
                item=item,
            )
        ]
        self._add_to_conversation(item, events)
        empty = (
            {"type": "audio", "transcript": ""} if part == "audio" else {"type": "text", "text": ""}
        )
        events.append(
            ctx.event("response.content_part.added", **self._part_ids(message), part=empty)
        )
        return events

    def _close(self, status: str) -> list[ServerEvent]:
        message, self.message = self.message, None
        if message is None:
            return []
        ctx = self._ctx
        text = "".join(message.text)
        if status == "completed" and self.transcript_done:
            text = self.transcript_done
        ids = self._part_ids(message)
        if message.part == "audio":
            part = {"type": "audio", "transcript": text}
            events = [
                ctx.event("response.output_audio.done", **ids),
                ctx.event("response.output_audio_transcript.done", **ids, transcript=text),
            ]
        else:
            part = {"type": "text", "text": text}
            events = [ctx.event("response.output_text.done", **ids, text=text)]
        events.append(ctx.event("response.content_part.done", **ids, part=part))
        item = assistant_item(message.item_id, status, message.part, text)
        events.append(
            ctx.event(
                "response.output_item.done",
                response_id=self.id,
                output_index=message.output_index,
                item=item,
            )
        )
        if self.in_conversation and message.item_id in ctx.items:  # the client may delete it
            ctx.items.replace(item)
            previous = ctx.items.previous_of(message.item_id)
            events.append(ctx.event("conversation.item.done", previous_item_id=previous, item=item))
        self._output.append(item)
        return events
