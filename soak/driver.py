"""The load: ``sessions`` slots, each running one session after another until the soak stops,
so that many stay alive while they churn. A slot draws the next session's kind from the mix:
browser voice on OpenAI Realtime, text on every provider, and phone calls. Slots start spread
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
    def __init__(
        self, nodes: NodeDirectory, clock: Clock, rng: random.Random, logs: SoakLogs
    ) -> None:
        self.nodes = nodes
        self.clock = clock
        self.rng = rng
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
                asyncio.create_task(self._slot(http, n * ramp_s / max(slots, 1)), name=f"slot{n}")
                for n in range(slots)
            ]
            await asyncio.gather(*tasks)

    async def _slot(self, http: aiohttp.ClientSession, delay_s: float) -> None:
        try:
            await asyncio.wait_for(self.stopping.wait(), delay_s)
            return
        except TimeoutError:
            pass
        while not self.stopping.is_set():
            await self._one_session(http)

    def _next_record(self) -> SessionRecord:
        kinds, providers, weights = zip(*MIX, strict=True)
        index = self.rng.choices(range(len(kinds)), weights=weights)[0]
        number = len(self.records) + 1
        record = SessionRecord(
            number, kinds[index], providers[index], f"s{number}", self.clock.now()
        )
        self.records.append(record)
        return record

    async def _one_session(self, http: aiohttp.ClientSession) -> None:
        record = self._next_record()
        rng = random.Random(self.rng.random())
        ctx = SessionContext(record, rng, self.clock, self.logs, self.stopping)
        self.live[record.number] = ctx
        try:
            if record.kind == "phone":
                await run_call(ctx, self.nodes, http)
            else:
                await run_session(ctx, self.nodes, http)
        except Exception as error:
            _log.error("session s%d crashed:\n%s", record.number, traceback.format_exc())
            record.problem(f"the driver's session logic crashed: {error!r}")
        finally:
            del self.live[record.number]
        if record.refused is not None:  # no node would take it: do not spin
            await asyncio.sleep(1.0)
