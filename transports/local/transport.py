"""``LocalTransport``: the async shell that turns ``LocalBrain`` replies into neutral events.

Everything that decides lives in pure modules (``brain``, ``vad``, ``speech``); this file only
queues events, runs one delivery task per spoken response, and waits (speech pacing, ``/slow``).

Rules the session can rely on:

- Exactly one response is active at a time. Starting a new one (a user text, the end of an
  utterance, the last result of a tool batch) first ends the active one with
  ``ResponseDone(status="cancelled")``.
- A spoken response is ``ResponseStarted``, then per word a ``TranscriptDelta`` (voice) or a
  ``TextDelta`` (text), voice audio in 20 ms ``AudioDelta`` chunks paced at ``pace`` × real
  time, then ``TranscriptDone`` (voice only) and ``ResponseDone(status="completed")``.
- A tool-call response is ``ResponseStarted``, ``ToolCallsRequested``, ``ResponseDone``; the
  answer is a new response once every call of the batch has a result. A late result
  (``send_late_result``: a confirmation resolved by the client) is answered at once.
- Speech detected while a response is active interrupts it: ``SpeechStarted`` then
  ``ResponseDone(status="interrupted")``; none of its audio follows ``SpeechStarted``.
- Manual turns (``TurnDetection.manual``, push-to-talk): no VAD; the audio since the last
  commit (or clear) is one utterance of its whole length, ended by ``commit_audio``. A commit
  with ``respond=False`` only commits; ``request_response`` answers what was committed since
  the last reply as one utterance (their lengths added), or says ``I'm listening.``.
- ``tool_choice`` applies to the reply to each user turn (``brain.ToolOffer``); the replies to
  tool results follow ``follow_up_choice``.
- ``/fail`` emits ``UpstreamFailed`` and ends ``events()``; after that and after ``close()``
  every input is ignored. ``/error TEXT`` is ``ResponseStarted``, ``UpstreamNotice`` and
  ``ResponseDone(status="failed")``: a provider error the session survives.

``events()`` has a single consumer (the session).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from transports.base import (
    Capabilities,
    Mode,
    ToolChoice,
    ToolResult,
    Transport,
    TransportError,
    TurnDetection,
    UpstreamConfig,
    follow_up_choice,
)
from transports.events import (
    AudioDelta,
    RequestedCall,
    ResponseDone,
    ResponseStarted,
    ResponseStatus,
    SpeechStarted,
    SpeechStopped,
    TextDelta,
    ToolCallsRequested,
    TranscriptDelta,
    TranscriptDone,
    UpstreamEvent,
    UpstreamFailed,
    UpstreamNotice,
    UserInputTranscribed,
)
from transports.local.brain import (
    CallTools,
    Fail,
    LocalBrain,
    Reply,
    ResponseError,
    Say,
    ToolOffer,
    compact_json,
    utterance_transcript,
)
from transports.local.speech import plan_speech, split_words, words_heard
from transports.local.vad import EnergyVad, UtteranceEnded, VadSpeechStarted

__all__ = ["LocalTransport"]

# Responses remembered for ``truncate``; the session only truncates the latest ones.
_RECENT_RESPONSES = 32


@dataclass(eq=False, slots=True)
class _Response:
    response_id: str
    mode: Mode
    output_rate: int
    words: list[str]  # word deltas, with their leading whitespace
    history_index: int
    delivered: int = 0  # words whose delta was sent
    heard_limit: int | None = None  # set by ``truncate``
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def remembered_text(self) -> str:
        count = (
            self.delivered if self.heard_limit is None else min(self.delivered, self.heard_limit)
        )
        return "".join(self.words[:count]).strip()


class LocalTransport:
    """The embedded local model: no network, no key, deterministic."""

    capabilities: Capabilities

    def __init__(
        self, brain: LocalBrain | Callable[[], LocalBrain] = LocalBrain, *, pace: float = 1.0
    ) -> None:
        if pace < 0:
            raise ValueError("pace must be >= 0")
        self.brain = brain if isinstance(brain, LocalBrain) else brain()
        self.pace = pace
        self.capabilities = Capabilities(
            input_rate=16000, output_rate=24000, server_vad=True, truncation=True, resumable=True
        )
        self.mode: Mode = "voice"
        self.instructions = ""
        self.turn_detection = TurnDetection()
        self.tool_choice: ToolChoice = "auto"
        self._tool_names: tuple[str, ...] = ()
        self._manual_bytes = 0  # manual turns: the audio since the last commit or clear
        self._unanswered_ms: int | None = None  # utterances committed without a reply yet
        self.history: list[tuple[str, str]] = []
        self.context_notes: list[str] = []
        self.truncations: list[tuple[str, int]] = []
        self._queue: asyncio.Queue[UpstreamEvent | None] = asyncio.Queue()
        self._vad = EnergyVad(self.capabilities.input_rate)
        self._responses_started = 0
        self._active: _Response | None = None
        self._recent: dict[str, _Response] = {}
        self._delivery_tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # Transport protocol ---------------------------------------------------------------------

    async def connect(self, config: UpstreamConfig) -> None:
        if self._closed:
            raise TransportError("the local transport is closed")
        # Speak at the client's own rates, so the session never needs to resample.
        self.capabilities = Capabilities(
            input_rate=config.client_input_rate,
            output_rate=config.client_output_rate,
            server_vad=True,
            truncation=True,
            resumable=True,
        )
        self.mode = config.mode
        self.instructions = config.instructions
        self.turn_detection = config.turn_detection
        self.tool_choice = config.tool_choice
        self._tool_names = tuple(tool.name for tool in config.tools)
        self._vad = EnergyVad(config.client_input_rate)
        self.history.extend((item.role, item.text) for item in config.history)
        if config.history:
            # A session restored (on another node): its earlier calls, which its ledger still
            # knows, were numbered by another brain; this one's ids must not repeat theirs.
            self.brain.number_calls_apart(f"call_{uuid.uuid4().hex[:6]}_")

    async def events(self) -> AsyncIterator[UpstreamEvent]:
        while (event := await self._queue.get()) is not None:
            yield event
        self._queue.put_nowait(None)  # a later events() call ends at once too

    async def send_audio(self, pcm: bytes) -> None:
        if self._closed:
            return
        if self.turn_detection.manual:
            self._manual_bytes += len(pcm)
            return
        for event in self._vad.feed(pcm):
            if isinstance(event, VadSpeechStarted):
                interrupted = self._halt_active()
                self._emit(SpeechStarted())
                if interrupted is not None:
                    self._emit(ResponseDone(interrupted.response_id, "interrupted"))
            else:
                self._utterance_ended(event)

    async def commit_audio(self, *, respond: bool = True) -> None:
        if self._closed:
            return
        if self.turn_detection.manual:
            rate = self.capabilities.input_rate
            duration_ms, self._manual_bytes = round(self._manual_bytes * 500 / rate), 0
            ended = None if duration_ms == 0 else UtteranceEnded(duration_ms, False)
        else:
            ended = self._vad.commit()
        if ended is not None:
            self._utterance_ended(ended, respond=respond)

    async def request_response(self) -> None:
        if self._closed:
            return
        unanswered, self._unanswered_ms = self._unanswered_ms, None
        if unanswered is None:
            self._respond(self.brain.reply_to_nothing(self._offer()))
        else:
            self._respond(self.brain.reply_to_utterance(unanswered, self._offer()))

    async def clear_audio(self) -> None:
        self._vad.clear()
        self._manual_bytes = 0

    async def send_text(self, text: str) -> None:
        if self._closed:
            return
        self.history.append(("user", text))
        self._unanswered_ms = None  # the reply to the text answers them too
        self._respond(self.brain.reply_to_text(text, self._offer()))

    async def add_context(self, text: str) -> None:
        if self._closed:
            return
        self.context_notes.append(text)
        self.history.append(("user", text))

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        if self._closed:
            return
        open_ids = set(self.brain.open_call_ids)
        accepted = []
        for result in results:
            if result.call_id in open_ids:  # unknown, earlier or repeated ids are ignored
                open_ids.discard(result.call_id)
                accepted.append((result.call_id, result.name, result.envelope))
                self._record_result(result)
        reply = self.brain.reply_to_tool_results(accepted, self._offer(follow_up=True))
        if reply is not None:
            self._respond(reply)

    async def send_late_result(self, result: ToolResult) -> None:
        if self._closed:
            return
        self._record_result(result)
        offer = self._offer(follow_up=True)
        self._respond(
            self.brain.reply_to_late_result(result.call_id, result.name, result.envelope, offer)
        )

    async def cancel_response(self) -> None:
        self._end_active("cancelled")

    async def truncate(self, response_id: str, played_ms: int) -> None:
        self.truncations.append((response_id, played_ms))
        response = self._recent.get(response_id)
        if response is not None and response.mode == "voice":
            response.heard_limit = words_heard(played_ms)
            self.history[response.history_index] = ("assistant", response.remembered_text())

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        if mode is not None:
            self.mode = mode
        if instructions is not None:
            self.instructions = instructions
        if turn_detection is not None and turn_detection.manual != self.turn_detection.manual:
            await self.clear_audio()  # an utterance in progress belongs to neither way
        if turn_detection is not None:
            self.turn_detection = turn_detection
        if tool_choice is not None:
            self.tool_choice = tool_choice

    async def close(self) -> None:
        if self._closed:
            return
        self._shut_down()
        self._vad.clear()
        await asyncio.gather(*self._delivery_tasks, return_exceptions=True)

    # Replies --------------------------------------------------------------------------------

    def _offer(self, *, follow_up: bool = False) -> ToolOffer:
        choice = follow_up_choice(self.tool_choice) if follow_up else self.tool_choice
        return ToolOffer(self._tool_names, choice)

    def _utterance_ended(self, ended: UtteranceEnded, *, respond: bool = True) -> None:
        if ended.speech_detected:
            self._emit(SpeechStopped())
        transcript = utterance_transcript(ended.duration_ms)
        self._emit(TranscriptDone(role="user", text=transcript))
        self._emit(UserInputTranscribed(transcript))
        self.history.append(("user", transcript))
        if not respond:
            self._unanswered_ms = (self._unanswered_ms or 0) + ended.duration_ms
            return
        duration_ms, self._unanswered_ms = ended.duration_ms + (self._unanswered_ms or 0), None
        self._respond(self.brain.reply_to_utterance(duration_ms, self._offer()))

    def _respond(self, reply: Reply) -> None:
        self._end_active("cancelled")
        match reply:
            case Fail(message):
                self._emit(UpstreamFailed(message))
                self._shut_down()
            case CallTools(calls):
                response_id = self._next_response_id()
                self._emit(ResponseStarted(response_id))
                for call in calls:
                    self.history.append(
                        ("tool", f"call {call.call_id} {call.name} {call.arguments}")
                    )
                requested = tuple(RequestedCall(c.call_id, c.name, c.arguments) for c in calls)
                self._emit(ToolCallsRequested(response_id, requested))
                self._emit(ResponseDone(response_id, "completed"))
            case ResponseError(message):
                response_id = self._next_response_id()
                self._emit(ResponseStarted(response_id))
                self._emit(UpstreamNotice("local_error", message))
                self._emit(ResponseDone(response_id, "failed"))
            case Say():
                self._start_speaking(reply)

    def _start_speaking(self, reply: Say) -> None:
        response = _Response(
            response_id=self._next_response_id(),
            mode=self.mode,
            output_rate=self.capabilities.output_rate,
            words=split_words(reply.text),
            history_index=len(self.history),
        )
        self.history.append(("assistant", ""))
        self._recent[response.response_id] = response
        if len(self._recent) > _RECENT_RESPONSES:
            del self._recent[next(iter(self._recent))]
        self._emit(ResponseStarted(response.response_id))
        self._active = response
        response.task = asyncio.create_task(self._deliver(response, reply))
        self._delivery_tasks.add(response.task)
        response.task.add_done_callback(self._delivery_finished)

    async def _deliver(self, response: _Response, reply: Say) -> None:
        """Send one response's deltas; cancelled at an ``await`` when the response is ended."""
        if reply.delay_ms > 0:
            await asyncio.sleep(reply.delay_ms / 1000)  # "thinking" time: wall clock, not paced
        response_id = response.response_id
        if response.mode == "voice":
            loop = asyncio.get_running_loop()
            started, audio_s = loop.time(), 0.0
            for word in plan_speech(reply.text, response.output_rate):
                self._emit(TranscriptDelta("assistant", word.delta, response_id))
                self._word_delivered(response)
                for chunk in word.chunks:
                    self._emit(AudioDelta(response_id, chunk))
                    audio_s += len(chunk) / 2 / response.output_rate
                    await self._pace(loop, started + audio_s * self.pace)
            self._emit(TranscriptDone("assistant", "".join(response.words), response_id))
        else:
            for delta in response.words:
                self._emit(TextDelta(response_id, delta))
                self._word_delivered(response)
                await asyncio.sleep(0)  # let cancel and barge-in in between words
        self._active = None
        self._emit(ResponseDone(response_id, "completed"))

    async def _pace(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        # Pace against the response's start, not per chunk, so sleeps do not add up to drift.
        await asyncio.sleep(max(0.0, due - loop.time()) if self.pace > 0 else 0)

    def _record_result(self, result: ToolResult) -> None:
        entry = f"result {result.call_id} {result.name} {compact_json(result.envelope)}"
        self.history.append(("tool", entry))

    def _word_delivered(self, response: _Response) -> None:
        response.delivered += 1
        self.history[response.history_index] = ("assistant", response.remembered_text())

    def _delivery_finished(self, task: asyncio.Task[None]) -> None:
        self._delivery_tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None and not self._closed:
            self._emit(UpstreamFailed(f"local model crashed: {error!r}"))
            self._shut_down()

    # State ----------------------------------------------------------------------------------

    def _next_response_id(self) -> str:
        self._responses_started += 1
        return f"resp_{self._responses_started}"

    def _halt_active(self) -> _Response | None:
        """Stop the active response's deliveries now; the caller says how it ended."""
        response, self._active = self._active, None
        if response is not None and response.task is not None:
            response.task.cancel()
        return response

    def _end_active(self, status: ResponseStatus) -> None:
        response = self._halt_active()
        if response is not None:
            self._emit(ResponseDone(response.response_id, status))

    def _shut_down(self) -> None:
        self._closed = True
        self._halt_active()
        self._emit(None)

    def _emit(self, event: UpstreamEvent | None) -> None:
        self._queue.put_nowait(event)


if TYPE_CHECKING:  # mypy proves that the class satisfies the Transport protocol
    _conforms: Transport = LocalTransport()
