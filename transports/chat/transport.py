"""``ChatTransport``: text sessions on any OpenAI-compatible chat-completions provider.

Each user message starts one response, and one agent loop runs inside it: a streamed completion,
then the tool calls it asked for (handed to the session as one batch), their results appended as
``tool`` messages (or result lines, in the text dialects), then the next completion — until a
completion asks for no tool, or ``max_rounds`` rounds have run, after which one last completion
must answer without tools. However many rounds it takes, the client sees one
``ResponseStarted`` … ``ResponseDone``. ``tool_choice`` goes with the first completion of a
user message as the API takes it; the rounds after tool results follow ``follow_up_choice``.

The decisions live in pure modules: ``reader`` (a stream into text and calls), ``assembler`` and
``inline`` (the two ways calls arrive), ``dialects`` (prompts, plans, results) and
``conversation`` (the bounded history). This file only talks to the SDK and orders events.

Rules the session can rely on:

- One response at a time: a new user message (or ``cancel_response``) ends the active one with
  ``ResponseDone(status="cancelled")`` first; calls it was waiting for are cancelled.
- Call ids are unique in the session: a provider id seen before (some reuse ``call_0``) or a
  missing one is replaced, once, by a UUID-based id used from the call to its result.
- A provider error ends the response ``failed`` after an ``UpstreamNotice`` (retryable for 429,
  5xx, timeouts and broken streams); the session lives on and the next message is answered.
- Calls the transport refuses itself never reach the session: arguments cut off by the length
  limit (``VALIDATION``), a marker or plan entry that cannot be read (``VALIDATION``), and a
  text-dialect call below the confidence threshold (``INTENT_NOT_EXPLICIT``). The model gets a
  result for each, and the refusal is logged.

``events()`` has a single consumer (the session).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import openai
import structlog
from openai import AsyncOpenAI, Omit, omit
from openai.types.chat import ChatCompletionToolChoiceOptionParam
from openai.types.shared_params import ResponseFormatJSONObject

from transports.base import (
    Capabilities,
    ForcedTool,
    Mode,
    ToolChoice,
    ToolResult,
    Transport,
    TransportError,
    TurnDetection,
    UpstreamConfig,
    follow_up_choice,
)
from transports.chat.calls import PlannedCalls, plan_calls
from transports.chat.conversation import Conversation, Message
from transports.chat.dialects import (
    Dialect,
    blocked_envelope,
    compact_json,
    final_round_note,
    inline_prompt,
    json_plan_prompt,
    results_message,
)
from transports.chat.notices import notice_of
from transports.chat.reader import Completion, CompletionReader
from transports.events import (
    ResponseDone,
    ResponseStarted,
    ResponseStatus,
    TextDelta,
    ToolCallsCancelled,
    ToolCallsRequested,
    UpstreamEvent,
    UpstreamNotice,
)

__all__ = ["ChatOptions", "ChatTransport"]

_log = structlog.get_logger("upstream.chat")


@dataclass(frozen=True, slots=True)
class ChatOptions:
    api_key: str = field(repr=False)
    model: str
    base_url: str | None = None
    max_rounds: int = 5  # tool rounds per user message; then one answer without tools
    history_tokens: int = 16000  # the conversation's budget (estimated), oldest turns first
    timeout_s: float = 60.0
    max_retries: int = 2  # the SDK's own retries of 408/409/429/5xx and connection errors


@dataclass(slots=True)
class _Waiting:
    future: asyncio.Future[Sequence[ToolResult]]
    call_ids: tuple[str, ...]


class ChatTransport:
    capabilities: Capabilities

    def __init__(self, options: ChatOptions, client: AsyncOpenAI | None = None) -> None:
        if options.max_rounds < 0:
            raise ValueError("max_rounds must be >= 0")
        self.options = options
        self.capabilities = Capabilities(
            input_rate=16000,
            output_rate=24000,
            modes=frozenset({"text"}),
            answers_calls_in_response=True,  # the agent loop runs every round in one response
        )
        self._client = client
        self._owns_client = client is None
        self._model = options.model
        self._dialect = Dialect.NATIVE
        self._tools: list[dict[str, Any]] = []
        self._tool_choice: ToolChoice = "auto"
        self._conversation = Conversation("", options.history_tokens)
        self._queue: asyncio.Queue[UpstreamEvent | None] = asyncio.Queue()
        self._turn: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()  # one turn start at a time: never two turns running
        self._waiting: _Waiting | None = None
        self._late: list[Message] = []
        self._used_ids: set[str] = set()
        self._responses = 0
        # The last round's text ended mid-line: the next round's text starts a new paragraph.
        self._paragraph_due = False
        self._late_start: asyncio.Task[None] | None = None
        self._closed = False

    # Transport protocol ---------------------------------------------------------------------

    async def connect(self, config: UpstreamConfig) -> None:
        if self._closed:
            raise TransportError("the chat transport is closed")
        try:
            self._dialect = Dialect(config.options.get("tool_dialect") or Dialect.NATIVE)
        except ValueError:
            raise TransportError(
                f"tool_dialect must be one of {', '.join(d.value for d in Dialect)}"
            ) from None
        self._model = config.model or self.options.model
        if not self._model:
            raise TransportError("no chat model: set GATEWAY_CHAT_MODEL or the session's model")
        self._tools = [
            dict(tool.provider_schemas["openaiChat"])
            for tool in config.tools
            if "openaiChat" in tool.provider_schemas
        ]
        self._set_tool_choice(config.tool_choice)
        self._conversation = Conversation.replayed(
            config.instructions,
            self.options.history_tokens,
            ((item.role, item.text) for item in config.history),
        )
        if self._client is None:
            try:
                self._client = AsyncOpenAI(
                    api_key=self.options.api_key,
                    base_url=self.options.base_url,
                    timeout=self.options.timeout_s,
                    max_retries=self.options.max_retries,
                )
            except openai.OpenAIError as exc:
                raise TransportError(f"chat client: {exc}") from None

    async def events(self) -> AsyncIterator[UpstreamEvent]:
        while (event := await self._queue.get()) is not None:
            yield event
        self._queue.put_nowait(None)  # a later events() call ends at once too

    async def send_audio(self, pcm: bytes) -> None:
        """Text only: the session never sends audio to a text-only transport."""

    async def commit_audio(self, *, respond: bool = True) -> None:
        """Text only: nothing to commit."""

    async def request_response(self) -> None:
        """Every message is answered already: the model is asked to go on from the
        conversation as it is."""
        if not self._closed and self._turn is None:
            await self._start_turn([{"role": "system", "content": _GO_ON}])

    async def clear_audio(self) -> None:
        """Text only: nothing to clear."""

    async def truncate(self, response_id: str, played_ms: int) -> None:
        """Text only: nothing was played."""

    async def send_text(self, text: str) -> None:
        if not self._closed:
            await self._start_turn([{"role": "user", "content": text}])

    async def add_context(self, text: str) -> None:
        if not self._closed:
            self._conversation.add_context(text)

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        waiting = self._waiting
        mine = [] if waiting is None else [r for r in results if r.call_id in waiting.call_ids]
        if waiting is None or waiting.future.done() or not mine:
            # Results of calls no longer waited for (a cancelled round): never another round's.
            _log.info("chat_results_ignored", call_ids=[r.call_id for r in results])
            return
        waiting.future.set_result(mine)

    async def send_late_result(self, result: ToolResult) -> None:
        if self._closed:
            return
        if self._dialect is Dialect.NATIVE:
            message: Message = {
                "role": "system",
                "content": f"The result of the earlier call {result.call_id} ({result.name}) "
                f"has arrived: {compact_json(result.envelope)}. Tell the user what happened.",
            }
        else:
            message = results_message([(result.call_id, result.envelope)])
        if self._turn is None and not self._starting.locked():
            await self._start_turn([message])
        else:
            self._late.append(message)  # answered as soon as the active response ends

    async def cancel_response(self) -> None:
        await self._cancel_turn()

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        if instructions is not None:
            self._conversation.instructions = instructions
        if tool_choice is not None:
            self._set_tool_choice(tool_choice)

    def _set_tool_choice(self, choice: ToolChoice) -> None:
        # ``required`` and a forced tool need native function calling: the session refuses
        # them with a text dialect; here a text dialect offers tools only when not ``none``.
        self._tool_choice = choice

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._cancel_turn()
        if self._late_start is not None:
            await asyncio.wait([self._late_start])  # it sees the transport closed and returns
        if self._client is not None and self._owns_client:
            with contextlib.suppress(Exception):
                await self._client.close()
        self._queue.put_nowait(None)

    # Turns ----------------------------------------------------------------------------------

    async def _start_turn(self, first: list[Message]) -> None:
        async with self._starting:
            await self._cancel_turn()
            # Late results that waited for the cancelled response open this turn instead.
            messages, self._late = [*self._late, *first], []
            if self._closed or not messages:
                return
            self._begin(messages)

    def _begin(self, messages: list[Message]) -> None:
        self._conversation.begin_turn(messages[0])
        self._conversation.append(*messages[1:])
        self._responses += 1
        self._paragraph_due = False
        response_id = f"chat_resp_{self._responses}"
        self._queue.put_nowait(ResponseStarted(response_id))
        self._turn = asyncio.create_task(self._run_turn(response_id))
        self._turn.add_done_callback(self._turn_finished)

    async def _cancel_turn(self) -> None:
        turn = self._turn
        if turn is not None and not turn.done():
            turn.cancel()
            await asyncio.wait([turn])

    def _turn_finished(self, task: asyncio.Task[None]) -> None:
        if self._turn is task:
            self._turn = None
        if self._late and not self._closed and not self._starting.locked():
            # The response they waited for is over and no message is starting one: answer them
            # (a done callback cannot await; _start_turn takes them under the lock).
            self._late_start = asyncio.get_running_loop().create_task(self._start_turn([]))

    async def _run_turn(self, response_id: str) -> None:
        usage: dict[str, int] = {}
        status: ResponseStatus = "completed"
        try:
            await self._agent_loop(response_id, usage)
        except asyncio.CancelledError:
            if self._closed:
                raise
            status = "cancelled"
        except openai.APIError as exc:
            status = "failed"
            self._queue.put_nowait(notice_of(exc))
        except Exception:  # a bug here must not hang the session's response
            _log.exception("chat_turn_crashed")  # the details stay in the gateway's log
            status = "failed"
            self._queue.put_nowait(
                UpstreamNotice("chat_internal", "internal error in the gateway's chat upstream")
            )
        self._queue.put_nowait(ResponseDone(response_id, status, usage or None))

    async def _agent_loop(self, response_id: str, usage: dict[str, int]) -> None:
        rounds = 0  # tool rounds run for this message
        answer_now = not self._tools or self._tool_choice == "none"
        notes: list[str] = []
        while True:
            final = answer_now or rounds >= self.options.max_rounds
            planning = self._dialect is Dialect.JSON and not final
            if final and rounds > 0:
                notes.append(final_round_note(self._dialect, rounds))
            choice = self._tool_choice if rounds == 0 else follow_up_choice(self._tool_choice)
            completion = await self._complete(response_id, final, planning, notes, usage, choice)
            if planning:
                planned = plan_calls(completion, self._dialect, self._unique_id)
                answer_now = True  # one plan per message, then the answer
                if planned.problem is not None:
                    _log.info("chat_plan_unreadable", problem=planned.problem)
                    notes.append(
                        f"Your tool plan could not be read ({planned.problem}); no tool ran. "
                        "Answer the user in plain text."
                    )
                if not planned.empty:
                    rounds += 1
                    await self._run_calls(response_id, planned)
                continue
            if final or not completion.has_calls:
                if completion.has_calls:
                    _log.info("chat_calls_after_limit_ignored", rounds=rounds)
                self._conversation.append({"role": "assistant", "content": completion.shown})
                return
            rounds += 1
            await self._run_calls(
                response_id, plan_calls(completion, self._dialect, self._unique_id)
            )

    async def _complete(
        self,
        response_id: str,
        final: bool,
        planning: bool,
        notes: Sequence[str],
        usage: dict[str, int],
        choice: ToolChoice,
    ) -> Completion:
        system_extra: list[str] = []
        tools: Any = omit  # the registry's openaiChat declarations, as plain dicts
        tool_choice: ChatCompletionToolChoiceOptionParam | Omit = omit
        response_format: ResponseFormatJSONObject | Omit = omit
        if self._dialect is Dialect.NATIVE and self._tools:
            tools = self._tools
            if final:
                tool_choice = "none"
            elif isinstance(choice, ForcedTool):
                tool_choice = {"type": "function", "function": {"name": choice.name}}
            elif choice != "auto":
                tool_choice = choice
        elif self._dialect is Dialect.INLINE and self._tools and choice != "none":
            system_extra.append(inline_prompt(self._tools))
        elif planning:
            system_extra.append(json_plan_prompt(self._tools))
            response_format = {"type": "json_object"}
        reader = CompletionReader(self._dialect, planning=planning, new_id=self._new_id)
        messages: Any = self._conversation.messages(system_extra, notes)
        assert self._client is not None
        stream = await self._client.chat.completions.create(
            model=self._model,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
        )
        try:
            async with stream:
                async for chunk in stream:
                    self._show(response_id, reader.feed(chunk))
        except asyncio.CancelledError:
            if reader.shown_so_far:  # the user saw it: the model should know it said it
                self._conversation.append({"role": "assistant", "content": reader.shown_so_far})
            raise
        tail, completion = reader.finish()
        self._show(response_id, tail)
        if completion.shown:
            self._paragraph_due = not completion.shown[-1].isspace()
        for key, count in completion.usage.items():
            usage[key] = usage.get(key, 0) + count
        return completion

    def _show(self, response_id: str, text: str) -> None:
        if not text:
            return
        if self._paragraph_due and not text[0].isspace():
            text = "\n\n" + text  # rounds of one response read as paragraphs, not run-ons
        self._paragraph_due = False
        self._queue.put_nowait(TextDelta(response_id, text))

    async def _run_calls(self, response_id: str, planned: PlannedCalls) -> None:
        """Hand the runnable calls to the session as one batch, wait for their results, and
        append the model's message with every result (refused ones included) to the turn."""
        for refusal in planned.refused:
            _log.info(
                "chat_call_refused",
                call_id=refusal.call_id,
                tool=refusal.name,
                reason=refusal.reason,
            )
        envelopes: dict[str, Mapping[str, Any]] = {r.call_id: r.envelope for r in planned.refused}
        if planned.requested:
            ids = tuple(call.call_id for call in planned.requested)
            future: asyncio.Future[Sequence[ToolResult]] = (
                asyncio.get_running_loop().create_future()
            )
            self._waiting = _Waiting(future, ids)
            self._queue.put_nowait(ToolCallsRequested(response_id, planned.requested))
            try:
                results = await future
            except asyncio.CancelledError:
                delivered = future.result() if future.done() and not future.cancelled() else ()
                envelopes.update({r.call_id: r.envelope for r in delivered})
                unanswered = tuple(call_id for call_id in ids if call_id not in envelopes)
                if unanswered:
                    self._queue.put_nowait(ToolCallsCancelled(unanswered))
                cut = blocked_envelope(
                    "CANCELLED", "the response was cancelled; the call may not have completed"
                )
                envelopes.update({call_id: cut for call_id in unanswered})
                self._conversation.append(*planned.messages(envelopes))
                raise
            finally:
                self._waiting = None
            for result in results:
                if result.call_id in ids:
                    envelopes[result.call_id] = result.envelope
            for call_id in ids:
                envelopes.setdefault(
                    call_id, blocked_envelope("INTERNAL", "no result came back; it did not run")
                )
        self._conversation.append(*planned.messages(envelopes))

    # Ids ------------------------------------------------------------------------------------

    @staticmethod
    def _new_id() -> str:
        return f"call_{uuid.uuid4().hex}"

    def _unique_id(self, call_id: str) -> str:
        if not call_id or call_id in self._used_ids:
            call_id = self._new_id()
        self._used_ids.add(call_id)
        return call_id


_GO_ON = "The user asks for a reply now: go on from the conversation so far."


if TYPE_CHECKING:  # mypy proves that the class satisfies the Transport protocol
    _conforms: Transport = ChatTransport(ChatOptions(api_key="k", model="m"))
