"""The OpenAI Realtime protocol as a pure state machine: provider events ⇄ neutral events.

Theory of operation. ``RealtimeCodec`` holds one conversation across upstream connections. Server
events go in through ``receive`` and come out as neutral events for the session; the session's
inputs (audio, text, tool results, cancel, truncate…) go in through methods and come out as client
frames queued in ``outbox``, which the async shell sends in order. No I/O, no clock.

Rules it keeps (reference sections 6 and 7):

- One response at a time. ``response.create`` is sent only when no response is active or
  requested; otherwise it is deferred to the next ``response.done``.
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
- Reconnect: ``connection_lost`` ends the response in flight; while offline, inputs are kept
  (uplink audio in a bounded buffer, conversation in the ``ReplayLog``) and ``resume`` returns
  the frames that rebuild the conversation on a new connection.
"""

from __future__ import annotations

import base64
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from transports import events as ev
from transports.base import Mode, ToolResult, UpstreamConfig
from transports.openai_realtime import wire
from transports.openai_realtime.replay import Entry, ReplayLog

__all__ = ["NOT_RUN_OUTPUT", "RealtimeCodec", "session_config"]

# Uplink audio is sent in appends of at least 20 ms.
MIN_APPEND_BYTES = 20 * wire.AUDIO_BYTES_PER_MS
# A commit of less than 100 ms is refused by the server (input_audio_buffer_commit_empty).
MIN_COMMIT_BYTES = 100 * wire.AUDIO_BYTES_PER_MS
# Uplink audio kept while the upstream reconnects (the newest is kept).
OFFLINE_AUDIO_BYTES = 15_000 * wire.AUDIO_BYTES_PER_MS
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
# Errors that need no one's attention: races the protocol allows (reference sections 6.3, 7).
_QUIET_ERRORS = frozenset(
    {
        "conversation_already_has_active_response",
        "response_cancel_not_active",
        "input_audio_buffer_commit_empty",
    }
)


def session_config(
    config: UpstreamConfig,
    mode: Mode,
    instructions: str,
    *,
    transcription_model: str = wire.DEFAULT_TRANSCRIPTION_MODEL,
) -> wire.SessionConfig:
    """The GA ``session.update`` body for this session in ``mode``."""
    voice = mode == "voice"
    pcm: wire.AudioFormat = {"type": "audio/pcm", "rate": wire.AUDIO_RATE}
    transcription: wire.Transcription | None = None
    if voice:
        transcription = {"model": transcription_model}
        if config.locale:
            transcription["language"] = config.locale.split("-")[0].lower()
    output: wire.AudioOutput = {"format": pcm}
    if config.voice:
        output["voice"] = config.voice
    return {
        "type": "realtime",
        "instructions": instructions,
        "output_modalities": ["audio"] if voice else ["text"],
        "audio": {
            "input": {
                "format": pcm,
                "turn_detection": (
                    {"type": "server_vad", "create_response": True, "interrupt_response": True}
                    if voice
                    else None
                ),
                "transcription": transcription,
            },
            "output": output,
        },
        "tools": wire.function_tools([t.provider_schemas["openaiRealtime"] for t in config.tools]),
        "tool_choice": "auto",
    }


@dataclass(slots=True)
class _AudioItem:
    item_id: str
    forwarded: int = 0  # bytes passed on to the session
    received: int = 0  # bytes the server produced (more than forwarded after a barge-in)
    done: bool = False


@dataclass(slots=True)
class _Response:
    response_id: str
    audio: list[_AudioItem] = field(default_factory=list)
    texts: dict[str, list[str]] = field(default_factory=dict)  # message item id → text parts
    calls: dict[str, ev.RequestedCall] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)  # ("text"|"call", id)
    entries: dict[str, Entry] = field(default_factory=dict)  # message item id → replay entry
    interrupted: bool = False  # barge-in: the user is talking over it
    cancel_sent: bool = False

    def audio_item(self, item_id: str) -> _AudioItem:
        for item in reversed(self.audio):
            if item.item_id == item_id:
                return item
        item = _AudioItem(item_id)
        self.audio.append(item)
        return item

    def add_call(self, call_id: str, name: str, arguments: str | None) -> None:
        if call_id and call_id not in self.calls:
            self.calls[call_id] = ev.RequestedCall(call_id, name, arguments)
            self.order.append(("call", call_id))

    def text_parts(self, item_id: str) -> list[str]:
        parts = self.texts.get(item_id)
        if parts is None:
            parts = self.texts[item_id] = []
            self.order.append(("text", item_id))
        return parts


class RealtimeCodec:
    def __init__(
        self,
        config: UpstreamConfig,
        *,
        transcription_model: str = wire.DEFAULT_TRANSCRIPTION_MODEL,
    ) -> None:
        self.config = config
        self.mode: Mode = config.mode
        self.instructions = config.instructions
        self.transcription_model = transcription_model
        self.outbox: deque[str] = deque()
        # (event name, details) for the shell to log; never audio or tool data.
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.connected = False
        self.session_id = ""
        self.expires_at: float | None = None
        self.expired = False  # the server said session_expired: the close that follows is planned
        self.interrupt_response = True
        self.completed_responses = 0  # progress: the transport bounds reconnects between them
        self.replay = ReplayLog()
        for item in config.history:
            kind = "system" if item.role == "tool" else item.role
            self.replay.add(Entry(kind, item.text))
        self._active: _Response | None = None
        self._requested = False  # response.create sent, response.created not yet seen
        self._want_response = False
        self._recent: OrderedDict[str, _Response] = OrderedDict()
        self._seen_calls: OrderedDict[str, None] = OrderedDict()
        self._awaiting: dict[str, set[str]] = {}  # response id → calls without an output
        self._uplink = bytearray()
        self._uncommitted = 0
        self._offline_audio = bytearray()
        self._handlers: dict[str, Callable[[Mapping[str, Any]], list[ev.UpstreamEvent]]] = {
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

    # -- properties the shell reads ------------------------------------------------------------

    @property
    def active_response_id(self) -> str | None:
        return None if self._active is None else self._active.response_id

    def session_update(self) -> str:
        return wire.session_update(
            session_config(
                self.config,
                self.mode,
                self.instructions,
                transcription_model=self.transcription_model,
            )
        )

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
        if r.interrupted:  # not forwarded, but the item is longer than what the user got
            item.received += len(event.get("delta") or "") * 3 // 4
            return []
        pcm = base64.b64decode(event.get("delta") or "")
        item.received += len(pcm)
        item.forwarded += len(pcm)
        return [ev.AudioDelta(r.response_id, pcm)]

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
        return []

    def _response_created(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        response_id = str((event.get("response") or {}).get("id", ""))
        out: list[ev.UpstreamEvent] = []
        if self._active is not None:  # never seen in practice: close the old one first
            out.append(ev.ResponseDone(self._active.response_id, "cancelled"))
        self._requested = False
        r = self._active = _Response(response_id)
        self._recent[response_id] = r
        while len(self._recent) > _RECENT_RESPONSES:
            self._recent.popitem(last=False)
        out.append(ev.ResponseStarted(response_id))
        return out

    def _current(self, event: Mapping[str, Any]) -> _Response | None:
        r = self._active
        return r if r is not None and r.response_id == event.get("response_id") else None

    def _transcript_delta(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is None:
            return []
        delta = str(event.get("delta", ""))
        r.text_parts(str(event.get("item_id", ""))).append(delta)
        if r.interrupted:
            return []
        return [ev.TranscriptDelta("assistant", delta, r.response_id)]

    def _transcript_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is None or r.interrupted:
            return []
        text = str(event.get("transcript", ""))
        r.texts[str(event.get("item_id", ""))] = [text]
        return [ev.TranscriptDone("assistant", text, r.response_id)]

    def _text_delta(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is None:
            return []
        delta = str(event.get("delta", ""))
        r.text_parts(str(event.get("item_id", ""))).append(delta)
        return [] if r.interrupted else [ev.TextDelta(r.response_id, delta)]

    def _text_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is not None:
            r.texts[str(event.get("item_id", ""))] = [str(event.get("text", ""))]
        return []

    def _audio_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is not None:
            r.audio_item(str(event.get("item_id", ""))).done = True
        return []

    def _call_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        if r is not None:
            r.add_call(
                str(event.get("call_id", "")),
                str(event.get("name", "")),
                event.get("arguments"),
            )
        return []

    def _item_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._current(event)
        item = event.get("item") or {}
        if r is not None and item.get("type") == "function_call":
            r.add_call(
                str(item.get("call_id", "")), str(item.get("name", "")), item.get("arguments")
            )
        return []

    def _response_done(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        response = event.get("response") or {}
        response_id = str(response.get("id", ""))
        r = self._recent.get(response_id) or _Response(response_id)
        if self._active is r:
            self._active = None
        for item in response.get("output") or ():
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                r.add_call(
                    str(item.get("call_id", "")), str(item.get("name", "")), item.get("arguments")
                )
        raw_status = str(response.get("status", "completed"))
        details = response.get("status_details") or {}
        status: ev.ResponseStatus
        if raw_status == "cancelled":
            interrupted = r.interrupted or details.get("reason") == "turn_detected"
            status = "interrupted" if interrupted else "cancelled"
        elif raw_status == "failed":
            status = "failed"
        else:  # completed, or incomplete (max_output_tokens, content_filter): what came is kept
            status = "completed"
            self.completed_responses += 1
            if raw_status == "incomplete":
                self.notes.append(("response_incomplete", {"reason": details.get("reason")}))
        out: list[ev.UpstreamEvent] = []
        calls = [c for c in r.calls.values() if c.call_id not in self._seen_calls]
        for call in calls:
            self._seen_calls[call.call_id] = None
        while len(self._seen_calls) > _SEEN_CALLS:
            self._seen_calls.popitem(last=False)
        self._log_response(r, {c.call_id for c in calls})
        if calls and status == "completed":
            self._awaiting[response_id] = {c.call_id for c in calls}
            out.append(ev.ToolCallsRequested(response_id, tuple(calls)))
        elif calls:
            # Never run a call of a cancelled or failed response; answer it so the model does
            # not wait for it in later turns.
            for call in calls:
                self._add_output(call.call_id, NOT_RUN_OUTPUT)
            self.notes.append(("tool_calls_skipped", {"calls": [c.call_id for c in calls]}))
        if status == "failed":
            error = details.get("error") or {}
            message = str(error.get("message") or "the response failed")
            out.append(ev.UpstreamNotice(str(error.get("code") or "response_failed"), message))
        usage = response.get("usage")
        out.append(ev.ResponseDone(response_id, status, usage if isinstance(usage, dict) else None))
        if self._want_response:
            self._want_response = False
            self.request_response()
        return out

    def _log_response(self, r: _Response, new_calls: set[str]) -> None:
        for kind, key in r.order:
            if kind == "text":
                text = "".join(r.texts.get(key, ())).strip()
                if text:
                    r.entries[key] = self.replay.add(Entry("assistant", text, item_id=key))
            elif key in new_calls:
                call = r.calls[key]
                arguments = call.arguments if isinstance(call.arguments, str) else ""
                self.replay.add(Entry("call", arguments, call_id=key, name=call.name))

    def _speech_started(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        r = self._active
        if r is not None and not r.interrupted:
            r.interrupted = True
            if not self.interrupt_response:
                self._cancel(r)
        return [ev.SpeechStarted()]

    def _committed(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        self._uncommitted = 0
        return []

    def _item_added(self, event: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        item = event.get("item") or {}
        if item.get("role") == "user" and any(
            isinstance(part, Mapping) and part.get("type") == "input_audio"
            for part in item.get("content") or ()
        ):
            # Filled with the transcript when it arrives (possibly after the reply started).
            self.replay.add(Entry("user", item_id=str(item.get("id", ""))))
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
        if code == "conversation_already_has_active_response":
            self._requested = False  # the response already running answers instead
        if code in _QUIET_ERRORS or code == "invalid_tool_call_id":
            self.notes.append(("upstream_error_ignored", {"code": code, "detail": message}))
            return []
        return [ev.UpstreamNotice(code, message)]

    # -- session → server ----------------------------------------------------------------------

    def _send(self, frame: str) -> None:
        if self.connected:
            self.outbox.append(frame)

    def audio(self, pcm: bytes) -> None:
        if not self.connected:
            self._offline_audio += pcm
            if len(self._offline_audio) > OFFLINE_AUDIO_BYTES:
                del self._offline_audio[: len(self._offline_audio) - OFFLINE_AUDIO_BYTES]
            return
        uplink = self._uplink
        if not uplink and len(pcm) >= MIN_APPEND_BYTES:
            self._append(pcm)  # a whole frame: no copy
            return
        uplink += pcm
        if len(uplink) >= MIN_APPEND_BYTES:
            self._append(bytes(uplink))
            uplink.clear()

    def _append(self, pcm: bytes) -> None:
        self._uncommitted += len(pcm)
        self.outbox.append(wire.audio_append(base64.b64encode(pcm).decode("ascii")))

    def commit(self) -> None:
        """Push-to-talk end of utterance: the model answers what it heard."""
        if not self.connected:
            self.request_response()
            return
        if self._uplink:
            self._append(bytes(self._uplink))
            self._uplink.clear()
        if self._uncommitted >= MIN_COMMIT_BYTES:
            self._uncommitted = 0
            self._send(wire.audio_commit())
            self.request_response()

    def clear(self) -> None:
        self._uplink.clear()
        self._offline_audio.clear()
        self._uncommitted = 0
        self._send(wire.audio_clear())

    def user_text(self, text: str) -> None:
        r = self._active
        if r is not None and not r.interrupted:
            self._cancel(r)  # a new message supersedes the answer in progress
        self._add_item(Entry("user", text))
        self.request_response()

    def context(self, text: str) -> None:
        self._add_item(Entry("system", text))

    def tool_results(self, results: Sequence[ToolResult]) -> None:
        for result in results:
            response_id = next(
                (rid for rid, ids in self._awaiting.items() if result.call_id in ids), None
            )
            if response_id is None:
                self.notes.append(("tool_result_ignored", {"call_id": result.call_id}))
                continue
            self._add_output(result.call_id, _json(result.envelope))
            waiting = self._awaiting[response_id]
            waiting.discard(result.call_id)
            if not waiting:
                del self._awaiting[response_id]
                self.request_response()

    def late_result(self, result: ToolResult) -> None:
        self._add_item(
            Entry(
                "system",
                f"Result of the earlier {result.name} call {result.call_id}, after the user "
                f"answered its confirmation: {_json(result.envelope)}",
            )
        )
        self.request_response()

    def cancel(self) -> None:
        self._want_response = False
        if self._active is not None:
            self._cancel(self._active)

    def cancel_overdue(self, response_id: str) -> None:
        """The server has not cancelled an interrupted response by itself: do it."""
        r = self._active
        if r is not None and r.response_id == response_id and r.interrupted:
            self._cancel(r)

    def truncate(self, response_id: str, played_ms: int) -> None:
        r = self._recent.get(response_id)
        if r is None:
            return
        remaining = max(0, played_ms)
        for item in r.audio:
            forwarded_ms = item.forwarded // wire.AUDIO_BYTES_PER_MS
            heard = min(remaining, forwarded_ms)  # never more than the user could have heard
            remaining -= heard
            if heard <= 0:
                break  # this item (and any after it) was not heard at all: nothing to cut
            if item.done and heard >= item.received // wire.AUDIO_BYTES_PER_MS:
                continue  # played to its end
            self._send(wire.truncate(item.item_id, heard))
            entry = r.entries.get(item.item_id)
            total_ms = item.received // wire.AUDIO_BYTES_PER_MS
            if entry is not None and total_ms > 0:
                entry.text = _heard_words(entry.text, heard / total_ms)
            break

    def update(self, *, mode: Mode | None = None, instructions: str | None = None) -> None:
        if mode is not None:
            self.mode = mode
        if instructions is not None:
            self.instructions = instructions
        self._send(self.session_update())

    def request_response(self) -> None:
        if not self.connected or self._active is not None or self._requested:
            self._want_response = True
            return
        self._requested = True
        self.outbox.append(wire.response_create())

    def _cancel(self, r: _Response) -> None:
        if not r.cancel_sent:
            r.cancel_sent = True
            self._send(wire.response_cancel(r.response_id))

    def _add_item(self, entry: Entry) -> None:
        self.replay.add(entry)
        self._send(wire.item_create(entry.item()))

    def _add_output(self, call_id: str, output: str) -> None:
        self._add_item(Entry("output", output, call_id=call_id))

    # -- connection changes ----------------------------------------------------------------------

    def connection_lost(self) -> list[ev.UpstreamEvent]:
        """The socket is gone: end the response in flight; keep everything else for ``resume``."""
        self.connected = False
        self.outbox.clear()
        self._offline_audio[:0] = self._uplink
        self._uplink.clear()
        self._uncommitted = 0
        out: list[ev.UpstreamEvent] = []
        r, self._active = self._active, None
        if r is not None:
            out.append(ev.ResponseDone(r.response_id, "interrupted"))
            self._want_response = True  # the model answers again on the new connection
        if self._requested:
            self._requested = False
            self._want_response = True
        return out

    def resume(self) -> list[str]:
        """Frames that rebuild the conversation on a new connection, after ``session.updated``."""
        self.connected = True
        self.expired = False
        frames = [wire.item_create(item) for item in self.replay.items()]
        audio, self._offline_audio = bytes(self._offline_audio), bytearray()
        for start in range(0, len(audio), 50 * MIN_APPEND_BYTES):  # 1 s per append
            self._uncommitted += len(audio[start : start + 50 * MIN_APPEND_BYTES])
            frames.append(
                wire.audio_append(
                    base64.b64encode(audio[start : start + 50 * MIN_APPEND_BYTES]).decode()
                )
            )
        if self._want_response:
            self._want_response = False
            self._requested = True
            frames.append(wire.response_create())
        return frames


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


def _json(value: Mapping[str, Any]) -> str:
    return orjson.dumps(value, default=dict).decode()


def _heard_words(text: str, fraction: float) -> str:
    words = text.split()
    return " ".join(words[: round(len(words) * min(1.0, fraction))])
