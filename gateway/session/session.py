"""One client session: the client's events in, the upstream's events out, tools in between.

A ``Session`` is the state the parts share and the wiring between them:

    ClientEvents    client → upstream: a handler per client event type, the audio hot path
    UpstreamEvents  upstream → client: a handler per upstream event type, barge-in, responses
    ToolFlow        tool batches and confirmations (``Approvals``), on the policy of
                    ``gateway.orchestrator``
    Profile, Conversation   what a resume needs (``snapshot``), as plain data

Everything the client sees goes through ``emit`` / the ``ClientOutput`` writer, so a slow client
never blocks the upstream. The socket handler (a client edge, ``gateway.edges``) feeds
``on_client_event`` and ``audio_now``; the session manager runs ``run_upstream``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import Literal, Protocol

import structlog

from gateway.audio.convert import bytes_per_sample, encoded
from gateway.audio.cues import holding_tone
from gateway.orchestrator import CallPolicy, ConfirmationBook, IntentState, TurnState
from gateway.protocol import (
    BinaryAudio,
    EndReason,
    ErrorCode,
    ErrorEvent,
    JsonClientEvent,
    JsonObject,
    ProtocolError,
    ResponseDone,
    ServerEvent,
    SessionEnded,
    ToolFinished,
)
from gateway.session.budget_port import budget_of
from gateway.session.client_events import ClientEvents
from gateway.session.client_output import ClientOutput
from gateway.session.client_tools import ClientToolBook
from gateway.session.ownership import Ownership
from gateway.session.parts import SessionParts
from gateway.session.ratelimit import TokenBucket
from gateway.session.replacement import follow_replacement
from gateway.session.snapshot import Conversation, Profile, restore, snapshot
from gateway.session.states import SessionState, transition
from gateway.session.tool_events import ToolWiring
from gateway.session.tool_notes import result_note
from gateway.session.toolflow import ToolFlow
from gateway.session.trace import SessionTrace
from gateway.session.upstream_events import UpstreamEvents
from gateway.session.user import SessionUser
from gateway.store import SessionSnapshot
from gateway.toolrun import Caller, ToolRunner, UsageRecord
from gateway.usage import SessionUsage, UsageReporter
from tools._core import Intent
from transports.base import Capabilities, ConversationItem, Transport
from transports.events import UpstreamReplaced

__all__ = ["Session", "SessionKeeper", "SessionUser"]

_log = structlog.get_logger("session")

UPSTREAM_CLOSE_TIMEOUT_S = 5.0
# How long a hand-off waits for results being given (a ledger write, then a send).
DELIVERIES_WAIT_S = 5.0
# How long an end waits for the session's last budget charge (the store's timeout is shorter).
SETTLE_WAIT_S = 3.0


class SessionKeeper(Protocol):
    """Who keeps the node's sessions (the session manager): what a session tells it."""

    def session_boundary(self, session: Session) -> None:
        """A turn began or ended: a snapshot is due."""
        ...

    def session_lost(self, session: Session) -> None:
        """Another node owns the session now."""
        ...

    async def session_ending(self, session: Session) -> None:
        """It ends here for good: awaited before the client hears ``session.ended``, so that
        what it held in the store is free by then."""
        ...


class Session:
    def __init__(
        self,
        parts: SessionParts,
        *,
        session_id: str,
        user: SessionUser,
        setup: SessionSnapshot,
        transport: Transport,
        runner: ToolRunner,
        ownership: Ownership,
        keeper: SessionKeeper | None = None,
        client_tools: ClientToolBook | None = None,
        usage: SessionUsage | None = None,
        trace: SessionTrace | None = None,
    ) -> None:
        """``parts``: what every session of the node is built with; ``setup`` is a fresh
        snapshot for a new session, or a stored one being resumed; ``client_tools``: the book
        of the tools its client declared (from ``setup``); ``usage``: the account the session's
        runner counts tool calls into."""
        clock, metrics, registry = parts.clock, parts.metrics, parts.registry
        self.session_id = session_id
        self.user = user
        self.registry = registry
        self.transport = transport
        self.runner = runner
        self.clock = clock
        self.metrics = metrics
        self._budgets = parts.budgets
        self.profile = Profile.of(setup)
        self.conversation = Conversation(parts.confirmation_ttl_s, usage=usage or SessionUsage())
        restore(self.conversation, setup)
        self.budget = budget_of(self, user, parts.counters, clock, metrics)
        self.usage = UsageReporter(
            self.conversation.usage,
            self.profile,
            metrics,
            parts.prices,
            on_priced=None if self.budget is None else self.budget.response_charged,
        )
        self._audit = parts.audit
        self._observer = parts.observer
        self.state = SessionState.STARTING
        self.outbound: ClientOutput | None = None
        self.resume_token_hash = ""
        self.ended = asyncio.Event()
        self.end_reason: EndReason | None = None
        self.started_at = clock.monotonic()
        self._closing: asyncio.Task[None] | None = None
        self._ending: asyncio.Task[None] | None = None
        # Ending and moving exclude each other: whichever begins first, the other finds it done.
        self._leaving = asyncio.Lock()
        self.trace = trace
        self._log = _log.bind(session_id=session_id, user_id=user.user_id)
        if trace is not None:  # its log lines name the session's trace
            context = trace.session_span.get_span_context()
            self._log = self._log.bind(trace_id=format(context.trace_id, "032x"))
        self.ownership = ownership
        # A phone call's media stream cannot move to another node (a drain lets it finish), nor
        # a session with tools of its client's: a call waiting for the client's answer lives
        # on this node only (the declarations themselves are in the snapshot).
        self.movable = client_tools is None or not client_tools.tools
        self._keeper = keeper
        wiring = ToolWiring(
            self,
            registry,
            runner,
            clock,
            metrics,
            transport,
            self.conversation,
            ownership,
            parts.holding,
            trace,
        )
        self.tools = ToolFlow(wiring, self, client_tools=client_tools)
        self.upstream = UpstreamEvents(
            self,
            profile=self.profile,
            conversation=self.conversation,
            tools=self.tools,
            transport=transport,
            metrics=metrics,
            clock=clock,
            usage=self.usage,
            trace=trace,
        )
        self.client = ClientEvents(
            self,
            profile=self.profile,
            conversation=self.conversation,
            tools=self.tools,
            transport=transport,
            registry=registry,
            clock=clock,
            cursor=self.upstream.cursor,
            events_per_s=parts.client_events_per_s,
            events_burst=parts.client_events_burst,
            trace=trace,
        )

    # -- state the other parts of the gateway read ---------------------------------------------

    @property
    def mode(self) -> str:
        return self.profile.mode

    @property
    def provider(self) -> str:
        return self.profile.provider

    @property
    def roles(self) -> tuple[str, ...]:
        return self.user.roles

    @property
    def turn(self) -> TurnState:
        return self.conversation.turn

    @property
    def book(self) -> ConfirmationBook:
        return self.conversation.book

    @property
    def intents(self) -> IntentState:
        return self.conversation.intents

    @property
    def history(self) -> deque[ConversationItem]:
        return self.conversation.history

    def snapshot(self) -> SessionSnapshot:
        """Everything a resume needs, as plain data for the store."""
        return snapshot(self.profile, self.conversation)

    # -- wiring ------------------------------------------------------------------------------

    def upstream_ready(self) -> None:
        self.converters_for(self.transport.capabilities)
        self.state = transition(self.state, "started")

    def converters_for(self, capabilities: Capabilities) -> None:
        self.client.upstream_ready(capabilities)
        self.upstream.upstream_ready(capabilities)

    def upstream_replaced(self, event: UpstreamReplaced) -> None:
        follow_replacement(self, event, self.transport)

    def share_event_budget(self, bucket: TokenBucket) -> None:
        """Spend the connection's event budget (its control frames spend from it too)."""
        self.client.budget = bucket

    def attach(self, outbound: ClientOutput) -> None:
        self.outbound = outbound
        if self.state is SessionState.DETACHED:
            self.state = transition(self.state, "resume")

    def detach(self) -> None:
        self.outbound = None
        if self.state is SessionState.ACTIVE:
            self.state = transition(self.state, "detach")

    def caller(self) -> Caller:
        return Caller(
            session_id=self.session_id,
            user_id=self.user.user_id,
            roles=self.user.roles,
            mode="voice" if self.profile.mode == "voice" else "text",
            turn=self.conversation.turn.number,
            auth_token=self.user.token,
            tenant=self.user.tenant,
            trace_parent=None if self.trace is None else self.trace.tool_parent(),
        )

    def call_policy(self) -> CallPolicy:
        mode: Literal["voice", "text"] = "voice" if self.profile.mode == "voice" else "text"
        return CallPolicy(
            registry=self.registry,
            mode=mode,
            roles=frozenset(self.user.roles),
            enabled=self.profile.enabled,
            budget=self._budgets[mode],
        )

    # -- events ------------------------------------------------------------------------------

    def emit(self, event: ServerEvent) -> None:
        if self.ended.is_set() and not isinstance(event, SessionEnded):
            return  # session.ended is the last event; late upstream events are dropped
        if isinstance(event, ToolFinished):  # every outcome the model gets, for a replay
            self.conversation.history.append(ConversationItem("tool", result_note(event)))
        if self._observer is not None:
            self._observer.event(self, event)
        if self.outbound is not None:
            # A response's end follows its audio; session.ended is the very last frame.
            ordered = isinstance(event, ResponseDone | SessionEnded)
            self.outbound.event(event, after_audio=ordered)
            self.metrics.frames.text_out += 1

    def error(self, code: ErrorCode, message: str, event_id: str | None = None) -> None:
        # ProtocolError owns the per-code retryable/fatal defaults.
        self.emit(ErrorEvent.from_error(ProtocolError(code, message, event_id=event_id)))

    async def on_client_event(self, event: JsonClientEvent | BinaryAudio) -> None:
        await self.client.handle(event)

    def audio_now(self, pcm: bytes, encoded: str | None = None) -> bool:
        """A binary frame on the hot path (``ClientEvents.audio_now``); ``encoded``: the same
        audio as the client's standard base64, when it sent it so."""
        return self.client.audio_now(pcm, encoded)

    async def run_upstream(self) -> None:
        await self.upstream.run()

    async def start_user_turn(self, text: str) -> bool:
        return await self.client.start_user_turn(text)

    # -- budgets (gateway.budgets.guard; ``SessionBudgetPort`` acts on these) -------------------

    async def turn_may_start(self) -> bool:
        """False when the session's budget has run out: the turn is not given to the model."""
        return self.budget is None or await self.budget.turn_may_start()

    def clock_tick(self) -> None:
        if self.budget is not None:
            self.budget.tick(attached=self.outbound is not None)

    def wrap_up(self, message: str) -> None:
        """Said to the model at the user's next turn (as SET_PENDING_MESSAGE is)."""
        self.conversation.intents.pending_messages.append(message)

    async def cancel_response(self) -> None:
        await self.transport.cancel_response()

    def close_input(self) -> None:
        self.client.close_input()

    def boundary(self) -> None:
        """A user turn began, or a response ended: the state worth a snapshot changed."""
        if self._keeper is not None and not self.ended.is_set():
            self._keeper.session_boundary(self)

    # -- what tool work needs of the replies (``SessionTurns``) -----------------------------------

    def replying(self) -> bool:
        return self.upstream.cursor.current is not None

    async def until_idle(self) -> None:
        await self.upstream.idle.wait()

    def attached(self) -> bool:
        return self.outbound is not None

    def play_tone(self) -> bool:
        """The holding tone, as audio of the reply in progress (the one waiting for its tool
        calls): it queues after what the client still plays of it, never over it."""
        response, outbound = self.upstream.cursor.current, self.outbound
        if self.profile.mode != "voice" or outbound is None or response is None:
            return False
        if response.interrupted:
            return False
        rate, encoding = self.profile.output_rate, self.profile.encoding
        audio = encoded(holding_tone(rate), encoding)  # a phone call takes its G.711 law
        frame = rate * bytes_per_sample(encoding) * 20 // 1000  # 20 ms frames, as a reply's
        for offset in range(0, len(audio), frame):
            outbound.audio(audio[offset : offset + frame])
            self.metrics.frames.audio_out += 1
        return True

    def at_turn_boundary(self) -> bool:
        """No reply is streaming to the client (a reply that only waits for its tool calls
        counts as done): the session may move now."""
        current = self.upstream.cursor.current
        return current is None or self.tools.holding(current.response_id)

    def lost(self) -> None:
        """Another node owns this session now (``Fenced``): stop here, telling nobody. Not
        while it ends here: its own end left the tombstone that fenced a snapshot write racing
        it (the client still gets ``session.ended``)."""
        if self.ownership.handed_off or self._ending is not None:
            return
        self.ownership.handed_off = True
        self._log.info("session_lost", epoch=self.ownership.epoch)
        if self._keeper is not None:
            self._keeper.session_lost(self)

    def apply_intents(self, intents: Sequence[Intent]) -> None:
        self.conversation.intents.apply(
            intents,
            mode=self.profile.mode,
            response_active=self.upstream.cursor.current is not None,
            now=self.clock.monotonic(),
        )

    # -- the end -----------------------------------------------------------------------------

    async def end(
        self, reason: EndReason, detail: str | None = None, budget: JsonObject | None = None
    ) -> None:
        """End the session, once: a second call waits for the first. It runs in its own task:
        whoever called may be cancelled, the upstream (a billed provider socket) still gets
        closed. ``budget``: the limit that ran out (``budget_exhausted``)."""
        if self._ending is None:
            self._ending = asyncio.create_task(self._end(reason, detail, budget))
        await asyncio.shield(self._ending)

    @contextlib.asynccontextmanager
    async def moving(self) -> AsyncIterator[bool]:
        """Held while the session is moved to another node: True when it may move (no end has
        begun). An end asked for meanwhile waits, then finds the session handed off: the client
        got ``session.moving`` and asks again after its resume (the record it resumes from is
        never ended behind its back)."""
        async with self._leaving:
            yield not self.ended.is_set() and self._ending is None

    async def _end(self, reason: EndReason, detail: str | None, budget: JsonObject | None) -> None:
        async with self._leaving:
            if self.ended.is_set():  # handed off (moved), or taken over
                return
            # Its last seconds charged before anything can see it ended (the client's socket
            # closes once it has: session.ended must be queued without an await in between).
            await self._settle_budget()
            if self._keeper is not None and not self.ownership.handed_off:
                try:  # before the client hears of it: what the session held is free by then
                    await self._keeper.session_ending(self)
                except Exception:  # ending must not fail: the store's copy expires anyway
                    self._log.exception("session_end_hook_failed")
                if self.ended.is_set():  # taken over meanwhile (another node resumed it)
                    return
            self.state = transition(self.state, "end")
            self.end_reason = reason
            self.ended.set()
        self.metrics.sessions_ended.labels(reason.value).inc()
        usage = self.usage.summary()
        self._audit.session_usage(
            UsageRecord(
                session_id=self.session_id,
                user_id=self.user.user_id,
                tenant=self.user.tenant,
                provider=self.profile.provider,
                mode=self.profile.mode,
                reason=reason.value,
                usage=usage,
            )
        )
        self.emit(SessionEnded(reason=reason, detail=detail, usage=usage, budget=budget))
        if self.trace is not None:
            self.trace.ended(reason.value)
        self.tools.stop()
        self._closing = asyncio.create_task(self._close_upstream(reason))
        await self._closing

    async def hand_off(self) -> None:
        """The session goes on elsewhere (drained, or taken over): nothing more reaches the
        client or the model from here. Calls still running finish into the ledger, where the
        new owner finds their results; the upstream is closed."""
        self.ownership.handed_off = True
        if self.ended.is_set():
            return
        self.usage.flush()  # the next node reports from the snapshot's sums
        if self.trace is not None:
            self.trace.ended("handed_off")
        self.state = transition(self.state, "end")
        self.ended.set()  # readers and timers stop; emit drops everything
        self.tools.client_calls.let_go()  # no answer of the client can reach them here
        self.outbound = None
        await self._settle_budget()  # its time here charged; the next node charges its own
        # A result the ledger marked delivered here reaches this upstream before it closes (the
        # new owner leaves it alone); deliveries asked for from now on are left to the new owner.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DELIVERIES_WAIT_S):
                await self.ownership.deliveries_given()
        self._closing = asyncio.create_task(self._close_upstream(None))
        await asyncio.shield(self._closing)

    async def _settle_budget(self) -> None:
        if self.budget is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SETTLE_WAIT_S):
                    await self.budget.settle()

    async def _close_upstream(self, reason: EndReason | None) -> None:
        try:
            await asyncio.wait_for(self.transport.close(), UPSTREAM_CLOSE_TIMEOUT_S)
        except Exception:
            self._log.warning("upstream_close_failed")
        if reason is None:
            self._log.info("session_handed_off", epoch=self.ownership.epoch)
        else:
            self._log.info("session_ended", reason=reason.value)

    async def closed(self) -> None:
        """Wait until an ended session's upstream is closed."""
        if self._closing is not None:
            await asyncio.shield(self._closing)

    def idle_for(self) -> float:
        return self.clock.monotonic() - self.client.last_activity

    def age(self) -> float:
        return self.clock.monotonic() - self.started_at
