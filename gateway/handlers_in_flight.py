"""The request handlers still running, so that a shutdown finishes them before aiohttp does.

aiohttp's own shutdown (``AppRunner.cleanup``, then ``Server.shutdown(timeout)``) waits up to
its timeout for each connection's request in progress, then cancels it. A handler that returns
in the very loop iteration in which that wait times out, before the waiting task runs again,
makes aiohttp call ``set_result`` on the waiter it has just cancelled: ``InvalidStateError``,
logged by ``aiohttp.server`` as "Unhandled exception" (aiohttp 3.14,
``RequestHandler._handle_request``). The gateway's long-lived handlers (client sockets waiting
for a close handshake, phone calls playing their last words) return on timers of their own; on
a busy event loop a timer of theirs and aiohttp's fire together, and the race is lost.

So the gateway finishes its handlers itself, in ``on_shutdown`` (aiohttp runs it before its own
wait): every handler is given ``grace_s`` to return, the ones left are cancelled. aiohttp then
finds no request in progress and has nothing to wait for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = ["Finished", "HandlersInFlight"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Finished:
    """How the handlers ended: ``cancelled`` outlasted the grace; ``left`` even their
    cancellation (aiohttp's own shutdown takes those)."""

    cancelled: int = 0
    left: int = 0


class HandlersInFlight:
    """Every request's task from the moment its handler is entered until aiohttp has finished
    with it (``middleware``); ``finish`` waits for them, then cancels the rest."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        # aiohttp runs each request in a task of its own, which ends once aiohttp's bookkeeping
        # of the request ("in progress") is over: a done task is a finished request.
        task = asyncio.current_task()
        if task is not None and task not in self._tasks:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await handler(request)

    async def finish(self, grace_s: float, cancel_wait_s: float) -> Finished:
        """Wait up to ``grace_s`` for the handlers (those running now and any that begin
        meanwhile), cancel the ones left and wait up to ``cancel_wait_s`` for them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while (running := self._running()) and (left := deadline - loop.time()) > 0:
            await asyncio.wait(running, timeout=left)
        late = self._running()
        if not late:
            return Finished()
        for task in late:
            task.cancel()
        _, stuck = await asyncio.wait(late, timeout=cancel_wait_s)
        return Finished(cancelled=len(late), left=len(stuck))

    def _running(self) -> set[asyncio.Task[Any]]:
        current = asyncio.current_task()
        return {task for task in self._tasks if task is not current and not task.done()}
