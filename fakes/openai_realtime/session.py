"""The per-connection protocol state of the fake OpenAI Realtime server, as pure code.

Inputs are client events (parsed JSON), decoded audio and "the session expires now"; outputs are
``Action``s (``wire``) for the async shell: server events to send, closes, and responses to
deliver step by step. Nothing here awaits, sleeps or reads a clock, so every rule can be tested
without an event loop. Theory of operation:

- ``start()`` gives ``session.created`` (full GA session, ``config``);
- ``handle(event)`` dispatches one client event. A ``ClientError`` raised by a handler becomes an
  ``error`` event echoing the client's ``event_id``; handlers validate before they change state,
  so a rejected event changes nothing;
- one response is active at a time (``ResponseRun``); ``response.created`` is sent at once and
  ``Begin`` asks the shell to pull the remaining steps with ``next_step``;
- what a response says: the items added since the previous response started are routed to the
  ``LocalBrain`` (``routing``), fake-only directives in user text first: ``/drop TEXT``
  (speak, then close 1011 after 2 deltas), ``/expire``, ``/hang``, ``/unknown TEXT`` (speak,
  with an event type and fields the API reference does not list); the brain's calls go out under
  server-wide call ids (``call_<n>``: the brain numbers its calls from 1 in every session, and
  OpenAI's ids never repeat), mapped back when their outputs come;
- server VAD (``audio.input.turn_detection`` set, ``audio_input``): speech start →
  ``speech_started`` (and, if ``interrupt_response`` and not ``ignore_interrupt``, the active
  response is cancelled with ``turn_detected``); utterance end → ``speech_stopped``,
  ``committed``, the user item, its transcription if on, a response if ``create_response``
  (unless one is still active);
- echo mode answers every append with one ``response.output_audio.delta`` carrying the same
  base64 text, after a one-time preamble; nothing is decoded;
- dispatch mode (on top of echo, ``dispatch``): an append that starts with the marker is
  answered by a whole function-call response for ``dispatch_tool``, then a ``Stamp``; a
  ``response.create`` by an empty completed response at once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fakes.openai_realtime.audio import AudioFormat, decode_base64_audio, format_of
from fakes.openai_realtime.audio_input import InputAudio, SpeechStarted
from fakes.openai_realtime.config import (
    ResponseOverrides,
    default_session,
    merge_session_update,
    parse_response_overrides,
    tool_offer,
)
from fakes.openai_realtime.conversation import Conversation
from fakes.openai_realtime.dispatch import is_dispatch_audio
from fakes.openai_realtime.item_events import (
    ItemEdit,
    audio_committed,
    input_items,
    item_created,
    item_deleted,
    item_retrieved,
    item_truncated,
    output_audio_clear_refused,
    response_settings,
)
from fakes.openai_realtime.response import (
    CallsPlan,
    ResponseRun,
    ResponseSettings,
    RunContext,
    SpeechPlan,
)
from fakes.openai_realtime.routing import AnswerToolResults, Expire, decide, route
from fakes.openai_realtime.wire import (
    Action,
    Begin,
    ClientError,
    Close,
    Event,
    Halt,
    IdSource,
    Send,
    Stamp,
    Step,
    TokenMeter,
    invalid_type,
    invalid_value,
    missing_parameter,
)
from gateway.edges.realtime.client_wire import CLIENT_EVENT_TYPES
from transports.local.brain import FAIL_MESSAGE, Fail, LocalBrain, ToolCall

__all__ = ["CLIENT_EVENT_TYPES", "FakeOptions", "FakeSession", "expiry_message"]


@dataclass(frozen=True, slots=True)
class FakeOptions:
    api_key: str | None = None  # set: any other Bearer key → HTTP 401
    max_duration_s: float = 3600.0  # session expiry: error session_expired, then close 1001
    pace: float = 0.0  # audio pacing: 0 = as fast as possible, 1.0 = real time
    session_created: bool = True  # False: never send session.created (hang fault)
    created_delay_s: float = 0.0  # wait this long before session.created
    ignore_interrupt: bool = False  # server VAD never cancels the active response
    echo: bool = False  # benchmark mode: each append is answered with one audio delta
    log_frames: bool = True  # keep the per-connection frame log
    arg_fragment: int = 3  # function-call arguments stream in deltas of this many characters
    dispatch: bool = False  # benchmark mode (with echo): marked appends call ``dispatch_tool``
    dispatch_tool: str = "noop"

    def __post_init__(self) -> None:
        if self.max_duration_s <= 0:
            raise ValueError("max_duration_s must be > 0")
        if self.pace < 0 or self.created_delay_s < 0:
            raise ValueError("pace and created_delay_s must be >= 0")
        if self.arg_fragment < 1:
            raise ValueError("arg_fragment must be >= 1")
        if self.dispatch and not self.echo:
            raise ValueError("dispatch mode needs echo mode")


def expiry_message(max_duration_s: float) -> str:
    return f"Your session hit the maximum duration of {max_duration_s / 60:g} minutes."


class FakeSession:
    def __init__(
        self,
        options: FakeOptions | None = None,
        *,
        model: str = "gpt-realtime",
        number: int = 1,
        now_unix: float = 0.0,
        brain: LocalBrain | None = None,
        ids: IdSource | None = None,
    ) -> None:
        self.options = options or FakeOptions()
        # The server's ids are unique across its sessions (as OpenAI's are): a client that
        # reconnects must never see a response or item id of its previous session again.
        self.ids = ids or IdSource()
        self.brain = brain or LocalBrain()
        self.conversation = Conversation(self.ids)
        self.meter = TokenMeter()
        self.conversation_id = f"conv_{number}"
        self.config = default_session(
            session_id=f"sess_{number}",
            model=model,
            expires_at=int(now_unix + self.options.max_duration_s),
        )
        self.number = number
        self.closed = False
        self.audio_output_started = False
        self._active: ResponseRun | None = None
        self._answered_seq = 0
        self._input = InputAudio(self.input_format)
        self._speech_item_id: str | None = None  # the user item the current speech becomes
        self._echo: tuple[str, str] | None = None  # (response_id, item_id) of the echo preamble
        self._dispatched = 0  # tool calls made in dispatch mode
        self._brain_call_ids: dict[str, str] = {}  # wire call id → the brain's own id
        self._quick_settings: ResponseSettings | None = None  # dispatch mode's responses
        self._ctx = RunContext(
            event=self.event,
            ids=self.ids,
            conversation=self.conversation,
            meter=self.meter,
            arg_fragment=self.options.arg_fragment,
            on_audio_output=self._audio_output,
        )
        self._handlers = {
            "session.update": self._session_update,
            "input_audio_buffer.append": self._append,
            "input_audio_buffer.commit": self._commit,
            "input_audio_buffer.clear": self._clear,
            "conversation.item.create": lambda raw: item_created(
                raw, self.conversation, self.input_format, self.event
            ),
            "conversation.item.truncate": self._on_items(item_truncated),
            "conversation.item.delete": self._on_items(item_deleted),
            "conversation.item.retrieve": self._on_items(item_retrieved),
            "response.create": self._response_create,
            "response.cancel": self._response_cancel,
            "output_audio_buffer.clear": output_audio_clear_refused,
        }
        self._sync_vad()

    def _on_items(self, edit: ItemEdit) -> Callable[[dict[str, Any]], list[Action]]:
        return lambda raw: edit(raw, self.conversation, self.event)

    # State seen by tests ----------------------------------------------------------------------

    @property
    def items(self) -> list[dict[str, Any]]:
        return self.conversation.items

    @property
    def active_response_id(self) -> str | None:
        return self._active.response_id if self._active is not None else None

    @property
    def input_format(self) -> AudioFormat:
        return format_of(self.config["audio"]["input"]["format"])

    # Inputs -----------------------------------------------------------------------------------

    def event(self, type_: str, **fields: Any) -> Event:
        return {"type": type_, "event_id": self.ids.next("event"), **fields}

    def start(self) -> list[Action]:
        return [Send(self.event("session.created", session=copy.deepcopy(self.config)))]

    def handle(self, raw: Any) -> list[Action]:
        if self.closed:
            return []
        client_event_id = raw.get("event_id") if isinstance(raw, dict) else None
        if not isinstance(client_event_id, str):
            client_event_id = None
        try:
            if not isinstance(raw, dict):
                raise ClientError(
                    "invalid_type", "Invalid client event: expected a JSON object.", None
                )
            kind = raw.get("type")
            if kind is None:
                raise missing_parameter("type")
            handler = self._handlers.get(kind) if isinstance(kind, str) else None
            if handler is None:
                raise invalid_value("type", str(kind), CLIENT_EVENT_TYPES)
            return handler(raw)
        except ClientError as error:
            return [Send(self.event("error", error=error.payload(client_event_id)))]

    def invalid_frame(self, detail: str) -> list[Action]:
        """A frame that is not JSON: an error, and the session goes on."""
        if self.closed:
            return []
        error = ClientError("invalid_json", f"Invalid JSON in client event: {detail}")
        return [Send(self.event("error", error=error.payload(None)))]

    def next_step(self, response_id: str) -> Step | None:
        """The next piece of that response; ``None`` once it is over (or no longer active)."""
        run = self._active
        if self.closed or run is None or run.response_id != response_id:
            return None
        step = run.next_step()
        if step is None or run.finished:
            self._active = None
        if step is not None and any(isinstance(action, Close) for action in step.actions):
            self._shut(run)
        return step

    def expire(self) -> list[Action]:
        """The maximum duration is reached: ``session_expired``, then close 1001."""
        if self.closed:
            return []
        message = expiry_message(self.options.max_duration_s)
        actions = self._shut(self._active)
        error = ClientError("session_expired", message)
        return [
            *actions,
            Send(self.event("error", error=error.payload(None))),
            Close(1001, message),
        ]

    def reject_beta(self) -> list[Action]:
        """The client sent ``OpenAI-Beta``: the beta shape is gone; error, then close 4000."""
        error = ClientError(
            "beta_api_shape_disabled",
            "The Realtime API beta shape has been disabled. Remove the 'OpenAI-Beta: "
            "realtime=v1' header and use the GA interface.",
        )
        actions = self._shut(self._active)
        return [
            *actions,
            Send(self.event("error", error=error.payload(None))),
            Close(4000, "beta_api_shape_disabled"),
        ]

    def shut_down(self) -> list[Action]:
        """The socket is going away: stop everything, send nothing more."""
        return [] if self.closed else self._shut(self._active)

    def _shut(self, run: ResponseRun | None) -> list[Action]:
        self.closed = True
        self._active = None
        if run is None or run.finished:
            return []
        run.abandon()
        return [Halt(run.response_id)]

    def _audio_output(self) -> None:
        self.audio_output_started = True

    # Session ----------------------------------------------------------------------------------

    def _session_update(self, raw: dict[str, Any]) -> list[Action]:
        self.config = merge_session_update(
            self.config, raw.get("session"), voice_locked=self.audio_output_started
        )
        self._sync_vad()
        return [Send(self.event("session.updated", session=copy.deepcopy(self.config)))]

    def _sync_vad(self) -> None:
        turn_detection = self.config["audio"]["input"]["turn_detection"]
        self._input.configure(self.input_format, None if self.options.echo else turn_detection)
        if not self._input.speaking:
            self._speech_item_id = None

    # Input audio ------------------------------------------------------------------------------

    def _append(self, raw: dict[str, Any]) -> list[Action]:
        audio = raw.get("audio")
        if audio is None:
            raise missing_parameter("audio")
        if not isinstance(audio, str):
            raise invalid_type("audio", "a string", audio)
        if self.options.echo:
            if self.options.dispatch and is_dispatch_audio(audio):
                return self._dispatch()
            return self._echo_delta(audio)
        data = decode_base64_audio(audio)
        if data is None:
            raise ClientError(
                "invalid_value",
                "Invalid 'audio'. Expected base64-encoded audio bytes (mono PCM16 at 24kHz, "
                "or G.711 at 8kHz) but got a value that could not be decoded.",
                "audio",
            )
        actions: list[Action] = []
        for found in self._input.append(data):
            if self.closed:  # a response started by the VAD may have closed the session
                break
            if isinstance(found, SpeechStarted):
                actions += self._speech_started(found.audio_start_ms)
            else:
                item_id = self._speech_item_id or self.conversation.new_item_id()
                self._speech_item_id = None
                stopped = self.event(
                    "input_audio_buffer.speech_stopped",
                    audio_end_ms=found.audio_end_ms,
                    item_id=item_id,
                )
                actions.append(Send(stopped))
                actions += self._commit_audio(item_id, found.duration_ms, found.audio)
                wanted = self._turn_detection().get("create_response", True) is not False
                if wanted and self._active is None:  # no interrupt: the active one goes on
                    actions += self._start_response(ResponseOverrides())
        return actions

    def _turn_detection(self) -> dict[str, Any]:
        return self.config["audio"]["input"]["turn_detection"] or {}

    def _speech_started(self, audio_start_ms: int) -> list[Action]:
        item_id = self.conversation.new_item_id()
        self._speech_item_id = item_id
        started = self.event(
            "input_audio_buffer.speech_started", audio_start_ms=audio_start_ms, item_id=item_id
        )
        actions: list[Action] = [Send(started)]
        interrupt = self._turn_detection().get("interrupt_response", True) is not False
        if interrupt and not self.options.ignore_interrupt and self._active is not None:
            actions += self._cancel_active("turn_detected")
        return actions

    def _commit_audio(self, item_id: str, duration_ms: int, audio: bytes) -> list[Action]:
        transcribe = self.config["audio"]["input"].get("transcription") is not None
        return audio_committed(
            self.conversation, self.event, item_id, duration_ms, audio, transcribe=transcribe
        )

    def _commit(self, raw: dict[str, Any]) -> list[Action]:
        committed = self._input.commit()  # never starts a response
        item_id = self._speech_item_id or self.conversation.new_item_id()
        self._speech_item_id = None
        return self._commit_audio(item_id, committed.duration_ms, committed.audio)

    def _clear(self, raw: dict[str, Any]) -> list[Action]:
        self._input.clear()
        self._speech_item_id = None
        return [Send(self.event("input_audio_buffer.cleared"))]

    def _echo_delta(self, audio: str) -> list[Action]:
        actions: list[Action] = []
        if self._echo is None:
            actions = self._echo_preamble()
        assert self._echo is not None
        response_id, item_id = self._echo
        delta = {
            "type": "response.output_audio.delta",
            "event_id": self.ids.next("event"),
            "response_id": response_id,
            "item_id": item_id,
            "output_index": 0,
            "content_index": 0,
            "delta": audio,
        }
        actions.append(Send(delta))
        return actions

    def _echo_preamble(self) -> list[Action]:
        settings = self._settings(ResponseOverrides())
        run = ResponseRun(self._ctx, self.ids.next("resp"), settings, SpeechPlan(""))
        created = run.created()
        first = run.next_step()  # output_item.added, conversation.item.added, part added
        assert first is not None
        run.abandon()  # never finished: the echo response is not "active"
        self._echo = (run.response_id, run.outputs[0].id)
        self.audio_output_started = True
        return [Send(created), *first.actions]

    def _dispatch(self) -> list[Action]:
        """A whole function-call response for the dispatch tool, then the stamp of its end."""
        self._dispatched += 1
        call_id = f"call_{self.number}_{self._dispatched}"
        call = ToolCall(call_id, self.options.dispatch_tool, "{}")
        return [*self._whole_response(CallsPlan((call,))), Stamp(call_id)]

    def _whole_response(self, plan: CallsPlan) -> list[Action]:
        """Every event of a response at once: it is never active, so nothing can overlap it."""
        if self._quick_settings is None:  # the same for every such response of the session
            self._quick_settings = self._settings(ResponseOverrides())
        run = ResponseRun(self._ctx, self.ids.next("resp"), self._quick_settings, plan)
        actions: list[Action] = [Send(run.created())]
        while (step := run.next_step()) is not None:
            actions.extend(step.actions)
        self._answered_seq = self.conversation.seq
        return actions

    # Conversation -----------------------------------------------------------------------------

    # Responses --------------------------------------------------------------------------------

    def _response_create(self, raw: dict[str, Any]) -> list[Action]:
        if self._active is not None:
            raise ClientError(
                "conversation_already_has_active_response",
                "Conversation already has an active response in progress: "
                f"{self._active.response_id}. Wait until the response is finished before "
                "creating a new one.",
            )
        overrides = parse_response_overrides(raw.get("response"))
        if self.options.dispatch:  # the model says nothing after a tool result
            return self._whole_response(CallsPlan(()))
        return self._start_response(overrides)

    def _response_cancel(self, raw: dict[str, Any]) -> list[Action]:
        response_id = raw.get("response_id")
        active = self._active
        if active is None or (response_id is not None and response_id != active.response_id):
            raise ClientError(
                "response_cancel_not_active", "Cancellation failed: no active response found"
            )
        return self._cancel_active("client_cancelled")

    def _cancel_active(self, reason: str) -> list[Action]:
        run, self._active = self._active, None
        if run is None:
            return []
        actions: list[Action] = [Send(event) for event in run.cancel(reason)]
        return [*actions, Halt(run.response_id)]

    def _start_response(self, overrides: ResponseOverrides) -> list[Action]:
        if overrides.input is not None:
            new = input_items(overrides.input, self.conversation, self.input_format)
        else:
            new = self.conversation.since(self._answered_seq)
        if overrides.out_of_band and not new and overrides.instructions:
            # Nothing to answer but its instructions (a line said aside): the fake "follows"
            # them by saying them. The conversation's own progress is untouched.
            aside = SpeechPlan(overrides.instructions)
            run = ResponseRun(self._ctx, self.ids.next("resp"), self._settings(overrides), aside)
            self._active = run
            return [Send(run.created()), Begin(run.response_id)]
        if not overrides.out_of_band:
            self._answered_seq = self.conversation.seq
        answer = route(new, self.conversation)
        if isinstance(answer, AnswerToolResults):
            answer = AnswerToolResults(
                tuple(
                    # A call of another session (replayed) is none of this brain's calls.
                    (self._brain_call_ids.get(call_id, f"other:{call_id}"), name, envelope)
                    for call_id, name, envelope in answer.results
                )
            )
        plan = decide(answer, self.brain, tool_offer(self.config, overrides))
        if isinstance(plan, CallsPlan):
            plan = replace(plan, calls=tuple(self._on_wire(call) for call in plan.calls))
        if isinstance(plan, Expire):
            return self.expire()
        if isinstance(plan, Fail):
            return [*self._shut(None), Close(1011, FAIL_MESSAGE)]
        run = ResponseRun(self._ctx, self.ids.next("resp"), self._settings(overrides), plan)
        self._active = run
        return [Send(run.created()), Begin(run.response_id)]

    def _settings(self, overrides: ResponseOverrides) -> ResponseSettings:
        return response_settings(self.config, self.conversation, self.conversation_id, overrides)

    def _on_wire(self, call: ToolCall) -> ToolCall:
        """The brain's call under a server-wide id: the brain numbers its calls from
        ``call_1`` in every session, and OpenAI's call ids never repeat."""
        wire_id = self.ids.next("call")
        self._brain_call_ids[wire_id] = call.call_id
        return replace(call, call_id=wire_id)
