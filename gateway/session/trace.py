"""The spans of one session, with tracing on (``gateway.observability.tracing``).

A session is a tree::

    gateway.session                      while the session lives on this node
      gateway.upstream.connect           opening the upstream (its setup included)
      gateway.upstream.reconnect         a transparent reconnect: the loss to the new session
      gateway.turn                       user speech or a message → the reply that ends it
        chat {model}                     each response of the model in the turn
        execute_tool {tool}              each call (``gateway.toolrun.spans``)
          GET /patients/{id}/…           an HTTP tool's request (``gateway.http_tools``)
        gateway.confirmation             asked → approved, rejected or expired

A turn starts with the user's input (a message, the model hearing speech, an audio commit, an
answer to a confirmation), or with a response when none is open (Gemini announces no user
speech; the model may speak unprompted), and ends with the first response that calls no tool
(the reply; on chat, whose agent loop answers calls inside one response, every response), or
when the user barges in (it ends ``interrupted``), or with the session. Tool calls are
children of the turn they were made in; a confirmation's wait too, even when it is answered
turns later. A session that moves to
another node ends its span here (``handed_off``) and the new node opens one of its own (a
resume) under the same session id.

Attributes are ids, counts, statuses and names the code chose; never text, audio, arguments,
results or credentials. A response's span is also the GenAI conventions' ``chat`` span
(``gateway.observability.genai``); with content capture on, it carries the turn's input (the
user's message, or their words as transcribed while no transcript is suppressed) and the words
the client received of the reply.
"""

from __future__ import annotations

import time

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from gateway.observability import genai
from gateway.observability.tracing import Tracing
from gateway.providers import PROVIDERS
from gateway.usage import TokenCounts

__all__ = ["SessionTrace"]


class SessionTrace:
    def __init__(
        self, tracing: Tracing, *, session_id: str, provider: str, mode: str, epoch: int
    ) -> None:
        """``epoch``: 1 for a new session; more for one resumed on this node after it ran
        on another (or on this one, before it was parked)."""
        self._tracing = tracing
        self._session_id = session_id
        self._provider = provider
        record = PROVIDERS.get(provider)
        self._in_process = record is not None and record.in_process
        self.session_span = tracing.start(
            "gateway.session",
            kind=SpanKind.SERVER,
            attributes={
                "gateway.session.id": session_id,
                "gateway.provider": provider,
                "gateway.mode": mode,
                "gateway.session.epoch": epoch,
                genai.CONVERSATION_ID: session_id,
            },
        )
        self.turn: Span | None = None
        self._turns = 0
        # With content capture on: what the user said in the open turn.
        self._heard: str | None = None
        # Each open response: its span, its turn's (None: outside any), and whether it is said
        # aside (a holding line, which never ends a turn).
        self._responses: dict[str, tuple[Span, Span | None, bool]] = {}
        self._with_calls: set[str] = set()
        self._confirmations: dict[str, Span] = {}

    # -- the upstream ------------------------------------------------------------------------

    def upstream_connected(self, started_ns: int, *, provider: str) -> None:
        span = self._child(
            "gateway.upstream.connect", {"gateway.provider": provider}, start_time_ns=started_ns
        )
        span.end()

    def upstream_recovered(self, attempts: int, downtime_s: float) -> None:
        started = time.time_ns() - int(downtime_s * 1e9)
        span = self._child(
            "gateway.upstream.reconnect",
            {"gateway.upstream.attempts": attempts},
            start_time_ns=started,
        )
        span.end()

    def upstream_replaced(self, previous: str, target: str, reason: str) -> None:
        """A failover: the session moved to another target of its model alias."""
        span = self._child(
            "gateway.upstream.failover",
            {
                "gateway.upstream.previous": previous,
                "gateway.upstream.target": target,
                "gateway.upstream.failover_reason": reason,
            },
        )
        span.end()

    # -- turns and responses -----------------------------------------------------------------

    def turn_started(self, source: str) -> None:
        """``source``: ``text``, ``speech`` (the model heard it) or ``commit``. A turn still
        open ends: ``interrupted`` when the user spoke over its reply (a barge-in), else
        ``superseded``."""
        if self.turn is not None:
            replying = any(turn is self.turn for _, turn, _ in self._responses.values())
            barge_in = replying and source == "speech"
            if barge_in:
                self.turn.set_attribute("gateway.turn.barge_in", True)
            self._end_turn("interrupted" if barge_in else "superseded")
        self._turns += 1
        self._heard = None
        self.turn = self._child(
            "gateway.turn", {"gateway.turn.number": self._turns, "gateway.turn.input": source}
        )

    def user_said(self, text: str) -> None:
        """The user's words in this turn (typed, or transcribed and shown to the client): kept
        for the turn's responses only when the operator turned content capture on."""
        if self._tracing.capture_content and text:
            self._heard = text

    def response_started(
        self, response_id: str, *, aside: bool = False, unprompted: str, model: str
    ) -> None:
        """``unprompted``: the turn's input should this response open one (a provider that
        announces no user speech, Gemini's, until the user talks over a reply). ``model``: the
        model the session uses now (its span's name)."""
        if self.turn is None and not aside:
            self.turn_started(unprompted)
        parent = self.turn or self.session_span
        span = self._tracing.start(
            genai.chat_span_name(model),
            parent=parent,
            # A model in this process (the embedded one); every other is a remote service.
            kind=SpanKind.INTERNAL if self._in_process else SpanKind.CLIENT,
            attributes={
                "gateway.response.id": response_id,
                "gateway.response.aside": aside,
                **genai.chat_attributes(
                    provider=self._provider,
                    model=model,
                    response_id=response_id,
                    conversation_id=self._session_id,
                ),
            },
        )
        self._responses[response_id] = (span, self.turn, aside)

    def tool_calls_requested(self, response_id: str) -> None:
        self._with_calls.add(response_id)

    def response_done(
        self,
        response_id: str,
        status: str,
        tokens: TokenCounts,
        *,
        answers_calls: bool = False,
        text: str = "",
    ) -> None:
        """A response ended; the first of a turn that called no tool is its reply, and ends
        it (an aside, a holding line, does not). ``answers_calls``: the provider answers calls
        in the response that made them (chat's agent loop): every response ends its turn.
        ``text``: the words the client received of it (recorded only with content capture)."""
        opened = self._responses.pop(response_id, None)
        if opened is None:
            return
        span, turn, aside = opened
        requested = response_id in self._with_calls
        reason = genai.finish_reason(status, called_tools=requested)
        span.set_attributes(
            {
                "gateway.response.status": status,
                "gateway.usage.input_tokens": tokens.input_total,
                "gateway.usage.output_tokens": tokens.output_total,
                genai.INPUT_TOKENS: tokens.input_total,
                genai.OUTPUT_TOKENS: tokens.output_total,
                genai.FINISH_REASONS: (reason,),
            }
        )
        if self._tracing.capture_content:
            if self._heard is not None and turn is self.turn:
                span.set_attribute(genai.INPUT_MESSAGES, genai.input_messages(self._heard))
            if text:
                span.set_attribute(genai.OUTPUT_MESSAGES, genai.output_messages(text, reason))
        if status == "failed":
            span.set_attribute("error.type", "failed")
            span.set_status(Status(StatusCode.ERROR, "failed"))
        span.end()
        called = requested and not answers_calls
        self._with_calls.discard(response_id)
        if turn is not None and turn is self.turn and not called and not aside:
            self._end_turn(status)

    def tool_parent(self) -> Span:
        """The span a tool call made now belongs under."""
        return self.turn or self.session_span

    # -- confirmations -----------------------------------------------------------------------

    def confirmation_asked(self, confirmation_id: str, tool_id: str) -> None:
        self._confirmations[confirmation_id] = self._tracing.start(
            "gateway.confirmation",
            parent=self.tool_parent(),
            attributes={
                "gateway.confirmation.id": confirmation_id,
                "gateway.tool.id": tool_id,
            },
        )

    def confirmation_resolved(self, confirmation_id: str, outcome: str) -> None:
        """The wait ends; the user's answer (not an expiry) is the input of a new turn: the
        model answers it."""
        span = self._confirmations.pop(confirmation_id, None)
        if span is not None:
            span.set_attribute("gateway.confirmation.outcome", outcome)
            span.end()
        if outcome in ("approved", "rejected"):
            self.turn_started("confirmation")

    # -- the end -----------------------------------------------------------------------------

    def ended(self, reason: str) -> None:
        """The session ends (``reason``), or leaves this node (``handed_off``)."""
        for span, _, _ in self._responses.values():
            span.set_attribute("gateway.response.status", "unfinished")
            span.end()
        self._responses.clear()
        for span in self._confirmations.values():
            span.set_attribute("gateway.confirmation.outcome", "unanswered_here")
            span.end()
        self._confirmations.clear()
        self._end_turn("session_ended")
        self.session_span.set_attribute("gateway.session.end_reason", reason)
        self.session_span.end()

    def _end_turn(self, status: str) -> None:
        if self.turn is None:
            return
        self.turn.set_attribute("gateway.turn.status", status)
        self.turn.end()
        self.turn = None

    def _child(
        self, name: str, attributes: dict[str, str | int | bool], start_time_ns: int | None = None
    ) -> Span:
        return self._tracing.start(
            name, parent=self.session_span, attributes=attributes, start_time_ns=start_time_ns
        )
