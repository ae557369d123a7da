"""Gemini Live as a pure state machine: server messages ⇄ neutral events, inputs → frames.

Theory of operation. ``GeminiCodec`` holds one conversation across connections. ``receive``
turns one server message (already JSON-decoded) into neutral events; the session's inputs go in
through methods and come out as client frames in ``outbox`` (and, for a local cancel, as events
in ``events``). No I/O, no clock.

- A response starts at the first model output of a turn (audio, text, transcript or a tool call)
  and ends at ``turnComplete``, or at a ``toolCall``: the calls are one batch, reported with the
  response's end, and the answer after the tool results is a new response. The user's
  transcription is unordered with the model's output, so it is closed (``TranscriptDone``) at
  the turn's end, or before a tool call runs.
- Tool calls are deduplicated by id (the server may deliver one twice). A ``toolResponse`` answers
  every id of a batch; ids cancelled or issued on an earlier connection never get an answer.
  Non-blocking calls (``calls``) are answered when ready, with their scheduling.
- ``interrupted`` is a barge-in: ``SpeechStarted``, nothing more of that turn is forwarded, and the
  response ends ``interrupted``. A client cancel ends the response at once (Gemini has no cancel
  event): the rest of that turn is dropped when it arrives.
- A ``clientContent`` cuts the server's turn in progress and cancels the BLOCKING calls it waits
  for: what the gateway adds on its own (late results, context) waits until the turn is over
  (``turn_gate``).
- Continuity: the last resumable handle is kept. ``connection_lost`` ends the response in flight
  and orphans the pending calls; ``resume`` returns what a new connection needs (the history as
  context when the session could not be resumed, a user text the model had not answered yet:
  asked again, or, if it led to tool calls, given as context with their results; and the uplink
  audio buffered while offline).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from transports import events as ev
from transports.base import Delivery, Mode, ToolResult, UpstreamConfig
from transports.gemini_live import wire
from transports.gemini_live.calls import SCHEDULING, CallBook
from transports.gemini_live.renewal import (
    ORPHANS_PREFIX,
    orphaned_results_text,
    question_again,
    result_text,
)
from transports.gemini_live.turn_gate import TurnGate
from transports.gemini_live.uplink import Uplink
from transports.gemini_live.usage import add_usage

__all__ = ["GeminiCodec"]

HISTORY_TURNS = 40


@dataclass(slots=True)
class _Response:
    response_id: str
    transcript: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    interrupted: bool = False  # barge-in: dropped until the turn completes
    closed: bool = False  # the session already has its ResponseDone (cancel, tool batch)


class GeminiCodec:
    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self.mode: Mode = config.mode
        self.instructions = config.instructions
        self.outbox: deque[str] = deque()
        self.events: list[ev.UpstreamEvent] = []  # produced by inputs (a local cancel)
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.connected = False
        self.handle: str | None = None  # the last resumable session handle
        self.go_away_s: float | None = None  # set by goAway: the shell reconnects in time
        self.completed_turns = 0
        self.history: deque[tuple[str, str]] = deque(maxlen=HISTORY_TURNS)  # (role, text)
        for item in config.history:
            # Tool activity is the model's own: its calls and what they returned, as it would
            # recount them (Live's client turns carry text; the calls are over).
            self.history.append(("user" if item.role == "user" else "model", item.text))
        self._responses = 0
        self._active: _Response | None = None
        self._dropping = False  # the rest of a cancelled turn is on its way: drop it
        self._user_words: list[str] = []
        # The user's question the model has not answered yet (sent on this connection), and the
        # results of tools it already led to (with their history items): after a reconnect the
        # model gets both again, once.
        self._unanswered_text: str | None = None
        self._answered_results: list[tuple[str, tuple[str, str]]] = []
        self._question_called_tools = False
        self._queued: list[str] = []  # frames that wait for the next connection
        self._offline_texts: list[str] = []  # typed while offline, in _queued
        self._gate = TurnGate()  # our own turns and context wait for the server's turn to end
        self._handle_stale = False  # a turn ran since the last resumable handle
        self.calls = CallBook(config.tools)
        self._sessions = 0  # Gemini sessions begun (connections that did not resume one)
        self._usage: dict[str, Any] | None = None
        self._uplink = Uplink()

    # -- state the shell reads -----------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """No reply in progress, no tool call pending, the user not mid-utterance and the handle
        up to date: a good moment to reconnect."""
        return (
            self._active is None
            and not self.calls.pending
            and not self._dropping
            and not self._user_words
            and not self._handle_stale
        )

    @property
    def _busy(self) -> bool:
        """The server is in a turn: a clientContent now would cut it (and cancel its calls)."""
        return (
            self._active is not None
            or self._dropping
            or bool(self.calls.pending)
            or self._gate.reply_due
        )

    def live_config(self, *, resume: bool) -> Any:
        """The ``LiveConnectConfig`` for a new connection (resuming with the handle, or not)."""
        return wire.live_config(
            mode=self.mode,
            instructions=self.instructions,
            tools=self.config.tools,
            handle=self.handle if resume else None,
            voice=self.config.voice,
            language=self.config.locale,
            manual_turns=self.config.turn_detection.manual,
            tool_choice=self.config.tool_choice,
        )

    # -- server → session ----------------------------------------------------------------------

    def receive(self, message: Mapping[str, Any]) -> list[ev.UpstreamEvent]:
        out: list[ev.UpstreamEvent] = []
        known = False
        usage = message.get("usageMetadata")
        if isinstance(usage, dict):
            self._usage = add_usage(self._usage, usage)  # per generation: summed (``usage``)
            known = True
        content = message.get("serverContent")
        if isinstance(content, Mapping):
            self._server_content(content, out)
            known = True
        call = message.get("toolCall")
        if isinstance(call, Mapping):
            self._tool_call(call, out)
            known = True
        cancellation = message.get("toolCallCancellation")
        if isinstance(cancellation, Mapping):
            self._cancellation(cancellation, out)
            known = True
        go_away = message.get("goAway")
        if isinstance(go_away, Mapping):
            self.go_away_s = wire.duration_s(go_away.get("timeLeft"))
            if self.go_away_s is None:
                self.go_away_s = 0.0
            known = True
        update = message.get("sessionResumptionUpdate")
        if isinstance(update, Mapping):
            handle = update.get("newHandle")
            if update.get("resumable") and isinstance(handle, str) and handle:
                self.handle = handle
                self._handle_stale = False
                self._uplink.saved()
            known = True
        if "setupComplete" in message:
            known = True
        if not known:
            out.append(ev.Unknown(dict(message)))
        return out

    def _start(self, out: list[ev.UpstreamEvent]) -> _Response | None:
        """The open response, starting one at the first model output of a turn."""
        if self._dropping:
            return None
        if self._active is None:
            self._responses += 1
            self._handle_stale = True
            self._active = _Response(f"gemini_resp_{self._responses}")
            out.append(ev.ResponseStarted(self._active.response_id))
        return None if self._active.interrupted else self._active

    def _user_said(self, out: list[ev.UpstreamEvent]) -> None:
        if self._user_words:
            text = "".join(self._user_words).strip()
            self._user_words.clear()
            out.append(ev.TranscriptDone("user", text))
            out.append(ev.UserInputTranscribed(text))
            self.history.append(("user", text))

    def _server_content(self, content: Mapping[str, Any], out: list[ev.UpstreamEvent]) -> None:
        turn = content.get("modelTurn")
        if isinstance(turn, Mapping):
            for part in turn.get("parts") or ():
                if not isinstance(part, Mapping):
                    continue
                inline = part.get("inlineData")
                if isinstance(inline, Mapping) and inline.get("data"):
                    pcm = wire.decode_bytes(inline["data"])  # before the response may start
                    r = self._start(out)
                    if r is not None:
                        out.append(ev.AudioDelta(r.response_id, pcm))
                elif isinstance(part.get("text"), str) and not part.get("thought"):
                    r = self._start(out)
                    if r is not None:
                        r.text.append(part["text"])
                        out.append(ev.TextDelta(r.response_id, part["text"]))
        heard = content.get("inputTranscription")
        if isinstance(heard, Mapping) and heard.get("text"):
            self._user_words.append(str(heard["text"]))
            out.append(ev.TranscriptDelta("user", str(heard["text"])))
        said = content.get("outputTranscription")
        if isinstance(said, Mapping) and said.get("text"):
            r = self._start(out)
            if r is not None:
                r.transcript.append(str(said["text"]))
                out.append(ev.TranscriptDelta("assistant", str(said["text"]), r.response_id))
        if content.get("interrupted"):
            if not self._gate.interrupted():  # else our own text cut it: not user speech
                out.append(ev.SpeechStarted())
            if self._active is not None:
                self._active.interrupted = True
        if content.get("turnComplete"):
            self._turn_complete(out)

    def _turn_complete(self, out: list[ev.UpstreamEvent]) -> None:
        self._dropping = False
        self._gate.turn_complete()
        self._user_said(out)  # transcription may arrive after the reply started
        r, self._active = self._active, None
        if self.connected and not self._busy:
            self.outbox.extend(self._gate.ready())
        if r is None or r.closed:
            return
        status: ev.ResponseStatus = "interrupted" if r.interrupted else "completed"
        transcript = "".join(r.transcript)
        if transcript and not r.interrupted:
            out.append(ev.TranscriptDone("assistant", transcript, r.response_id))
        said = transcript or "".join(r.text)
        if said:
            self.history.append(("model", said))
        if status == "completed":
            self._uplink.saved()  # the user was answered: its words are in the history
            self.completed_turns += 1
            self._unanswered_text = None
            self._answered_results.clear()
            self._question_called_tools = False
            self.calls.question_answered()
        out.append(ev.ResponseDone(r.response_id, status, self._usage))
        self._usage = None

    def _tool_call(self, message: Mapping[str, Any], out: list[ev.UpstreamEvent]) -> None:
        calls = self.calls.requested(message, self.notes)
        if not calls:
            return
        self._dropping = False
        self._gate.reply_due = True  # the turn goes on (after the results) until turnComplete
        self._question_called_tools = self._unanswered_text is not None
        self._user_said(out)  # the policy checks the user's words before any call runs
        r = self._active
        if r is None or r.closed or r.interrupted:
            self._active = None
            r = self._start(out)
        assert r is not None
        transcript = "".join(r.transcript)
        if transcript:  # it spoke before calling
            out.append(ev.TranscriptDone("assistant", transcript, r.response_id))
            self.history.append(("model", transcript))
        self.history.append(("model", "; ".join(f"called {c.name}({c.arguments})" for c in calls)))
        out.append(ev.ToolCallsRequested(r.response_id, tuple(calls)))
        r.closed = True
        out.append(ev.ResponseDone(r.response_id, "completed", self._usage))
        self._usage = None
        self._active = None

    def _cancellation(self, message: Mapping[str, Any], out: list[ev.UpstreamEvent]) -> None:
        ids = self.calls.cancelled(message)
        if ids:
            out.append(ev.ToolCallsCancelled(tuple(ids)))

    # -- session → server ----------------------------------------------------------------------

    def audio(self, pcm: bytes) -> None:
        self.outbox.extend(self._uplink.audio(pcm, connected=self.connected))

    def commit(self) -> None:
        """Push-to-talk release: the microphone is closed, the model answers what it heard."""
        if self.connected:
            self.outbox.extend(self._uplink.flush())
        self._send(wire.audio_stream_end(), keep=True)

    def clear(self) -> None:
        self._uplink.clear()

    def user_text(self, text: str) -> None:
        # clientContent interrupts the turn in progress on the server (a reply, or one held by
        # pending tool calls): the `interrupted` that follows is ours, not the user speaking.
        busy = self._busy
        self._cancel_active()
        if not self.connected:  # into the history once it is sent (resume)
            self._offline_texts.append(text)
            self._queued.append(wire.text_turn(text))
            return
        self.history.append(("user", text))
        self._unanswered_text = text
        self._answered_results.clear()
        self._question_called_tools = False
        self.outbox.extend(self._gate.context_before_user())
        self._gate.sent(cuts=busy)
        self.outbox.append(wire.text_turn(text))

    def context(self, text: str) -> None:
        """Context the model does not answer (it waits like ``_turn``)."""
        self.history.append(("user", text))
        self._own(wire.text_turn(text, turn_complete=False))

    def tool_results(self, results: Sequence[ToolResult]) -> None:
        answers: list[tuple[str, str, Mapping[str, Any]]] = []
        orphaned: list[str] = []
        for result in results:
            if result.acknowledgement:
                continue  # a non-blocking call: the model did not wait; its result comes later
            pending, orphans = self.calls.pending, self.calls.orphans
            if not self.connected and result.call_id in pending:
                # Its connection is going away: the next one will not know the id.
                orphans[result.call_id] = pending.pop(result.call_id)
            orphan = orphans.pop(result.call_id, None)
            if orphan is not None:
                orphaned.append(
                    f"{orphan} call {result.call_id}: {result_text(result, limit=4000)}"
                )
                continue
            name = pending.get(result.call_id)
            if name is None:
                # Cancelled, answered, or never issued: the server must not get it.
                self.notes.append(("tool_result_dropped", {"call_id": result.call_id}))
                continue
            summary = result_text(result)  # serialised before the id leaves the pending list
            answers.append(
                (self.calls.server_id(result.call_id), name or result.name, result.envelope)
            )
            del pending[result.call_id]
            item = ("user", f"result of {result.call_id}: {summary}")
            self._answered_results.append((f"{name} call {result.call_id}: {summary}", item))
            self.history.append(item)
        if answers:
            self._send(wire.tool_response(answers))
            self._gate.reply_due = True  # the turn the calls held goes on
        if orphaned:
            # One turn for the batch, once the model is not talking.
            self._turn(ORPHANS_PREFIX + "; ".join(orphaned))

    def scheduled_result(self, result: ToolResult, delivery: Delivery) -> None:
        """A background call's result, with Gemini's scheduling if this connection issued it."""
        name = self.calls.nonblocking_answerable(result.call_id) if self.connected else None
        if name is not None:
            answer = [(self.calls.server_id(result.call_id), name, result.envelope)]
            self.outbox.append(wire.tool_response(answer, scheduling=SCHEDULING[delivery]))
            self.history.append(("user", f"result of {result.call_id}: {result_text(result)}"))
        elif delivery == "silent":
            self.context(
                f"Result of the earlier {result.name} call: {result_text(result, limit=8000)}"
            )
        else:
            self.late_result(result)

    def late_result(self, result: ToolResult) -> None:
        self._turn(
            f"Result of the earlier {result.name} call {result.call_id}, which finished after "
            f"its turn: {result_text(result, limit=8000)}"
        )

    def _turn(self, text: str) -> None:
        """A turn the model must answer that is not the user talking: it waits until the
        server's turn in progress is over (a clientContent would cut it, and cancel the calls
        it waits for), or for the next connection."""
        self.history.append(("user", text))
        self._own(wire.text_turn(text))

    def _own(self, frame: str) -> None:
        if not self.connected:
            self._queued.append(frame)
        else:
            self.outbox.extend(self._gate.place(frame, busy=self._busy))

    def cancel(self) -> None:
        """The client's response.cancel: Gemini has no cancel, so the rest is dropped here."""
        if self._cancel_active():
            self._unanswered_text = None  # not asked again after a reconnect

    def _cancel_active(self) -> bool:
        r = self._active
        if r is None or r.closed:
            return False
        r.closed = True
        self._dropping = True
        self.events.append(ev.ResponseDone(r.response_id, "cancelled"))
        said = "".join(r.transcript) or "".join(r.text)
        if said:
            self.history.append(("model", said))
        return True

    def _send(self, frame: str, *, keep: bool = False) -> None:
        """Queue a frame now; offline, ``keep`` holds it for the next connection."""
        if self.connected:
            self.outbox.append(frame)
        elif keep:
            self._queued.append(frame)

    # -- connection changes ----------------------------------------------------------------------

    def connection_lost(self) -> list[ev.UpstreamEvent]:
        """The socket is gone: end the response in flight; calls pending are orphaned."""
        self.connected = False
        self.calls.connection_lost()
        # Frames not sent yet go to the next connection, except answers by id: it will not know
        # those calls. Their results go as text, unless the question is asked again anyway
        # (with the results it already led to).
        unsent_answers = [f for f in self.outbox if f.startswith('{"toolResponse"')]
        # Audio not sent is in the uplink's unsaved audio, given again from there.
        self._queued[:0] = [
            f
            for f in self.outbox
            if not f.startswith('{"toolResponse"') and not wire.is_audio_input(f)
        ]
        self.outbox.clear()
        orphaned = orphaned_results_text(unsent_answers)
        if orphaned is not None and self._unanswered_text is None:
            self._queued.append(wire.text_turn(orphaned))
        self._uplink.connection_lost()
        self.go_away_s = None
        out: list[ev.UpstreamEvent] = []
        self._user_said(out)  # the client saw the deltas: close the user's transcript
        r, self._active = self._active, None
        self._dropping = False
        if r is not None and not r.closed:
            transcript = "".join(r.transcript)
            if transcript:
                self.history.append(("model", transcript))
            out.append(ev.ResponseDone(r.response_id, "interrupted"))
        if lost_calls := self.calls.orphan_pending():
            self.notes.append(("tool_calls_orphaned", {"calls": lost_calls}))
        self._queued[:0] = self._gate.connection_lost()
        return out

    def resume(self, *, resumed: bool) -> list[str]:
        """Frames for a new connection once set up; ``resumed``: it restored the session (as of
        its last handle, so what came after is given again)."""
        self.connected = True
        self._handle_stale = False
        if not resumed:
            # A first session of a new conversation is the only one whose ids cannot repeat.
            self.calls.new_session(ids_may_repeat=self._sessions > 0 or bool(self.config.history))
            self._sessions += 1
        frames: list[str] = []
        question = self._unanswered_text
        if not resumed and self.history:
            turns = list(self.history)
            if question is not None:  # asked below, once, with the results it led to
                for item in [("user", question), *(i for _, i in self._answered_results)]:
                    if item in turns:
                        turns.remove(item)
            frames.append(wire.history_turns(turns))
        if question is not None:
            answered = [text for text, _ in self._answered_results]
            frames.extend(question_again(question, answered, self._question_called_tools))
        frames.extend(self._uplink.for_new_connection())
        frames.extend(self._queued)
        self._queued.clear()
        self.history.extend(("user", text) for text in self._offline_texts)
        self._offline_texts.clear()
        self._gate.sent_back_to_back(frames)
        return frames
