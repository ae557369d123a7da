"""The per-connection protocol state of the fake Gemini Live server, as pure code.

Inputs are parsed client messages (any mix of snake_case and camelCase names), "send goAway
now" and "close now"; outputs are ``Action``s (``wire``) for the async shell. Nothing here
awaits, sleeps or reads a clock, so every rule is testable without an event loop.

Theory of operation. One connection is in one phase at a time:

=================  ===========================================================================
phase              what moves it on
=================  ===========================================================================
AWAITING_SETUP     ``setup`` → IDLE (``setupComplete``), or SETUP_HANG when
                   ``setup_complete=False``; anything else → close 1007; a bad setup → 1007;
                   an unknown resumption handle → 1008 "Session not found"
SETUP_HANG         nothing: every message is ignored (noted)
IDLE               an input → GENERATING (speech, ``/hang``) or TOOLS_PENDING (tool calls)
GENERATING         the run ends → IDLE (``generationComplete``, ``turnComplete``); barge-in →
                   IDLE (``interrupted``, ``turnComplete``)
TOOLS_PENDING      every call id answered → GENERATING (the same turn goes on) or
                   TOOLS_PENDING again (the brain called more tools); barge-in → IDLE
                   (``interrupted``, ``toolCallCancellation``, ``turnComplete``)
CLOSED             terminal: a ``Close`` was emitted (a refused message, ``/drop``, a brain
                   failure, the end of a ``goAway``), or the socket went away
=================  ===========================================================================

A turn that ends (completed or interrupted) starts the newest input that waited for it.

- Inputs: ``clientContent`` turns go to the history and (with ``turnComplete``) the newest user
  text is answered; ``realtimeInput.text`` likewise; audio feeds the server VAD (``audio_input``),
  an utterance end sends ``inputTranscription`` (when enabled) and is answered. What answers is
  ``routing.decide`` (directives, then the session's ``LocalBrain``).
- Barge-in: any ``clientContent`` while busy interrupts; detected speech, ``activityStart`` and
  ``realtimeInput.text`` interrupt when ``interrupt_on_speech`` and the setup's
  ``activityHandling`` allow it, else the input waits until the turn is over (only the newest
  waiting input is answered).
- Resumption (``memory``): with ``sessionResumption`` on, a turn starts with
  ``sessionResumptionUpdate {"newHandle": "", "resumable": false}``, a ``toolCall`` is followed
  by another one (tools pending), and a turn's end (completed or interrupted) is followed by a
  fresh handle (``resumable: true``); a connection that resumed gets one right after
  ``setupComplete``. The brain and history live in the session's memory, so they survive.
- Tools (BLOCKING): one ``toolCall`` with every call of the brain's batch (ids
  ``function-call-<n>``, unique per session); the turn is held until every id is answered,
  possibly over several ``toolResponse`` messages. Responses for unknown, already answered or
  cancelled ids are ignored and noted in ``ignored`` (or close 1008 with ``strict_tool_ids``).
  ``scheduling`` / ``willContinue`` (NON_BLOCKING) are accepted and ignored: every call blocks.
- Echo mode: each audio input is answered at once by one ``modelTurn`` carrying the same base64
  text (split in ~960 kB pieces only if it would not fit a 1 MiB frame); no VAD, no brain.
"""

from __future__ import annotations

import enum
from typing import Any

from fakes.gemini_live import messages as to_client
from fakes.gemini_live.audio_input import AudioInput, InputEvent, SpeechStarted, pcm_rate
from fakes.gemini_live.memory import SessionMemory, SessionStore
from fakes.gemini_live.options import FakeGeminiOptions
from fakes.gemini_live.routing import (
    CallsPlan,
    FailPlan,
    GoAwayPlan,
    Input,
    NothingInput,
    Plan,
    TextInput,
    UtteranceInput,
    decide,
    decide_results,
)
from fakes.gemini_live.setup import SetupConfig, apply_context_update, parse_setup
from fakes.gemini_live.speech import SpeechPlan, SpeechRun
from fakes.gemini_live.tools import (
    Answer,
    ToolBatch,
    forget_calls,
    function_responses,
)
from fakes.gemini_live.wire import (
    GOING_AWAY,
    INVALID_ARGUMENT,
    NOT_FOUND,
    Action,
    Begin,
    Close,
    CloseAfter,
    Halt,
    Message,
    ProtocolError,
    Send,
    SendRaw,
    Step,
    client_message,
    decode_base64,
    expect_list,
    expect_object,
    fit_reason,
    is_base64_text,
)
from transports.local.brain import utterance_transcript

__all__ = [
    "ENTITY_NOT_FOUND",
    "GO_AWAY_REASON",
    "SESSION_NOT_FOUND",
    "FakeGeminiSession",
    "Phase",
]

GO_AWAY_REASON = "Connection lifetime reached (goAway)."
SESSION_NOT_FOUND = "Session not found"
ENTITY_NOT_FOUND = "Requested entity was not found"
_BASE64_FAILED = "Invalid value at 'realtime_input.audio.data' (TYPE_BYTES), Base64 decoding failed"


class Phase(enum.Enum):
    AWAITING_SETUP = "awaiting_setup"
    SETUP_HANG = "setup_hang"
    IDLE = "idle"
    GENERATING = "generating"
    TOOLS_PENDING = "tools_pending"
    CLOSED = "closed"


_BUSY = (Phase.GENERATING, Phase.TOOLS_PENDING)


def _invalid(reason: str) -> ProtocolError:
    return ProtocolError(INVALID_ARGUMENT, reason)


def _text_of(parts: list[Any]) -> str | None:
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "".join(texts) if texts else None


class FakeGeminiSession:
    def __init__(
        self, options: FakeGeminiOptions | None = None, store: SessionStore | None = None
    ) -> None:
        self.options = options or FakeGeminiOptions()
        self.store = store or SessionStore()
        self.phase = Phase.AWAITING_SETUP
        self.setup: Message = {}  # the normalised setup (camelCase), contextUpdates applied
        self.config: SetupConfig | None = None
        self.memory: SessionMemory | None = None
        self.resumed_from: str | None = None
        self.ignored: list[str] = []  # what was accepted and ignored, for tests to check
        self.tools: ToolBatch | None = None  # the calls the model waits for
        self._settled: set[str] = set()  # ids of batches answered in full on this connection
        self._input = AudioInput()
        self._run: SpeechRun | None = None
        self._generation = 0
        self._queued: Input | None = None
        self._user_text: str | None = None  # newest user text of clientContent, unanswered
        self._prompt_tokens = (0, 0)  # (text, audio) at the start of the turn
        self._response_tokens = 0

    # State seen by tests and the shell ------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.phase is Phase.CLOSED

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.memory.history if self.memory is not None else []

    @property
    def generation(self) -> int:
        """The generation being delivered (``Begin``'s number), 0 before the first."""
        return self._generation

    def _brain_memory(self) -> SessionMemory:
        assert self.memory is not None, "no session before setup"
        return self.memory

    def _config(self) -> SetupConfig:
        assert self.config is not None, "no config before setup"
        return self.config

    @property
    def _speech_interrupts(self) -> bool:
        return self.options.interrupt_on_speech and self._config().interrupts

    # Inputs ---------------------------------------------------------------------------------

    def handle(self, raw: Any) -> list[Action]:
        """One parsed client message (JSON value) → actions."""
        if self.phase is Phase.CLOSED:
            return []
        try:
            return self._dispatch(raw)
        except ProtocolError as error:
            return self.close(error.code, error.reason)

    def invalid_frame(self, detail: str) -> list[Action]:
        """A frame that is not JSON: the service closes with 1007."""
        return self.close(INVALID_ARGUMENT, f"Invalid JSON payload received. {detail}")

    def next_step(self, generation: int) -> Step | None:
        """The next piece of that generation; ``None`` once it is over (or was halted)."""
        run = self._run
        if self.phase is not Phase.GENERATING or generation != self._generation or run is None:
            return None
        step = run.next_step()
        if step is None:
            return Step(tuple(self._finish_turn(run)))
        if any(isinstance(action, Close) for action in step.actions):
            self._shut()
        return step

    def go_away(self, time_left_s: float) -> list[Action]:
        """``goAway`` now (once ``setupComplete`` was sent), then close 1001 after the time."""
        if self.phase is Phase.CLOSED:
            return []
        actions: list[Action] = []
        if self.phase not in (Phase.AWAITING_SETUP, Phase.SETUP_HANG):
            actions.append(Send(to_client.go_away(time_left_s)))
        actions.append(CloseAfter(max(0.0, time_left_s), GOING_AWAY, GO_AWAY_REASON))
        return actions

    def close(self, code: int, reason: str) -> list[Action]:
        """Close now (an error, a fault, the end of a goAway, the server stopping)."""
        if self.phase is Phase.CLOSED:
            return []
        return [*self._shut(), Close(code, fit_reason(reason))]

    def shut_down(self) -> list[Action]:
        """The socket is gone: stop everything, send nothing more."""
        return self._shut()

    def _shut(self) -> list[Action]:
        actions: list[Action] = []
        if self._run is not None:
            self._run.halt()
            self._run = None
            actions.append(Halt(self._generation))
        self.phase = Phase.CLOSED
        return actions

    # Dispatch -------------------------------------------------------------------------------

    def _dispatch(self, raw: Any) -> list[Action]:
        key, body = client_message(raw)
        if self.phase is Phase.AWAITING_SETUP:
            if key != "setup":
                raise _invalid(f"The first message must be setup, got {key}.")
            return self._setup(body)
        if self.phase is Phase.SETUP_HANG:
            self.ignored.append(f"{key} before setupComplete")
            return []
        if key == "setup":
            raise _invalid("setup must be the first message, and only the first.")
        if key == "clientContent":
            return self._client_content(expect_object(body, "clientContent"))
        if key == "realtimeInput":
            return self._realtime_input(expect_object(body, "realtimeInput"))
        if key == "toolResponse":
            return self._tool_response(expect_object(body, "toolResponse"))
        self.setup = apply_context_update(self.setup, body)
        return []

    def _setup(self, body: Any) -> list[Action]:
        config = parse_setup(body)
        if config.handle is not None:
            memory = self.store.restore(config.handle)
            if memory is None:
                raise ProtocolError(NOT_FOUND, SESSION_NOT_FOUND)
        else:
            memory = self.store.new_session()
        self.setup, self.config, self.memory = dict(body), config, memory
        self.resumed_from = config.handle
        self._input = AudioInput(
            automatic=config.automatic_activity, silence_duration_ms=config.silence_duration_ms
        )
        if not self.options.setup_complete:
            self.phase = Phase.SETUP_HANG
            return []
        self.phase = Phase.IDLE
        actions: list[Action] = [Send(to_client.setup_complete())]
        if config.resumption and config.handle is not None:
            actions.append(
                Send(to_client.resumption_update(self.store.issue(memory), resumable=True))
            )
        return actions

    # Client content and text ------------------------------------------------------------------

    def _client_content(self, body: dict[str, Any]) -> list[Action]:
        turns = [
            expect_object(turn, f"clientContent.turns[{index}]")
            for index, turn in enumerate(expect_list(body.get("turns"), "clientContent.turns"))
        ]
        actions = self._interrupt() if self.phase in _BUSY else []  # always, as documented
        for turn in turns:
            parts = expect_list(turn.get("parts"), "clientContent.turns.parts")
            role = turn.get("role") or "user"
            self._brain_memory().history.append({"role": role, "parts": parts})
            text = _text_of(parts)
            if role == "user" and text is not None:
                self._user_text = text
        if body.get("turnComplete") is True:
            text, self._user_text = self._user_text, None
            given: Input = TextInput(text) if text is not None else NothingInput()
            actions += self._answer(given, interrupt=True)
        return actions

    def _realtime_input(self, body: dict[str, Any]) -> list[Action]:
        if len(body) != 1:
            raise _invalid(
                "Invalid JSON payload received. realtimeInput has exactly one field, "
                f"got {sorted(body)}."
            )
        ((key, value),) = body.items()
        if key == "audio":
            return self._audio(expect_object(value, "realtimeInput.audio"))
        if key == "mediaChunks":
            chunks = expect_list(value, "realtimeInput.mediaChunks")
            if chunks and pcm_rate(expect_object(chunks[0], "mediaChunks[0]").get("mimeType")):
                return self._audio(chunks[0])  # only the first chunk is used, as the API says
            self.ignored.append("realtimeInput.mediaChunks without audio")
            return []
        if key == "video":
            self.ignored.append("realtimeInput.video")
            return []
        if key == "text":
            if not isinstance(value, str):
                raise _invalid("Invalid value at 'realtime_input.text' (TYPE_STRING).")
            return self._answer(TextInput(value), interrupt=self._speech_interrupts, heard=value)
        if key in ("activityStart", "activityEnd"):
            return self._activity(key)
        if key == "audioStreamEnd":
            if value is True and self._input.automatic:
                return self._heard(self._input.stream_end())
            return []
        raise _invalid(f'Invalid JSON payload received. Unknown name "{key}" at realtimeInput.')

    # Audio ----------------------------------------------------------------------------------

    def _audio(self, blob: dict[str, Any]) -> list[Action]:
        data = blob.get("data")
        if self.options.echo:
            if not isinstance(data, str) or not is_base64_text(data):
                raise _invalid(_BASE64_FAILED)
            return [SendRaw(frame) for frame in to_client.echo_frames(data)]
        rate = pcm_rate(blob.get("mimeType"))
        pcm = decode_base64(data)
        if pcm is None:
            raise _invalid(_BASE64_FAILED)
        if rate is None:
            self.ignored.append(f"audio of type {blob.get('mimeType')!r}")
            return []
        memory = self._brain_memory()
        memory.input_audio_ms += round(len(pcm) // 2 * 1000 / rate)
        return self._heard(self._input.feed(pcm, rate))

    def _heard(self, events: list[InputEvent]) -> list[Action]:
        actions: list[Action] = []
        for event in events:
            if self.phase is Phase.CLOSED:
                break
            if isinstance(event, SpeechStarted):
                if self.phase in _BUSY and self._speech_interrupts:
                    actions += self._interrupt()
            else:
                actions += self._utterance(event.duration_ms)
        return actions

    def _activity(self, key: str) -> list[Action]:
        if self._input.automatic:
            if self.options.reject_manual_activity:
                raise _invalid(
                    f"{key} is only allowed when automatic activity detection is disabled."
                )
            self.ignored.append(f"{key} with automatic activity detection on")
            return []
        if key == "activityStart":
            self._input.activity_start()
            return self._heard([SpeechStarted()])
        ended = self._input.activity_end()
        if ended is None:
            self.ignored.append("activityEnd without activityStart")
            return []
        return self._heard([ended])

    def _utterance(self, duration_ms: int) -> list[Action]:
        transcript = utterance_transcript(duration_ms)
        actions: list[Action] = []
        if self._config().input_transcription:
            actions.append(Send(to_client.input_transcription(transcript)))
        return actions + self._answer(
            UtteranceInput(duration_ms), interrupt=self._speech_interrupts, heard=transcript
        )

    # Tools ----------------------------------------------------------------------------------

    def _tool_response(self, body: dict[str, Any]) -> list[Action]:
        parts: list[dict[str, Any]] = []
        for response in function_responses(body):
            call_id, payload = response.get("id"), response.get("response", {})
            answer, call = (
                self.tools.answer(call_id, payload) if self.tools else (Answer.UNKNOWN, None)
            )
            if answer is not Answer.ACCEPTED:
                if self.options.strict_tool_ids:
                    raise ProtocolError(NOT_FOUND, ENTITY_NOT_FOUND)
                if call_id in self._settled:
                    answer = Answer.REPEATED
                self.ignored.append(f"toolResponse for {answer.value} id {call_id!r}")
                continue
            assert call is not None
            parts.append({"functionResponse": {**response, "id": call.id, "name": call.name}})
        if parts:
            self._brain_memory().history.append({"role": "user", "parts": parts})
        if self.tools is None or not self.tools.complete:
            return []
        self._settled.update(self.tools.ids)
        results, self.tools = self.tools.results(), None
        return self._run_plan(decide_results(results, self._brain_memory().brain))

    def _call_tools(self, plan: CallsPlan) -> list[Action]:
        memory = self._brain_memory()
        self.tools = ToolBatch(memory.counters, plan.calls)
        wire = self.tools.wire()
        memory.history.append(
            {"role": "model", "parts": [{"functionCall": dict(call)} for call in wire]}
        )
        copies = 2 if self.options.duplicate_tool_calls else 1
        actions: list[Action] = [Send(to_client.tool_call(wire)) for _ in range(copies)]
        if self._config().resumption:
            actions.append(Send(to_client.resumption_update("", resumable=False)))
        self.phase = Phase.TOOLS_PENDING
        return actions

    # Turns ----------------------------------------------------------------------------------

    def _answer(self, given: Input, *, interrupt: bool, heard: str | None = None) -> list[Action]:
        """Answer an input now, interrupting a busy turn, or once the turn is over. ``heard``
        is the user's text (or transcript) for the history, written after any interruption."""
        actions: list[Action] = []
        if self.phase in _BUSY and interrupt:
            actions += self._interrupt()
        if heard is not None:
            self._brain_memory().history.append({"role": "user", "parts": [{"text": heard}]})
        if self.phase in _BUSY:
            self._queued = given  # answered when the current turn is over
            return actions
        return actions + self._start_turn(given)

    def _start_turn(self, given: Input) -> list[Action]:
        memory = self._brain_memory()
        audio = memory.input_audio_ms * to_client.AUDIO_TOKENS_PER_S // 1000
        self._prompt_tokens = (to_client.history_text_tokens(memory.history), audio)
        self._response_tokens = 0
        plan = decide(given, memory.brain)
        actions: list[Action] = []
        if self._config().resumption and not isinstance(plan, FailPlan):
            actions.append(Send(to_client.resumption_update("", resumable=False)))
        return actions + self._run_plan(plan)

    def _run_plan(self, plan: Plan) -> list[Action]:
        if isinstance(plan, FailPlan):
            return self.close(plan.code, plan.reason)
        if isinstance(plan, GoAwayPlan):
            return self.go_away(plan.time_left_s) + self._run_plan(SpeechPlan(plan.then_say))
        if isinstance(plan, CallsPlan):
            return self._call_tools(plan)
        config = self._config()
        self._generation += 1
        self._run = SpeechRun(
            plan, modality=config.modality, output_transcription=config.output_transcription
        )
        self.phase = Phase.GENERATING
        return [Begin(self._generation)]

    def _usage(self) -> Message:
        text, audio = self._prompt_tokens
        return to_client.usage_metadata(
            prompt_text=text,
            prompt_audio=audio,
            response=self._response_tokens,
            response_modality=self._config().modality,
        )

    def _keep_output(self, run: SpeechRun) -> None:
        self._response_tokens += run.response_tokens
        if run.spoken:
            self._brain_memory().history.append({"role": "model", "parts": [{"text": run.spoken}]})

    def _turn_over(self) -> list[Action]:
        """The turn ended (completed or interrupted): a fresh handle when resumption is on."""
        self.phase = Phase.IDLE
        if not self._config().resumption:
            return []
        handle = self.store.issue(self._brain_memory())
        return [Send(to_client.resumption_update(handle, resumable=True))]

    def _finish_turn(self, run: SpeechRun) -> list[Action]:
        self._run = None
        self._keep_output(run)
        actions: list[Action] = [
            Send(to_client.generation_complete()),
            Send(to_client.turn_complete(self._usage())),
            *self._turn_over(),
        ]
        if self._queued is not None:
            given, self._queued = self._queued, None
            actions += self._start_turn(given)
        return actions

    def _interrupt(self) -> list[Action]:
        actions: list[Action] = []
        run = self._run
        if run is not None:
            run.halt()
            self._run = None
            self._keep_output(run)
            actions.append(Halt(self._generation))
        actions.append(Send(to_client.interrupted()))
        cancelled = self.tools.unanswered if self.tools is not None else []
        if cancelled:
            actions.append(Send(to_client.tool_call_cancellation(cancelled)))
            forget_calls(self._brain_memory().history, set(cancelled))
        self.tools = None
        self._queued = None
        actions.append(Send(to_client.turn_complete(self._usage())))
        return actions + self._turn_over()
