"""A simulated caller whose stream the gateway closed (its node drained) never waits to finish
saying something: the line's pacer has stopped, and nothing would ever say it. The soak saw a
phone session "never ended" when the close came between the driver's check and its ``say``."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from soak.phone import PhoneLine


class ClosedSocket:
    """A WebSocket the gateway has just closed: every read says so, every send goes nowhere."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def receive(self) -> aiohttp.WSMessage:
        return aiohttp.WSMessage(aiohttp.WSMsgType.CLOSED, None, None)

    async def send_str(self, data: str) -> None:
        self.sent.append(data)

    async def close(self) -> bool:
        return True


async def _closed_line() -> PhoneLine:
    line = PhoneLine(ClosedSocket(), "MZsoak")  # type: ignore[arg-type]
    await asyncio.wait_for(line.closed.wait(), 1.0)
    return line


def test_saying_something_on_a_closed_stream_is_over_at_once() -> None:
    async def scenario() -> Any:
        line = await _closed_line()
        return await asyncio.wait_for(line.say(800), 1.0)

    assert isinstance(asyncio.run(scenario()), float)


def test_saying_something_while_the_stream_is_open_waits_for_the_speech() -> None:
    class OpenSocket(ClosedSocket):
        async def receive(self) -> aiohttp.WSMessage:
            await asyncio.sleep(3600)
            raise AssertionError("unreachable")

    async def scenario() -> bool:
        line = PhoneLine(OpenSocket(), "MZsoak")  # type: ignore[arg-type]
        spoken = line.say(100)
        done_early = spoken.done()
        await asyncio.wait_for(spoken, 2.0)  # five 20 ms frames, at real time
        await line.close()
        return done_early

    assert asyncio.run(scenario()) is False
