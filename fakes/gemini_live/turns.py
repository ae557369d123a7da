"""The turns of one connection of the fake Gemini Live server: speech, tool calls, answers. Pure.

``TurnEngine`` is the base of ``FakeGeminiSession`` (``session``): the session parses client
messages and hands inputs over (``_answer``, ``_interrupt``, ``_tool_response``); the engine
starts, delivers, completes and interrupts turns, and carries out tool calls (``tools``).

Turns. A turn starts with ``sessionResumptionUpdate {"newHandle": "", "resumable": false}``
(when resumption is on), runs a ``Plan`` (``routing``) and ends with ``generationComplete`` +
``turnComplete`` (with ``usageMetadata``), or, when cut, ``interrupted`` (+
``toolCallCancellation``) + ``turnComplete``. Then comes a fresh handle (``resumable: true``), or,
while NON_BLOCKING calls are open, ``{"newHandle": "", "resumable": false}`` again. Then what
waited for the turn to end starts (``_next_turn``): the NON_BLOCKING results due, all in one
turn, else the newest user input that waited (``NO_INTERRUPTION``).

BLOCKING calls (declared without ``behavior``, or ``BLOCKING`` / ``UNSPECIFIED``): one
``toolCall`` carries every call of the brain's batch (ids ``function-call-<n>``, unique per
session), followed by the "not resumable" update; the turn is held (TOOLS_PENDING) until every
BLOCKING id is answered, possibly over several ``toolResponse`` messages; then the same turn goes
on with the reply. ``scheduling`` and ``willContinue: true`` on a BLOCKING call's response are
accepted and ignored (noted in ``ignored``). A barge-in cancels the unanswered BLOCKING ids
(``interrupted``, ``toolCallCancellation``, ``turnComplete``).

NON_BLOCKING calls (``"behavior": "NON_BLOCKING"``), following the Live API's tool guide
(https://ai.google.dev/gemini-api/docs/live-api/tools):

- the model does not wait: after ``toolCall`` (and the "not resumable" update) the same turn
  goes on with ``routing.acknowledgement`` ("I've started NAME; I'll tell you when it's
  done.", spoken or written as any speech), then ``generationComplete`` + ``turnComplete``. A
  toolCall mixing both kinds waits for its BLOCKING calls only; the reply to them is followed
  by the acknowledgement, in one speech;
- the call stays open (``ToolLedger.open``) until a response without ``willContinue`` (or with
  ``false``); ``willContinue: true`` sends a partial result, handled like any other;
- every response goes into the history (context) as a ``functionResponse`` part, as sent; then,
  by ``scheduling`` (none or ``SCHEDULING_UNSPECIFIED`` = ``WHEN_IDLE``):
  ``SILENT``: nothing more (the result is only in the context); ``WHEN_IDLE``: answered in a
  new turn once the current turn is over (at once when idle); ``INTERRUPT``: a generation that
  was running when the message came is cut (``interrupted`` + ``turnComplete``, as a barge-in,
  but no call is cancelled and a waiting user input is kept), and the result is answered at
  once in a new turn; while idle, at once; while a turn waits for BLOCKING calls, there is no
  generation to cut: it is answered once that turn is over, like ``WHEN_IDLE``. Results that
  wait are answered together, in one turn, in the order they came (``routing.decide_late``);
- a barge-in never cancels a NON_BLOCKING call (``toolCallCancellation`` is for BLOCKING calls
  only) nor drops the results due: they are answered after the turn that answers the user;
- ``sessionResumptionUpdate``: the API reference (https://ai.google.dev/api/live) says ``resumable``
  is false while tools execute, so no handle is issued while a NON_BLOCKING call is open (turn ends
  send ``resumable: false``); when the last one is finished while the model is idle (a ``SILENT``
  final result), a fresh handle comes at once; else at the end of the turn that answers it.

Responses for unknown, cancelled or finished ids are ignored and noted in ``ignored`` (or close
1008 "Requested entity was not found" with ``strict_tool_ids``); they never make the model speak.
"""

from __future__ import annotations

import enum
from typing import Any

from fakes.gemini_live import messages as to_client
from fakes.gemini_live.memory import SessionMemory, SessionStore
from fakes.gemini_live.options import FakeGeminiOptions
from fakes.gemini_live.routing import (
    CallsPlan,
    FailPlan,
    GoAwayPlan,
    Input,
    Plan,
    ResultsInput,
    acknowledgement,
    decide,
    decide_results,
)
from fakes.gemini_live.setup import SetupConfig
from fakes.gemini_live.speech import SpeechPlan, SpeechRun
from fakes.gemini_live.tools import (
    Answer,
    FunctionResponse,
    PendingCall,
    ToolBatch,
    ToolLedger,
    forget_calls,
    function_responses,
    issue_calls,
)
from fakes.gemini_live.wire import (
    GOING_AWAY,
    NOT_FOUND,
    Action,
    Begin,
    Close,
    CloseAfter,
    Halt,
    Message,
    ProtocolError,
    Send,
    Step,
    fit_reason,
)
from transports.local.brain import ToolResultTuple

__all__ = ["BUSY", "ENTITY_NOT_FOUND", "GO_AWAY_REASON", "Phase", "TurnEngine"]

GO_AWAY_REASON = "Connection lifetime reached (goAway)."
ENTITY_NOT_FOUND = "Requested entity was not found"


class Phase(enum.Enum):
    AWAITING_SETUP = "awaiting_setup"
    SETUP_HANG = "setup_hang"
    IDLE = "idle"
    GENERATING = "generating"
    TOOLS_PENDING = "tools_pending"
    CLOSED = "closed"


BUSY = (Phase.GENERATING, Phase.TOOLS_PENDING)


class TurnEngine:
    def __init__(
        self, options: FakeGeminiOptions | None = None, store: SessionStore | None = None
    ) -> None:
        self.options = options or FakeGeminiOptions()
        self.store = store or SessionStore()
        self.phase = Phase.AWAITING_SETUP
        self.setup: Message = {}  # the normalised setup (camelCase), contextUpdates applied
        self.config: SetupConfig | None = None
        self.memory: SessionMemory | None = None
        self.ignored: list[str] = []  # what was accepted and ignored, for tests to check
        self.calls = ToolLedger()  # every call of this connection
        self.due: list[ToolResultTuple] = []  # NON_BLOCKING results waiting for a turn
        self._run: SpeechRun | None = None
        self._generation = 0
        self._queued: Input | None = None
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

    @property
    def tools(self) -> ToolBatch | None:
        """The BLOCKING calls the turn waits for."""
        return self.calls.batch

    @property
    def open_calls(self) -> dict[str, PendingCall]:
        """The NON_BLOCKING calls still open (no final response yet), by id."""
        return self.calls.open

    def _brain_memory(self) -> SessionMemory:
        assert self.memory is not None, "no session before setup"
        return self.memory

    def _config(self) -> SetupConfig:
        assert self.config is not None, "no config before setup"
        return self.config

    # Delivery, goAway, closes ---------------------------------------------------------------

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

    # Turns ----------------------------------------------------------------------------------

    def _answer(self, given: Input, *, interrupt: bool, heard: str | None = None) -> list[Action]:
        """Answer an input now, interrupting a busy turn, or once the turn is over. ``heard``
        is the user's text (or transcript) for the history, written after any interruption."""
        actions: list[Action] = []
        if self.phase in BUSY and interrupt:
            actions += self._interrupt()
        if heard is not None:
            self._brain_memory().history.append({"role": "user", "parts": [{"text": heard}]})
        if self.phase in BUSY:
            self._queued = given  # answered when the current turn is over
            return actions
        return actions + self._start_turn(given)

    def _start_turn(self, given: Input) -> list[Action]:
        memory = self._brain_memory()
        audio = memory.input_audio_ms * to_client.AUDIO_TOKENS_PER_S // 1000
        self._prompt_tokens = (to_client.history_text_tokens(memory.history), audio)
        self._response_tokens = 0
        plan = decide(given, memory.brain, self._config().function_names)
        actions: list[Action] = []
        if self._config().resumption and not isinstance(plan, FailPlan):
            actions.append(Send(to_client.resumption_update("", resumable=False)))
        return actions + self._run_plan(plan)

    def _next_turn(self) -> list[Action]:
        """What waited for the turn to end: the results due (one turn for all), else the
        newest input that waited."""
        if self.due:
            results, self.due = tuple(self.due), []
            return self._start_turn(ResultsInput(results))
        if self._queued is not None:
            given, self._queued = self._queued, None
            return self._start_turn(given)
        return []

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

    def _resumption_state(self) -> list[Action]:
        """A fresh handle when resumption is on, or "not resumable" while calls run."""
        if not self._config().resumption:
            return []
        if self.calls.open:
            return [Send(to_client.resumption_update("", resumable=False))]
        handle = self.store.issue(self._brain_memory())
        return [Send(to_client.resumption_update(handle, resumable=True))]

    def _finish_turn(self, run: SpeechRun) -> list[Action]:
        self._run = None
        self._keep_output(run)
        self.phase = Phase.IDLE
        return [
            Send(to_client.generation_complete()),
            Send(to_client.turn_complete(self._usage())),
            *self._resumption_state(),
            *self._next_turn(),
        ]

    def _interrupt(self, *, keep_waiting_input: bool = False) -> list[Action]:
        """Cut the turn: halt the generation, cancel the unanswered BLOCKING calls."""
        actions: list[Action] = []
        run = self._run
        if run is not None:
            run.halt()
            self._run = None
            self._keep_output(run)
            actions.append(Halt(self._generation))
        actions.append(Send(to_client.interrupted()))
        cancelled = self.calls.cancel()
        if cancelled:
            actions.append(Send(to_client.tool_call_cancellation(cancelled)))
            forget_calls(self._brain_memory().history, set(cancelled))
        if not keep_waiting_input:
            self._queued = None
        actions.append(Send(to_client.turn_complete(self._usage())))
        self.phase = Phase.IDLE
        return actions + self._resumption_state()

    # Tools ----------------------------------------------------------------------------------

    def _call_tools(self, plan: CallsPlan) -> list[Action]:
        memory = self._brain_memory()
        calls = issue_calls(memory.counters, plan.calls, self._config().non_blocking)
        self.calls.call(calls)
        wire = [call.wire() for call in calls]
        memory.history.append({"role": "model", "parts": [{"functionCall": c} for c in wire]})
        copies = 2 if self.options.duplicate_tool_calls else 1
        actions: list[Action] = [Send(to_client.tool_call(wire)) for _ in range(copies)]
        if self._config().resumption:
            actions.append(Send(to_client.resumption_update("", resumable=False)))
        if self.calls.batch is not None:
            self.phase = Phase.TOOLS_PENDING
            return actions
        speech = SpeechPlan(acknowledgement([call.name for call in calls]))
        return actions + self._run_plan(speech)

    def _tool_response(self, body: dict[str, Any]) -> list[Action]:
        was_generating, was_open = self.phase is Phase.GENERATING, bool(self.calls.open)
        parts: list[dict[str, Any]] = []
        due: list[ToolResultTuple] = []
        interrupt = False
        for response in function_responses(body):
            answer, call = self.calls.take(response)
            if answer is not Answer.ACCEPTED:
                if self.options.strict_tool_ids:
                    raise ProtocolError(NOT_FOUND, ENTITY_NOT_FOUND)
                self.ignored.append(f"toolResponse for {answer.value} id {response.id!r}")
                continue
            assert call is not None
            named = {**response.fields, "id": call.id, "name": call.name}
            parts.append({"functionResponse": named})
            if call.blocking:
                self._note_blocking_extras(call, response)
                continue
            scheduling = response.effective_scheduling
            if scheduling != "SILENT":
                due.append(call.result(response.response))
                interrupt |= scheduling == "INTERRUPT"
        actions: list[Action] = []
        if interrupt and was_generating:  # cut first: what was said precedes the result
            actions += self._interrupt(keep_waiting_input=True)
        if parts:
            self._brain_memory().history.append({"role": "user", "parts": parts})
        batch = self.calls.done()
        if batch is not None:
            started = [call.name for call in batch.started]
            brain = self._brain_memory().brain
            actions += self._run_plan(decide_results(batch.results(), brain, started))
        self.due += due
        if self.phase is Phase.IDLE:
            started_turn = self._next_turn()
            if not started_turn and was_open and not self.calls.open:
                return actions + self._resumption_state()  # the last call finished, silently
            actions += started_turn
        return actions

    def _note_blocking_extras(self, call: PendingCall, response: FunctionResponse) -> None:
        if response.scheduling is not None:
            self.ignored.append(f"scheduling {response.scheduling} of BLOCKING call {call.id!r}")
        if response.will_continue:
            self.ignored.append(f"willContinue of BLOCKING call {call.id!r}")
