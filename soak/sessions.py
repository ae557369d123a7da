"""The life of one soak session on the client protocol: start, a few turns with pauses between
them, a fault when the scheduler asks for one, and ``session.end``. A lost socket is resumed on
another node and the session goes on with its next turn; ``session.ended`` from the gateway ends
it early (its reason is recorded and judged later). A session of a kind that talks to OpenAI
names its model alias (``soak.routing``) instead of the provider, and goes on with its turns on
whichever target serves it (``session.started.provider``, ``session.provider_changed``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp

from soak import turns
from soak.context import SessionContext
from soak.conversation import Conversation, Interrupted, SessionOver
from soak.nodes import NodeDirectory
from soak.routing import alias_of
from soak.session_faults import meet_fault
from soak.voice import Microphone, voice_turn

__all__ = ["run_session"]

TURNS = (3, 7)
PAUSE_S = (0.5, 2.5)
Turn = Callable[[], Awaitable[None]]


def _tag_instructions(ctx: SessionContext) -> str:
    return f"soak-tag:{ctx.record.tag} A soak test session."


async def run_session(
    ctx: SessionContext, nodes: NodeDirectory, http: aiohttp.ClientSession
) -> None:
    record = ctx.record
    conv = Conversation(record, nodes, http, ctx.clock)
    voice = record.kind.startswith("voice")
    record.alias = alias_of(record.kind)
    start: dict[str, object] = {"instructions": _tag_instructions(ctx)}
    if record.alias is not None:
        start["model"] = record.alias
    else:
        start["provider"] = record.provider
    rate = ctx.rng.choice((24000, 24000, 16000))
    if voice:
        start["audio"] = {"input_rate": rate, "output_rate": 24000}
    if not await conv.open("voice" if voice else "text", **start):
        return
    mic = Microphone(conv, rate) if voice else None
    try:
        await _turns(ctx, conv, mic)
        if not conv.ended and record.lost is None:
            await conv.end()
    finally:
        if mic is not None:
            await mic.close()
        await conv.close()


async def _turns(ctx: SessionContext, conv: Conversation, mic: Microphone | None) -> None:
    record = ctx.record
    for _ in range(ctx.rng.randint(*TURNS)):
        if ctx.stopping.is_set():
            return
        ctx.in_turn = True
        try:
            fault = ctx.take_fault()
            ctx.turn = fault or "normal"
            if fault is not None:
                await meet_fault(ctx, conv, fault, voice=mic is not None)
            else:
                await _normal_turn(ctx, conv, mic)
            record.turns += 1
        except SessionOver:
            return
        except Interrupted:
            if not await conv.recover():
                return
        except TimeoutError as error:
            record.problem(
                f"turn {record.turns} ({ctx.turn}) got stuck {error or ''} after "
                f"{list(conv.recent)}"
            )
            if not await _resync(conv):
                return
        finally:
            ctx.in_turn = False
        try:
            await _pause(ctx, conv)
        except SessionOver:
            return
        except Interrupted:
            if not await conv.recover():
                return


async def _normal_turn(ctx: SessionContext, conv: Conversation, mic: Microphone | None) -> None:
    roll = ctx.rng.random()
    if mic is not None and roll < 0.6:
        await voice_turn(ctx, conv, mic)
    elif roll < 0.35 and mic is None:
        await turns.plain_turn(ctx, conv)
    elif roll < 0.75:
        await turns.tool_turn(ctx, conv, "count")
    elif roll < 0.83:
        await turns.tool_turn(ctx, conv, "batch")
    elif roll < 0.91:
        await turns.tool_turn(ctx, conv, "background")
    else:
        await turns.confirm_turn(ctx, conv, "reject" if ctx.rng.random() < 0.2 else "approve")


async def _pause(ctx: SessionContext, conv: Conversation) -> None:
    """Think between turns, reading what comes meanwhile (late results, moves)."""
    deadline = ctx.clock.now() + ctx.rng.uniform(*PAUSE_S)
    while (left := deadline - ctx.clock.now()) > 0 and not ctx.stopping.is_set():
        try:
            await conv.event(left)
        except TimeoutError:
            return


async def _resync(conv: Conversation) -> bool:
    """After a stuck turn: read what is pending until 3 s pass quietly; False if the session
    is over."""
    try:
        while True:
            await conv.event(3.0)
    except TimeoutError:
        return True
    except SessionOver:
        return False
    except Interrupted:
        return await conv.recover()
