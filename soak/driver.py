"""The load: ``sessions`` slots, each running one session after another until the soak stops,
so that many stay alive while they churn. A slot draws the next session's kind from the mix
(browser voice on OpenAI Realtime, text on every provider, and phone calls) from a random stream
of its own, derived from the seed (``soak.schedule``): the n-th session of a slot is of the same
kind, and draws its turns from the same stream, in every run with that seed. Slots start spread
over the ramp. A session whose logic raises is a defect of the driver: its traceback goes to the
driver's log (scanned like every other) and the session records the problem."""

from __future__ import annotations

import asyncio
import logging
import random
import traceback

import aiohttp

from soak.context import SessionContext, SoakLogs
from soak.nodes import NodeDirectory
from soak.phone import run_call
from soak.records import Clock, SessionRecord
from soak.schedule import SessionDraw, draw_session, stream
from soak.sessions import run_session

__all__ = ["MIX", "Driver"]

_log = logging.getLogger("soak.driver")

# (kind, provider, weight)
MIX = (
    ("voice_openai", "openai", 0.25),
    ("text_local", "local", 0.10),
    ("text_openai", "openai", 0.15),
    ("text_gemini", "gemini", 0.15),
    ("text_chat", "chat", 0.15),
    ("phone", "twilio", 0.20),
)


class Driver:
    def __init__(self, nodes: NodeDirectory, clock: Clock, seed: int, logs: SoakLogs) -> None:
        self.nodes = nodes
        self.clock = clock
        self.seed = seed
        self.logs = logs
        self.stopping = asyncio.Event()
        self.records: list[SessionRecord] = []
        self.live: dict[int, SessionContext] = {}

    def live_sessions(self) -> list[SessionContext]:
        return list(self.live.values())

    async def run(self, slots: int, ramp_s: float) -> None:
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        async with aiohttp.ClientSession(connector=connector) as http:
            tasks = [
                asyncio.create_task(
                    self._slot(http, n, n * ramp_s / max(slots, 1)), name=f"slot{n}"
                )
                for n in range(slots)
            ]
            await asyncio.gather(*tasks)

    async def _slot(self, http: aiohttp.ClientSession, slot: int, delay_s: float) -> None:
        try:
            await asyncio.wait_for(self.stopping.wait(), delay_s)
            return
        except TimeoutError:
            pass
        rng = stream(self.seed, f"slot:{slot}")
        ordinal = 0
        while not self.stopping.is_set():
            ordinal += 1
            await self._one_session(http, slot, ordinal, draw_session(rng, MIX))

    def _next_record(self, slot: int, ordinal: int, draw: SessionDraw) -> SessionRecord:
        number = len(self.records) + 1
        record = SessionRecord(
            number,
            draw.kind,
            draw.provider,
            f"s{number}",
            self.clock.now(),
            slot=slot,
            ordinal=ordinal,
        )
        self.records.append(record)
        return record

    async def _one_session(
        self, http: aiohttp.ClientSession, slot: int, ordinal: int, draw: SessionDraw
    ) -> None:
        record = self._next_record(slot, ordinal, draw)
        ctx = SessionContext(
            record, random.Random(draw.turns_seed), self.clock, self.logs, self.stopping
        )
        nodes = self.nodes.with_rng(random.Random(draw.nodes_seed))
        self.live[record.number] = ctx
        try:
            if record.kind == "phone":
                await run_call(ctx, nodes, http)
            else:
                await run_session(ctx, nodes, http)
        except Exception as error:
            _log.error("session s%d crashed:\n%s", record.number, traceback.format_exc())
            record.problem(f"the driver's session logic crashed: {error!r}")
        finally:
            del self.live[record.number]
        if record.refused is not None:  # no node would take it: do not spin
            await asyncio.sleep(1.0)
