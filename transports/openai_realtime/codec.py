"""The OpenAI Realtime protocol as a pure state machine: provider events ⇄ neutral events.

Theory of operation. ``RealtimeCodec`` holds one conversation across upstream connections. Server
events go in through ``receive`` and come out as neutral events for the session; the session's
inputs (audio, text, tool results, cancel, truncate…) go in through methods and come out as client
frames queued in ``outbox``, which the async shell sends in order. No I/O, no clock. The state and
the input side live in ``inputs.RealtimeInputs``; this module decodes the server's events.

Rules it keeps (what a client sees of them: docs/protocol.md 10.6):

- One response at a time. ``response.create`` is sent only when no response is active or
  requested; otherwise it is deferred to the next ``response.done``. If the server refuses it
  because a response it started by itself (server VAD) is running, it is asked for again after
  that one only when that response began before our input reached the conversation.
- Tool calls: a call is collected once per ``call_id`` (``function_call_arguments.done``,
  ``output_item.done`` and ``response.done`` all name it) and reported when its response ends, as
  one ``ToolCallsRequested`` batch. Calls of a response that ended ``cancelled`` or ``failed``
  never run; each gets a "not run" output so the conversation stays well formed. The follow-up
  ``response.create`` goes once every output of the batch has been added.
- Barge-in: after ``speech_started`` nothing more of the interrupted response reaches the
  session; the response ends ``interrupted``. If the server will not cancel it by itself
  (``interrupt_response`` off) the codec sends ``response.cancel``; the shell calls
  ``cancel_overdue`` when the server takes too long.
- Truncate: ``audio_end_ms`` is the played time clamped to the audio actually forwarded, per
  audio item of the response; nothing is sent when nothing, or everything, was heard.
- Reconnect: ``connection_lost`` ends the response in flight (the model answers again unless the
  user cancelled or talked over it); while offline, inputs are kept (uplink audio in a bounded
  buffer, the conversation in the ``ReplayLog``, a pending commit) and ``resume`` returns the
  frames that rebuild the state on a new connection.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from transports import events as ev
from transports.base import UpstreamConfig
from transports.openai_realtime import wire
from transports.openai_realtime.inputs import RealtimeInputs
from transports.openai_realtime.replay import Entry
from transports.openai_realtime.responses import ResponseState

__all__ = ["NOT_RUN_OUTPUT", "RealtimeCodec"]

_RECENT_RESPONSES = 16
_SEEN_CALLS = 4096
NOT_RUN_OUTPUT = orjson.dumps(
    {
        "ok": False,
        "error": {
            "type": "CANCELLED",
            "message": "The response was cancelled before this call ran; nothing was done.",
        },
    }
).decode()
# Errors that need no one's attention: races the protocol allows (docs/protocol.md 10.6).
_QUIET_ERRORS = frozenset(
    {
        "conversation_already_has_active_response",
        "response_cancel_not_active",
        "input_audio_buffer_commit_empty",
        "invalid_tool_call_id",
    }
)

Handler = Callable[[Mapping[str, Any]], list[ev.UpstreamEvent]]


class RealtimeCodec(RealtimeInputs):
    def __init__(
        self,
        config: UpstreamConfig,
        *,
        transcription_model: str = wire.DEFAULT_TRANSCRIPTION_MODEL,
    ) -> None:
        super().__init__(config, transcription_model=transcription_model)
        self._handlers: dict[str, Handler] = {
            "session.created": self._session_created,
            "session.updated": self._session_updated,
            "response.created": self._response_created,
            "response.output_audio_transcript.delta": self._transcript_delta,
            "response.output_audio_transcript.done": self._transcript_done,
            "response.output_text.delta": self._text_delta,
            "response.output_text.done": self._text_done,
            "response.output_audio.done": self._audio_done,
            "response.function_call_arguments.done": self._call_done,
            "response.output_item.done": self._item_done,
            "response.done": self._response_done,
            "input_audio_buffer.speech_started": self._speech_started,
            "input_audio_buffer.speech_stopped": lambda _: [ev.SpeechStopped()],
            "input_audio_buffer.committed": self._committed,
            "input_audio_buffer.cleared": self._committed,
            "conversation.item.added": self._item_added,
            "conversation.item.created": self._item_added,  # legacy alias of added
            "conversation.item.input_audio_transcription.delta": self._user_delta,
            "conversation.item.input_audio_transcription.completed": self._user_done,
            "conversation.item.input_audio_transcription.failed": self._user_failed,
            "error": self._error,
        }

    # -- server → session ----------------------------------------------------------------------

    def receive(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        kind = event.get("type")
        if kind == "response.output_audio.delta":  # the hot path first
            return self._audio_delta(event)
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            return handler(event)
        if isinstance(kind, str) and kind.startswith(_IGNORED_PREFIXES):
            return []
        return [ev.Unknown(dict(event))]

    def _audio_delta(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._active
        if r is None or r.response_id != event.get("response_id"):
            return []
        item = r.audio_item(str(event.get("item_id", "")))
        delta = event.get("delta") or ""
        if r.interrupted:  # not forwarded, but the item is longer than what the user got
            item.received += len(delta) * 3 // 4
            return []
        try:  # strict: what b64decode(validate=True) accepts, without its Python wrapper
            pcm = binascii.a2b_base64(delta, strict_mode=True)
        except (binascii.Error, ValueError, TypeError):
            self.notes.append(("upstream_audio_unreadable", {"response": r.response_id}))
            return []
        item.received += len(pcm)
        item.forwarded += len(pcm)
        return [ev.AudioDelta(r.response_id, pcm, encoded=delta)]

    def _session_created(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        session = event.get("session") or {}
        self.session_id = str(session.get("id", ""))
        expires = session.get("expires_at")
        self.expires_at = float(expires) if isinstance(expires, int | float) else None
        return []

    def _session_updated(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        audio_in = ((event.get("session") or {}).get("audio") or {}).get("input") or {}
        detection = audio_in.get("turn_detection")
        self.interrupt_response = bool(
            detection and detection.get("interrupt_response", True) is not False
        )
        padding = None  # no VAD, or semantic VAD (its padding is not published): keep it all
        if isinstance(detection, Mapping) and detection.get("type") == "server_vad":
            padding = detection.get("prefix_padding_ms", wire.SERVER_VAD_PREFIX_PADDING_MS)
        self.uplink.server_vad(padding if isinstance(padding, int) else None)
        return []

    def _response_created(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        response_id = str((event.get("response") or {}).get("id", ""))
        out: list[ev.UpstreamEvent] = []
        old = self._active
        if old is not None:  # never seen in practice: end the old one first, once
            old.ended = True
            out.append(ev.ResponseDone(old.response_id, "cancelled"))
        self._requested = ""
        r = self._active = ResponseState(response_id, bytes_per_ms=self.bytes_per_ms)
        metadata = (event.get("response") or {}).get("metadata") or {}
        r.aside = self._holding_requested or metadata.get("gateway") == "holding_line"
        self._holding_requested = False
        if not r.aside:
            self._unseen_input = False  # a new response sees everything added so far
        self._recent[response_id] = r
        while len(self._recent) > _RECENT_RESPONSES:
            self._recent.popitem(last=False)
        out.append(ev.ResponseStarted(response_id, aside=r.aside))
        if self._cancel_next:
            self._cancel_next = False
            self._cancel(r, by_client=True)
        return out

    def _current(self, event: Mapping[str, Any]) -> ResponseState | None:
        r = self._active
        return r if r is not None and r.response_id == event.get("response_id") else None

    def _text_parts(self, r: ResponseState, item_id: str) -> list[str]:
        parts = r.texts.get(item_id)
        if parts is None:
            parts = r.texts[item_id] = []
            if not r.aside:  # a holding line is not part of the conversation
                r.entries[item_id] = self.replay.add(Entry("assistant", item_id=item_id))
        return parts

    def _transcript_delta(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is None:
            return []
        delta = str(event.get("delta", ""))
        self._text_parts(r, str(event.get("item_id", ""))).append(delta)
        return [] if r.interrupted else [ev.TranscriptDelta("assistant", delta, r.response_id)]

    def _transcript_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is None:
            return []
        text = str(event.get("transcript", ""))
        self._text_parts(r, str(event.get("item_id", "")))[:] = [text]
        return [] if r.interrupted else [ev.TranscriptDone("assistant", text, r.response_id)]

    def _text_delta(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is None:
            return []
        delta = str(event.get("delta", ""))
        self._text_parts(r, str(event.get("item_id", ""))).append(delta)
        return [] if r.interrupted else [ev.TextDelta(r.response_id, delta)]

    def _text_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is not None:
            self._text_parts(r, str(event.get("item_id", "")))[:] = [str(event.get("text", ""))]
        return []

    def _audio_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is not None:
            r.audio_item(str(event.get("item_id", ""))).done = True
        return []

    def _add_call(self, r: ResponseState, call_id: str, name: str, arguments: Any) -> None:
        if not call_id or call_id in r.calls:
            return
        r.calls[call_id] = ev.RequestedCall(call_id, name, arguments)
        if call_id not in self._seen_calls:  # in the conversation, in the server's order
            text = arguments if isinstance(arguments, str) else ""
            self.replay.add(Entry("call", text, call_id=call_id, name=name))

    def _call_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is not None:
            self._add_call(
                r, str(event.get("call_id", "")), str(event.get("name", "")), event.get("arguments")
            )
        return []

    def _item_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        item = event.get("item") or {}
        if r is not None and item.get("type") == "function_call":
            self._add_call(
                r, str(item.get("call_id", "")), str(item.get("name", "")), item.get("arguments")
            )
        return []

    def _response_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        response = event.get("response") or {}
        response_id = str(response.get("id", ""))
        r = self._recent.get(response_id)
        if r is None or r.ended:
            # Never announced to the session, or already ended for it: nothing to tell.
            self.notes.append(("upstream_response_done_ignored", {"response": response_id}))
            return []
        r.ended = True
        if self._active is r:
            self._active = None
        for item in response.get("output") or ():
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                self._add_call(
                    r,
                    str(item.get("call_id", "")),
                    str(item.get("name", "")),
                    item.get("arguments"),
                )
        raw_status = str(response.get("status", "completed"))
        details = response.get("status_details") or {}
        status: ev.ResponseStatus
        if raw_status == "cancelled":
            interrupted = r.interrupted or details.get("reason") == "turn_detected"
            status = "interrupted" if interrupted and not r.cancelled_by_client else "cancelled"
        elif raw_status == "failed":
            status = "failed"
        else:  # completed, or incomplete (max_output_tokens, content_filter): what came is kept
            status = "completed"
            self.completed_responses += 0 if r.aside else 1
            if raw_status == "incomplete":
                self.notes.append(("response_incomplete", {"reason": details.get("reason")}))
        for item_id, entry in r.entries.items():
            entry.text = r.heard_text(item_id)
        out: list[ev.UpstreamEvent] = []
        calls = [c for c in r.calls.values() if c.call_id not in self._seen_calls]
        for call in calls:
            self._seen_calls[call.call_id] = None
        while len(self._seen_calls) > _SEEN_CALLS:
            self._seen_calls.popitem(last=False)
        if calls and status == "completed":
            self._awaiting[response_id] = {c.call_id for c in calls}
            out.append(ev.ToolCallsRequested(response_id, tuple(calls)))
        elif calls:
            # Never run a call of a cancelled or failed response; answer it so the model does
            # not wait for it in later turns.
            for call in calls:
                self._add_item(Entry("output", NOT_RUN_OUTPUT, call_id=call.call_id))
            self.notes.append(("tool_calls_skipped", {"calls": [c.call_id for c in calls]}))
        if status == "failed":
            error = details.get("error") or {}
            message = str(error.get("message") or "the response failed")
            out.append(ev.UpstreamNotice(str(error.get("code") or "response_failed"), message))
        usage = response.get("usage")
        out.append(ev.ResponseDone(response_id, status, usage if isinstance(usage, dict) else None))
        self.request_wanted()
        return out

    def _speech_started(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._active
        if r is not None and not r.interrupted:
            r.interrupted = True
            if not self.interrupt_response:
                self._cancel(r)
        self.uplink.speech_started()
        return [ev.SpeechStarted()]

    def _committed(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        self.uplink.committed()
        return []

    def _item_added(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        item = event.get("item") or {}
        if item.get("type") == "function_call_output" or item.get("role") == "system":
            self._unseen_input = self._unseen_input or self._active is not None
        elif item.get("role") == "user":
            parts = [p for p in item.get("content") or () if isinstance(p, Mapping)]
            if any(p.get("type") == "input_audio" for p in parts):
                # Filled with the transcript when it arrives (possibly after the reply started).
                self.replay.add(Entry("user", item_id=str(item.get("id", ""))))
            else:
                self._unseen_input = self._unseen_input or self._active is not None
        return []

    def _user_delta(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        return [ev.TranscriptDelta("user", str(event.get("delta", "")))]

    def _user_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        text = str(event.get("transcript", ""))
        entry = self.replay.find(str(event.get("item_id", "")))
        if entry is not None:
            entry.text = text
        return [ev.TranscriptDone("user", text), ev.UserInputTranscribed(text)]

    def _user_failed(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        error = event.get("error") or {}
        message = str(error.get("message") or "the user's speech could not be transcribed")
        return [ev.UpstreamNotice("transcription_failed", message)]

    def _error(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        error = event.get("error") or {}
        code = str(error.get("code") or error.get("type") or "error")
        message = str(error.get("message") or "unknown error")
        if code == "session_expired":
            self.expired = True
            self.notes.append(("upstream_session_expired", {"session": self.session_id}))
            return []
        already_active = code == "conversation_already_has_active_response"
        ours = bool(self._last_request) and error.get("event_id") == self._last_request
        if ours or (already_active and self._requested):
            # Our response.create was refused: the response.created seen since (if any) was
            # the server's own (VAD), not ours.
            self._requested = ""
            self._holding_requested = False
            if already_active and self._unseen_input:
                # The running response started before our input arrived: it cannot answer it.
                self._want_response = True
        if code in _QUIET_ERRORS:
            self.notes.append(("upstream_error_ignored", {"code": code, "detail": message}))
            return []
        return [ev.UpstreamNotice(code, message)]


_IGNORED_PREFIXES = (
    "response.output_item.added",
    "response.content_part.",
    "response.function_call_arguments.delta",
    "response.output_audio_transcript.",
    "response.output_text.",
    "response.output_audio.",
    "conversation.item.",
    "input_audio_buffer.",
    "output_audio_buffer.",
    "rate_limits.updated",
    "response.mcp",
    "mcp_list_tools.",
)
