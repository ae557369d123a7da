"""Calls of the client's own tools inside a session: asked of the client, answered by it.

The gateway runs nothing for them and checks nothing of their arguments (the client owns the
tool): the tool flow asks the client (``client_tool.requested``) and awaits the answer
(``client_tool.output``), the deadline (``client_tool.cancelled`` ``timeout``, and a
``TIMEOUT`` result for the model) or the model's cancellation (``cancelled``, no result). Each
becomes an ordinary ``CallOutcome`` of the batch, audited like any call (``client``, without
arguments or output), so that the batch answers the model once, in call order, as it does for
the registry's tools. The book of what waits is pure (``client_tools.ClientToolBook``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from gateway.protocol import ClientToolCancelled, ClientToolRequested, ErrorCode
from gateway.protocol.client_tool_events import CancelReason
from gateway.session.client_tools import ClientToolBook, WaitingCall, arguments_text
from gateway.session.tool_events import ToolWiring
from gateway.toolrun import ArgumentError, AuditDecision, CallOutcome, ToolCall
from tools._core import ToolErrorType, ToolResponse

__all__ = ["ClientToolCalls"]

_log = structlog.get_logger("session.client_tools")


@dataclass(frozen=True, slots=True)
class _Answered:
    output: str
    waited_s: float  # from the question to the answer


@dataclass(frozen=True, slots=True)
class _Closed:
    reason: CancelReason | None  # None: the session let it go (ended, or handed off)


_Ending = _Answered | _Closed


class ClientToolCalls:
    def __init__(self, wiring: ToolWiring, book: ClientToolBook) -> None:
        self._w = wiring
        self.book = book
        self._endings: dict[str, asyncio.Future[_Ending]] = {}

    def declares(self, name: str) -> bool:
        return self.book.declares(name)

    def is_waiting(self, call_id: str) -> bool:
        """Asked and not yet answered, or answered and not yet taken by its batch (a call
        delivered again then is the same call)."""
        return self.book.is_waiting(call_id) or call_id in self._endings

    # -- the tool flow's side ---------------------------------------------------------------------

    def ask(self, call: ToolCall, response_id: str) -> CallOutcome | None:
        """Ask the client to run ``call``; the outcome of a call that cannot be asked (arguments
        over the limits every call has), else None (``answers`` gives its outcome)."""
        w = self._w
        try:
            arguments = arguments_text(call.arguments)
        except ArgumentError as exc:
            return w.runner.refuse(
                call, w.host.caller(), ToolErrorType.VALIDATION, str(exc), reason="arguments"
            )
        waiting = self.book.ask(
            call.call_id, call.tool_id, response_id, arguments, w.clock.monotonic()
        )
        self._endings[call.call_id] = asyncio.get_running_loop().create_future()
        w.host.emit(_requested(waiting))
        return None

    async def answers(self, calls: list[ToolCall]) -> dict[str, CallOutcome]:
        """The outcome of each call asked, once the client answered all (or their deadlines
        passed, or the model cancelled them)."""
        endings = {call.call_id: self._endings[call.call_id] for call in calls}
        outcomes: dict[str, CallOutcome] = {}
        try:
            for call in calls:
                outcomes[call.call_id] = self._outcome(call, await endings[call.call_id])
        finally:
            for call in calls:
                if call.call_id not in outcomes:  # the session ended: nothing is asked any more
                    self._close(call.call_id, None, "was let go: the session ended")
                    ending = endings[call.call_id]
                    # Its audit line: as answered, when the client had answered already (our
                    # cancellation cancels the future this task was waiting on).
                    answered = ending.done() and not ending.cancelled()
                    self._outcome(call, ending.result() if answered else _Closed(None))
                self._endings.pop(call.call_id, None)
        return outcomes

    def _outcome(self, call: ToolCall, ending: _Ending) -> CallOutcome:
        w = self._w
        caller = w.host.caller()
        if isinstance(ending, _Answered):
            meta = {
                "toolId": call.tool_id,
                "callId": call.call_id,
                "durationMs": round(ending.waited_s * 1000, 3),
            }
            envelope = ToolResponse.success({"output": ending.output}).to_envelope(meta)
            # Shaped, audited and remembered as a call run elsewhere: the client ran it.
            return w.runner.from_ledger(call, caller, envelope, AuditDecision.CLIENT)
        if ending.reason == "timeout":
            return w.runner.refuse(
                call,
                caller,
                ToolErrorType.TIMEOUT,
                f"the client did not answer this call within {self.book.timeout_s:g} s; it may "
                "or may not have acted on it",
                decision=AuditDecision.EXPIRED,
                reason="client_timeout",
                partial_side_effects=None,
            )
        refused = w.runner.refuse(
            call,
            caller,
            ToolErrorType.TRANSIENT,
            "cancelled before the client answered",
            decision=AuditDecision.CANCELLED,
            reason="cancelled" if ending.reason else "session_ended",
        )
        return dataclasses.replace(refused, cancelled=True)  # the model gets no result for it

    # -- the client's side, the clock's and the model's ---------------------------------------

    def answer(self, call_id: str, output: str) -> tuple[ErrorCode, str] | None:
        """``client_tool.output``; the error to send the client, or None when taken."""
        found = self.book.answer(call_id)
        if isinstance(found, str):
            return ErrorCode.TOOL_CALL_NOT_FOUND, found
        self._end(call_id, _Answered(output, self._w.clock.monotonic() - found.asked_at))
        return None

    def expire_due(self) -> None:
        for call in self.book.due(self._w.clock.monotonic()):
            self._w.host.emit(
                ClientToolCancelled(call_id=call.call_id, name=call.name, reason="timeout")
            )
            self._end(call.call_id, _Closed("timeout"))

    def cancel(self, call_ids: Iterable[str]) -> None:
        """The model cancelled these calls (the user talked over them): no answer is wanted."""
        for call_id in call_ids:
            self._close(call_id, "cancelled", "was cancelled by the model: no answer is wanted")

    def let_go(self) -> None:
        """The session goes on elsewhere: no answer can reach these calls here."""
        for call in self.book.waiting():
            self._close(call.call_id, None, "was let go: the session moved")

    def ask_again(self) -> None:
        """After a resume on this node: every call still waiting is asked again (a request
        sent while no client was attached was lost)."""
        for call in self.book.waiting():
            self._w.host.emit(_requested(call))

    def _close(self, call_id: str, reason: CancelReason | None, why: str) -> None:
        call = self.book.cancel(call_id, why)
        if call is None:
            return
        if reason is not None:
            self._w.host.emit(ClientToolCancelled(call_id=call_id, name=call.name, reason=reason))
        self._end(call_id, _Closed(reason))

    def _end(self, call_id: str, ending: _Ending) -> None:
        # The future stays until ``answers`` has taken it: an answer may come while the batch
        # still runs the gateway's own tools, before ``answers`` looks.
        future = self._endings.get(call_id)
        if future is not None and not future.done():
            future.set_result(ending)
        _log.info("client_tool_call_closed", call_id=call_id, ending=type(ending).__name__)


def _requested(call: WaitingCall) -> ClientToolRequested:
    return ClientToolRequested(
        response_id=call.response_id,
        call_id=call.call_id,
        name=call.name,
        arguments=call.arguments,
    )
