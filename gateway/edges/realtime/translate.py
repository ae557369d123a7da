"""The gateway session's output (our protocol's typed events and PCM16 audio, in order) turned
into GA Realtime server events, plus the echoes of the client's conversation edits. Pure: no
I/O, no clock; ids come from the injected ``ids``.

Theory of operation. The bridge is a client of one gateway session (``ordered=True``): it
passes each text event to ``on_event`` and each audio frame to ``on_audio``, and sends what they
return, in order. The client's own events are decoded by ``client_wire``; those the server
answers itself go through the methods below (``create_item``, ``commit_input``, …), which
return the echoes or raise ``CompatError`` (send ``error_event(error)``; nothing changed).

A response (GA order, docs/protocol.md 10.15)::

    response.started         → [user turn ends, below] response.created
    first audio / transcript → response.output_item.added (assistant message, in_progress)
      / text delta             conversation.item.added, response.content_part.added
                               (an ``audio`` part with its transcript; ``text`` for text.delta)
    audio frame              → response.output_audio.delta (base64)
    transcript.delta         → response.output_audio_transcript.delta
    text.delta               → response.output_text.delta
    response.done            → response.output_audio.done, …_transcript.done (whole
                               transcript) | response.output_text.done;
                               response.content_part.done, response.output_item.done,
                               conversation.item.done; response.done (status, output, usage)

A response that only ran the gateway's tools has no output item. Audio belongs to the response
started last until its ``response.done``; audio with none open is dropped (the phone bridge does
the same). Statuses: ``interrupted`` → ``cancelled`` (``turn_detected``); ``cancelled`` →
``cancelled`` (``client_cancelled``); ``failed`` → ``failed`` with the last upstream error's
message. Open items end ``incomplete`` with the partial transcript, in the same order.

The user's side (speech, commits, transcription) is ``user_turns``: our ``speech.started``
opens a user item, the next reply or transcript closes it (``speech_stopped``, ``committed``).
Not reproduced: ``rate_limits.updated``; a barge-in emits no ``conversation.item.truncated``
until the client sends a truncate (whether OpenAI's server truncates by itself over a WebSocket
is disputed; the documented way is the client's ``conversation.item.truncate``:
https://platform.openai.com/docs/api-reference/realtime-client-events).

The gateway's own tools are not the client's business: ``tool.*`` and ``confirmation.*`` are
dropped. With ``show_tools`` a call is shown as conversation items outside any response: on
``tool.started`` a ``function_call`` item (``status: completed``, arguments as a JSON string),
on ``tool.finished`` a ``function_call_output`` (``output``: ``{"ok", "data"|"error"}`` as JSON),
each as ``conversation.item.added`` then ``.done``. The SDK parses them, the Agents SDK handles
only ``message`` items there, and no client runs a tool on them: tools are run on
``response.output_item.done`` or ``…function_call_arguments.done``, never sent for these.
``tool.slow`` has no GA equivalent and is dropped.

The client's own tools (``client_tools``, docs/protocol.md 10.16): our
``client_tool.requested {response_id, call_id, name, arguments}`` is a ``function_call``
output item of that response (10.15, "The client's own tools"), whose ``call_id`` one
``function_call_output`` may then answer (any other ``call_id``, or a second answer, is
``invalid_tool_call_id``); our ``client_tool.cancelled`` (no answer came in time, or the model
cancelled the call) is an ``error`` saying so (``client_tool_timeout`` /
``client_tool_cancelled``), and the call takes no answer any more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.protocol import (
    ClientToolCancelled,
    ClientToolRequested,
    ErrorEvent,
    ResponseDone,
    ResponseStarted,
    SessionEnded,
    SpeechStarted,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TranscriptDelta,
    TranscriptDone,
)
from gateway.protocol import ServerEvent as GatewayEvent

from .client_wire import (
    FunctionCallOutput,
    ItemCreate,
    ItemDelete,
    ItemRetrieve,
    ItemTruncate,
    ResponseCancel,
    ResponseCreate,
    ResponseParams,
)
from .conversation import ItemLog, not_found
from .errors import CompatError
from .responses import AssistantMessage, ResponseStream, StreamContext
from .server_wire import (
    BYTES_PER_MS,
    Ids,
    ServerEvent,
    error_from_gateway,
    session_end_error,
)
from .session_config import SessionView
from .user_turns import UserTurns

__all__ = ["Translator", "Truncation"]

_AUDIO_ITEMS_KEPT = 64  # assistant audio items a truncate may still name


@dataclass(frozen=True, slots=True)
class Truncation:
    """The echo of a truncate, and what to tell the gateway (our ``audio.playback``)."""

    events: list[ServerEvent]
    response_id: str  # the gateway's id of the response that item belongs to
    played_ms: int


class Translator:
    def __init__(self, *, ids: Ids, show_tools: bool = False) -> None:
        self._ids = ids
        self._show_tools = show_tools
        self.items = ItemLog()
        self._ctx = StreamContext(self._event, ids, self.items, ids("conv"))
        self._view: SessionView | None = None
        self._responses: dict[str, ResponseStream] = {}  # open ones, by our response id
        self._speaking: ResponseStream | None = None  # the one audio belongs to
        self._requested: ResponseParams | None = None
        self._user = UserTurns(self._ctx)
        self._audio_items: dict[str, AssistantMessage] = {}
        # The client's calls the model made: None while one waits, else why it takes no answer.
        self._client_calls: dict[str, str | None] = {}
        self._last_error: str | None = None
        self._handlers: Mapping[type[Any], Callable[[Any], list[ServerEvent]]] = {
            ResponseStarted: self._response_started,
            TranscriptDelta: self._transcript_delta,
            TranscriptDone: self._transcript_done,
            TextDelta: self._text_delta,
            ResponseDone: self._response_done,
            SpeechStarted: self._speech_started,
            ToolStarted: self._tool_started,
            ToolFinished: self._tool_finished,
            ClientToolRequested: self._client_tool,
            ClientToolCancelled: self._client_tool_cancelled,
            ErrorEvent: self._error,
            SessionEnded: self._session_ended,
        }

    # Session ---------------------------------------------------------------------------------

    def session_created(self, session: SessionView) -> list[ServerEvent]:
        self._view = session
        return [self._event("session.created", session=session.to_wire())]

    def session_updated(self, session: SessionView) -> list[ServerEvent]:
        self._view = session
        return [self._event("session.updated", session=session.to_wire())]

    def error_event(self, error: CompatError) -> ServerEvent:
        return self._event("error", error=error.payload())

    # The gateway's output ----------------------------------------------------------------------

    def on_event(self, event: GatewayEvent) -> list[ServerEvent]:
        """One of the session's events; one without a GA form gives ``[]``."""
        handler = self._handlers.get(type(event))
        return [] if handler is None else handler(event)

    def on_audio(
        self, pcm: bytes, encoded: str | None = None, *, deltas: bool = True
    ) -> list[ServerEvent]:
        """One frame of the assistant's speech (PCM16, 24 kHz); ``encoded``: the same bytes as
        standard base64, when the upstream sent them so; ``deltas`` False: counted, no delta."""
        response = self._speaking
        if response is None or not pcm:
            return []
        events = response.audio(pcm, encoded, delta=deltas)
        message = response.message
        if message is not None and message.item_id not in self._audio_items:
            self._audio_items[message.item_id] = message
            while len(self._audio_items) > _AUDIO_ITEMS_KEPT:
                del self._audio_items[next(iter(self._audio_items))]
        return events

    def _response(self, response_id: str | None) -> ResponseStream | None:
        return None if response_id is None else self._responses.get(response_id)

    def _response_started(self, event: ResponseStarted) -> list[ServerEvent]:
        events = self._user.end_speech()
        params, self._requested = self._requested or ResponseParams(), None
        view = self._view
        response = ResponseStream(
            self._ctx,
            ours=event.response_id,
            modality=params.modality or ("audio" if view is None else view.modality),
            voice="alloy" if view is None else view.voice,
            in_conversation=not params.out_of_band,
            metadata=params.metadata,
        )
        self._responses[response.ours] = response
        self._speaking = response
        events.append(response.created())
        return events

    def _text_delta(self, event: TextDelta) -> list[ServerEvent]:
        response = self._response(event.response_id)
        return [] if response is None else response.delta("text", event.delta)

    def _transcript_delta(self, event: TranscriptDelta) -> list[ServerEvent]:
        if event.role != "user":
            response = self._response(event.response_id)
            return [] if response is None else response.delta("audio", event.delta)
        return self._user.transcript_delta(event.delta, shown=self._transcribing)

    def _transcript_done(self, event: TranscriptDone) -> list[ServerEvent]:
        if event.role != "user":
            response = self._response(event.response_id)
            if response is not None:
                response.transcript_done = event.text
            return []
        return self._user.transcript_done(event.text, shown=self._transcribing)

    def _response_done(self, event: ResponseDone) -> list[ServerEvent]:
        response = self._responses.pop(event.response_id, None)
        if response is None:
            return []
        if self._speaking is response:
            self._speaking = None
        error_message, self._last_error = self._last_error, None
        return response.finish(
            event.status.value, text=event.text, usage=event.usage, error_message=error_message
        )

    def _speech_started(self, event: SpeechStarted) -> list[ServerEvent]:
        vad = None if self._view is None else self._view.turn_detection
        return self._user.speech_started(300 if vad is None else vad.prefix_padding_ms)

    def _error(self, event: ErrorEvent) -> list[ServerEvent]:
        error = error_from_gateway(event)
        if error.code == "upstream_error":
            self._last_error = error.message
        return [self.error_event(error)]

    def _session_ended(self, event: SessionEnded) -> list[ServerEvent]:
        error = session_end_error(event.reason.value, event.detail)
        return [] if error is None else [self.error_event(error)]

    # Tools ------------------------------------------------------------------------------------

    def _tool_started(self, event: ToolStarted) -> list[ServerEvent]:
        if not self._show_tools:
            return []
        return self._added_and_done(
            {
                "id": self._ids("item"),
                "object": "realtime.item",
                "type": "function_call",
                "status": "completed",
                "name": event.name,
                "call_id": event.call_id,
                "arguments": orjson.dumps(event.arguments).decode(),
            }
        )

    def _tool_finished(self, event: ToolFinished) -> list[ServerEvent]:
        if not self._show_tools:
            return []
        result: dict[str, Any] = {"ok": event.ok}
        if event.error is None:
            result["data"] = event.data
        else:
            result["error"] = event.error.to_dict()
        return self._added_and_done(
            {
                "id": self._ids("item"),
                "object": "realtime.item",
                "type": "function_call_output",
                "status": "completed",
                "call_id": event.call_id,
                "output": orjson.dumps(result).decode(),
            }
        )

    def _client_tool(self, event: ClientToolRequested) -> list[ServerEvent]:
        """A call of one of the client's own tools (proposed event, see the module docstring)."""
        response = self._response(event.response_id)
        if response is None:
            return []
        self._client_calls[event.call_id] = None
        return response.client_call(event.call_id, event.name, event.arguments)

    def _client_tool_cancelled(self, event: ClientToolCancelled) -> list[ServerEvent]:
        call_id = event.call_id
        if call_id not in self._client_calls:
            return []
        timeout = event.reason == "timeout"
        why = "was not answered in time" if timeout else "was cancelled by the model"
        self._client_calls[call_id] = why
        error = CompatError(
            "client_tool_timeout" if timeout else "client_tool_cancelled",
            f"The call '{call_id}' of '{event.name}' {why}; it takes no output any "
            + ("more: the model was told it timed out." if timeout else "more."),
            error_type="server_error" if timeout else "invalid_request_error",
        )
        return [self.error_event(error)]

    def _added_and_done(self, item: dict[str, Any]) -> list[ServerEvent]:
        previous = self.items.add(item)
        return [
            self._event(name, previous_item_id=previous, item=item)
            for name in ("conversation.item.added", "conversation.item.done")
        ]

    # The client's own events the server answers ------------------------------------------------

    def input_appended(self, n_bytes: int) -> None:
        """The client appended ``n_bytes`` of audio (forwarded to the gateway)."""
        self._user.appended(n_bytes)

    def commit_input(self, event_id: str | None = None) -> list[ServerEvent]:
        """``input_audio_buffer.commit``: ``committed`` and the user item (the bridge also sends
        our ``audio.commit`` without a reply: as on OpenAI, ``response.create`` asks for it)."""
        return self._user.commit(event_id)

    def clear_input(self) -> list[ServerEvent]:
        return self._user.clear()

    def create_item(self, event: ItemCreate) -> list[ServerEvent]:
        """Echo a created item (``conversation.item.added`` then ``.done``)."""
        item = event.item
        item_id = item.id or self._ids("item")
        try:
            self.items.check_new(item_id, event.previous_item_id)
            if isinstance(item, FunctionCallOutput):
                self._check_answerable(item.call_id)
        except CompatError as error:
            raise error.for_event(event.event_id) from None
        if isinstance(item, FunctionCallOutput):
            self._client_calls[item.call_id] = "was answered already"
        wire = item.to_wire(item_id)
        previous = self.items.add(wire, event.previous_item_id)
        return [
            self._event(name, previous_item_id=previous, item=wire)
            for name in ("conversation.item.added", "conversation.item.done")
        ]

    def _check_answerable(self, call_id: str) -> None:
        if call_id not in self._client_calls:
            raise CompatError(
                "invalid_tool_call_id",
                f"Tool call ID '{call_id}' not found in conversation.",
                param="item.call_id",
            )
        why = self._client_calls[call_id]
        if why is not None:
            raise CompatError(
                "invalid_tool_call_id", f"Tool call ID '{call_id}' {why}.", param="item.call_id"
            )

    def delete_item(self, event: ItemDelete) -> list[ServerEvent]:
        try:
            self.items.remove(event.item_id)
        except CompatError as error:
            raise error.for_event(event.event_id) from None
        return [self._event("conversation.item.deleted", item_id=event.item_id)]

    def retrieve_item(self, event: ItemRetrieve) -> list[ServerEvent]:
        item = self.items.snapshot(event.item_id)
        if item is None:
            raise not_found(event.item_id).for_event(event.event_id)
        return [self._event("conversation.item.retrieved", item=item)]

    def truncate_item(self, event: ItemTruncate) -> Truncation:
        message = self._audio_items.get(event.item_id)
        if event.item_id not in self.items:
            raise not_found(event.item_id).for_event(event.event_id)
        if message is None or message.audio_bytes == 0 or event.content_index != 0:
            raise CompatError(
                "unsupported_content_type",
                "Only model output audio messages can be truncated",
                event_id=event.event_id,
            )
        audio_ms = message.audio_bytes // BYTES_PER_MS
        if event.audio_end_ms > audio_ms:
            raise CompatError(
                "invalid_value",
                f"Audio content of {audio_ms}ms is already shorter than {event.audio_end_ms}ms",
                param="audio_end_ms",
                event_id=event.event_id,
            )
        truncated = self._event(
            "conversation.item.truncated",
            item_id=event.item_id,
            content_index=0,
            audio_end_ms=event.audio_end_ms,
        )
        return Truncation([truncated], message.response_ours, event.audio_end_ms)

    def request_response(self, event: ResponseCreate) -> None:
        """``response.create``: refused while a response writes to the conversation; else its
        parameters apply to the next ``response.started``."""
        if not event.response.out_of_band:
            for response in self._responses.values():
                if response.in_conversation:
                    raise CompatError(
                        "conversation_already_has_active_response",
                        "Conversation already has an active response in progress: "
                        f"{response.id}. Wait until the response is finished before creating "
                        "a new one.",
                        event_id=event.event_id,
                    )
        self._requested = event.response

    def cancel_target(self, event: ResponseCancel) -> str:
        """The gateway's id of the response ``response.cancel`` stops (``response_id`` given:
        that one; else the one speaking or started last)."""
        for response in reversed(self._responses.values()):
            if event.response_id in (None, response.id):
                return response.ours
        raise CompatError(
            "response_cancel_not_active",
            "Cancellation failed: no active response found",
            event_id=event.event_id,
        )

    # Internals ------------------------------------------------------------------------------

    @property
    def _transcribing(self) -> bool:
        return self._view is not None and self._view.transcription is not None

    def _event(self, kind: str, **fields: Any) -> ServerEvent:
        return {"type": kind, "event_id": self._ids("event"), **fields}
