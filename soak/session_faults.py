"""Faults a soak session brings on itself when the scheduler asks, at its next turn: a lost
socket resumed on the other node, malformed and oversized frames, and a client that stops
reading. Each is logged when it happens (``SessionContext.fault_done``); the session then goes
on, and its next turns show whether it was harmed (its own bad input must cost it only the
error it earned; another session must not notice at all)."""

from __future__ import annotations

import asyncio

from soak import turns
from soak.context import SessionContext
from soak.conversation import Conversation, Interrupted

__all__ = ["CONFIRM_FAULTS", "SESSION_FAULTS", "meet_fault"]

TEXT_LIMIT = 256 * 1024  # GATEWAY_MAX_TEXT_FRAME's default
BINARY_LIMIT = 64 * 1024  # GATEWAY_MAX_BINARY_FRAME's default
TRANSPORT_LIMIT = TEXT_LIMIT + 64 * 1024  # beyond it the socket closes with 1009
STOP_READING_S = 8.0
SESSION_FAULTS = {"drop_resume", "malformed", "oversized", "oversized_close", "stop_reading"}
CONFIRM_FAULTS = {"confirm_late", "confirm_twice", "confirm_expired"}


async def meet_fault(ctx: SessionContext, conv: Conversation, kind: str, *, voice: bool) -> None:
    if kind in turns.TOOL_FAULTS:
        ctx.fault_done(kind)
        await turns.tool_turn(ctx, conv, kind)
    elif kind in CONFIRM_FAULTS:
        ctx.fault_done(kind)
        await turns.confirm_turn(ctx, conv, kind)
    elif kind == "drop_resume":
        await _drop_and_resume(ctx, conv)
    elif kind == "malformed":
        await _malformed(ctx, conv)
    elif kind == "oversized":
        await _oversized(ctx, conv, voice=voice)
    elif kind == "oversized_close":
        await _oversized_close(ctx, conv)
    elif kind == "stop_reading":
        await _stop_reading(ctx, conv)
    else:
        raise ValueError(f"unknown session fault {kind}")


async def _drop_and_resume(ctx: SessionContext, conv: Conversation) -> None:
    link = conv.link
    if link is None:
        return
    await link.drop()
    before = link.node
    resumed = await conv.recover()
    after = conv.link.node if resumed and conv.link is not None else "-"
    ctx.fault_done("drop_resume", resumed, f"node {before} -> {after}")
    if resumed:
        await turns.plain_turn(ctx, conv)


async def _malformed(ctx: SessionContext, conv: Conversation) -> None:
    ctx.record.bad_input = True
    link = conv.link
    if link is None:
        raise Interrupted
    since = ctx.clock.now()
    await link.send_text("{not json")
    await link.send_text('{"type": "soak.no_such_event"}')
    await link.send_text('{"type": "text.send", "text": 5}')
    ctx.fault_done("malformed", detail="invalid JSON, an unknown type, a wrong field type")
    for code in ("invalid_json", "unknown_event", "invalid_event"):
        await turns._expect_error(ctx, conv, code, since, "malformed")
    await turns.plain_turn(ctx, conv)


async def _oversized(ctx: SessionContext, conv: Conversation, *, voice: bool) -> None:
    ctx.record.bad_input = True
    link = conv.link
    if link is None:
        raise Interrupted
    since = ctx.clock.now()
    if voice:
        await link.send_audio(bytes(BINARY_LIMIT + 4096))
        detail = f"a binary frame of {BINARY_LIMIT + 4096} bytes"
    else:
        await conv.send("text.send", text="x" * (TEXT_LIMIT + 4096))
        detail = f"a text frame of about {TEXT_LIMIT + 4096} bytes"
    ctx.fault_done("oversized", detail=detail)
    await turns._expect_error(ctx, conv, "payload_too_large", since, "oversized")
    await turns.plain_turn(ctx, conv)


async def _oversized_close(ctx: SessionContext, conv: Conversation) -> None:
    """A frame over the transport limit: the socket closes with 1009, the session is parked
    and resumed."""
    ctx.record.bad_input = True
    link = conv.link
    if link is None:
        raise Interrupted
    await link.send_text('{"type": "text.send", "text": "' + "y" * TRANSPORT_LIMIT + '"}')
    try:
        while True:
            await conv.event(10.0)
    except Interrupted:
        code = link.close_code
    except TimeoutError:
        ctx.fault_done("oversized_close", False, "the socket stayed open")
        return
    resumed = await conv.recover()
    ctx.fault_done("oversized_close", resumed and code == 1009, f"closed {code}")
    if resumed:
        await turns.plain_turn(ctx, conv)


async def _stop_reading(ctx: SessionContext, conv: Conversation) -> None:
    link = conv.link
    if link is None:
        raise Interrupted
    await conv.send("text.send", text=f"/say {' '.join(['words'] * 200)}")
    link.pause_reading()
    ctx.fault_done("stop_reading", detail=f"{STOP_READING_S:g} s without reading")
    await asyncio.sleep(STOP_READING_S)
    link.resume_reading()
    await turns.reply(conv)
    await turns.plain_turn(ctx, conv)
