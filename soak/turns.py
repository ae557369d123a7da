"""Turns a soak client takes through ``text.send`` (text sessions, and voice sessions too): a
plain message, tool calls (one, a batch, a background one, a slow, hanging or raising one) and
confirmations (approved, rejected, answered late, twice, or after they expired).

The fake models obey directives in user text (``/tool NAME {json}``, ``/tools A {..} ;; B
{..}``, ``yes``); every call goes to a journaling soak tool (``soak/tools``). A turn returns
when the model's reply to it is done; the first ``text.delta`` after the message is the text
latency (plain messages only: a tool's own time is not the gateway's).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from soak.context import SessionContext
from soak.conversation import Conversation

__all__ = ["TOOL_FAULTS", "confirm_turn", "plain_turn", "reply", "tool_turn"]

REPLY_WITHIN_S = 30.0
# How long each slow tool takes; past the text soft limit (2 s), within every deadline.
SLOW_MS = 2500
TOOL_FAULTS = {"tool_slow", "tool_hang", "tool_raise"}
# ``confirm_late``: the answer comes this long after ``confirmation.requested`` (or as soon as
# the reply asking for it is done, if that took longer), well inside the soak's confirmation
# TTL (``soak.fleet.CONFIRMATION_TTL_S``). Counted from the request, not from the reply: a
# voice reply is spoken at real time, and seconds more of it must not push the answer past
# the TTL.
LATE_S = 4.0


def call(name: str, **arguments: Any) -> str:
    return f"{name} {json.dumps(arguments)}"


async def reply(conv: Conversation, within: float = REPLY_WITHIN_S) -> dict[str, Any]:
    """Events until the model's reply ends: a ``response.done`` with text, or not completed
    (a response that only called tools ends completed and empty)."""
    while True:
        event = await conv.event(within)
        if event["type"] == "response.done" and (
            event.get("text") or event.get("status") != "completed"
        ):
            return event


async def plain_turn(ctx: SessionContext, conv: Conversation) -> None:
    ctx.turn += "/plain"
    sent_at = ctx.clock.now()
    await conv.send("text.send", text=f"hello {ctx.label()}")
    first_delta: float | None = None
    while True:
        event = await conv.event(REPLY_WITHIN_S)
        if event["type"] == "text.delta" and first_delta is None:
            first_delta = ctx.clock.now()
        if event["type"] == "response.done" and (
            event.get("text") or event.get("status") != "completed"
        ):
            break
    if first_delta is not None and event.get("status") == "completed":
        ctx.sample("text", sent_at, first_delta)


async def tool_turn(ctx: SessionContext, conv: Conversation, variant: str) -> None:
    """``count``, ``batch``, ``background``, or one of ``TOOL_FAULTS``."""
    ctx.turn += f"/{variant}"
    label = ctx.label()
    if variant == "batch":
        text = "/tools " + " ;; ".join(
            [call("soak_count", label=label), call("soak_sleep", label=label + "b", ms=300)]
        )
    elif variant == "background":
        text = "/tool " + call("soak_background", label=label, ms=ctx.rng.randint(500, 3000))
    elif variant == "tool_slow":
        text = "/tool " + call("soak_sleep", label=label, ms=SLOW_MS)
    elif variant == "tool_hang":
        text = "/tool " + call("soak_hang", label=label)
    elif variant == "tool_raise":
        text = "/tool " + call("soak_raise", label=label)
    else:
        text = "/tool " + call("soak_count", label=label)
    await conv.send("text.send", text=text)
    await reply(conv)
    if variant == "background":
        await _background_result(ctx, conv)


async def _background_result(ctx: SessionContext, conv: Conversation) -> None:
    """After the acknowledgement: the work's ``tool.finished``, then the reply that takes its
    result up (when the model answers it: ``silent`` would not)."""
    started = [c for c in ctx.record.calls.values() if c.name == "soak_background"]
    if not started:
        return
    target = started[-1]
    deadline = ctx.clock.now() + REPLY_WITHIN_S
    while target.finished_at is None:
        await conv.event(max(deadline - ctx.clock.now(), 0.01))
    await reply(conv, max(deadline - ctx.clock.now(), 0.01))


async def confirm_turn(ctx: SessionContext, conv: Conversation, variant: str) -> None:
    """``approve``, ``reject``; or a fault: ``confirm_late`` (approved ``LATE_S`` after the
    request), ``confirm_twice`` (approved twice: the second is ``confirmation_not_found``),
    ``confirm_expired`` (answered after ``confirmation.resolved`` ``expired``: the answer is
    ``confirmation_expired``)."""
    ctx.turn += f"/confirm {variant}"
    await conv.send("text.send", text="/tool " + call("soak_confirm", label=ctx.label()))
    requested: dict[str, Any] | None = None
    requested_at = 0.0
    answered = False
    while requested is None or not answered:
        event = await conv.event(REPLY_WITHIN_S)
        if event["type"] == "confirmation.requested":
            requested, requested_at = event, ctx.clock.now()
        elif event["type"] == "response.done" and (
            event.get("text") or event.get("status") != "completed"
        ):
            answered = True
    cid = requested["confirmation_id"]
    since = ctx.clock.now()
    if variant == "confirm_expired":
        resolved = await conv.until("confirmation.resolved", 60.0, confirmation_id=cid)
        if resolved.get("decision") != "expired":
            ctx.record.problem(f"{variant}: resolved {resolved.get('decision')}")
        await _soft_reply(conv)  # the model is told it expired
        since = ctx.clock.now()
        await conv.send("confirmation.respond", confirmation_id=cid, decision="approve")
        await _expect_error(ctx, conv, "confirmation_expired", since, variant)
        return
    if variant == "confirm_late":
        early = await _idle(conv, requested_at + LATE_S - ctx.clock.now(), confirmation_id=cid)
        if early is not None:  # closed before its answer, within the TTL: nothing to answer
            waited = ctx.clock.now() - requested_at
            ctx.record.problem(
                f"confirm_late: resolved {early.get('decision')} {waited:.1f} s after the "
                "request, before the answer"
            )
            return
    decision = "reject" if variant == "reject" else "approve"
    await conv.send("confirmation.respond", confirmation_id=cid, decision=decision)
    if variant == "confirm_twice":
        await conv.send("confirmation.respond", confirmation_id=cid, decision=decision)
    resolved = await conv.until("confirmation.resolved", REPLY_WITHIN_S, confirmation_id=cid)
    expected = "rejected" if decision == "reject" else "approved"
    if resolved.get("decision") != expected:
        ctx.record.problem(f"confirmation {variant}: resolved {resolved.get('decision')}")
        return  # (an expired one is not answered by the model: no reply to wait for)
    await reply(conv)
    if variant == "confirm_twice":
        await _expect_error(ctx, conv, "confirmation_not_found", since, variant)


async def _soft_reply(conv: Conversation) -> None:
    with contextlib.suppress(TimeoutError):
        await reply(conv, 10.0)


async def _idle(
    conv: Conversation, seconds: float, *, confirmation_id: str
) -> dict[str, Any] | None:
    """Read events for a while without doing anything (the user is slow); the
    ``confirmation.resolved`` of ``confirmation_id`` if it comes meanwhile (then at once)."""
    deadline = conv.clock.now() + seconds
    while (left := deadline - conv.clock.now()) > 0:
        try:
            event = await conv.event(left)
        except TimeoutError:
            return None
        if (
            event["type"] == "confirmation.resolved"
            and event.get("confirmation_id") == confirmation_id
        ):
            return event
    return None


async def _expect_error(
    ctx: SessionContext, conv: Conversation, code: str, since: float, variant: str
) -> None:
    """The error ``code`` came after ``since`` (perhaps already: events are read in order)."""
    deadline = ctx.clock.now() + 10.0
    while not any(at >= since and seen == code for at, seen in ctx.record.errors):
        left = deadline - ctx.clock.now()
        if left <= 0:
            ctx.record.problem(f"{variant}: no {code} error")
            return
        try:
            await conv.event(left)
        except TimeoutError:
            continue
