"""Found by the soak: a drained node logged aiohttp's "Unhandled exception" (``InvalidStateError``
in ``RequestHandler._handle_request``) as it stopped. aiohttp's shutdown waits a while for the
requests in progress; a handler that returned in the loop iteration in which that wait timed out
found aiohttp's waiter already cancelled. On a busy machine the handler's own timer (here: the
2 s wait for a client's close frame) and aiohttp's fire in one iteration.

The gateway now finishes its handlers before aiohttp's shutdown (``on_shutdown``,
``gateway.handlers_in_flight``). The first test drives the sequence of ``gateway serve`` (drain,
then ``runner.cleanup()``) with a client that never answers the close frame, and stalls the
event loop across both timeouts the way a loaded machine does: without the fix it logs the
traceback every time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from harness import SECRET, token

from gateway.app import build_server
from gateway.config import Settings
from gateway.edges.socket import CLOSE_TIMEOUT_S
from gateway.handlers_in_flight import Finished, HandlersInFlight
from gateway.registry import Registry


def aiohttp_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("aiohttp")]


@pytest.fixture
def aiohttp_error_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.ERROR, logger="aiohttp.server")
    return caplog


async def test_a_drained_node_whose_client_never_answers_the_close_stops_without_a_traceback(
    full_registry: Registry, tmp_path: Path, aiohttp_error_log: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        auth="jwt",
        auth_secret=SECRET,
        data_dir=tmp_path,
        provider="local",
        local_pace=0.0,
        drain_grace_s=0.1,
    )
    server = build_server(settings, registry=full_registry)
    runner = server.runner()
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(
            f"http://127.0.0.1:{port}/v1/session",
            headers={"Authorization": f"Bearer {token()}"},
            autoclose=False,  # the close frame is read, never answered
        )
        await ws.send_json({"type": "session.start", "mode": "text"})
        assert (await ws.receive_json(timeout=5))["type"] == "session.started"

        await server.drain()  # as `gateway serve` on SIGTERM: the session ends (shutdown)
        ended = await ws.receive_json(timeout=5)
        assert (ended["type"], ended["reason"]) == ("session.ended", "shutdown")
        closing = await ws.receive(timeout=5)
        assert (closing.type, closing.data) == (aiohttp.WSMsgType.CLOSE, 1000)
        # The handler now waits CLOSE_TIMEOUT_S for our close frame; the runner's cleanup
        # begins (aiohttp's own wait: 2 s, GatewayServer.runner).
        cleanup = asyncio.create_task(runner.cleanup())
        await asyncio.sleep(CLOSE_TIMEOUT_S - 0.5)
        # A loaded machine: the loop wakes only after both timers are due.
        time.sleep(1.0)  # noqa: ASYNC251 (the loop is stalled on purpose)
        await asyncio.wait_for(cleanup, timeout=15)
        await ws.close()
    assert aiohttp_errors(aiohttp_error_log) == []


EndlessApp = tuple[HandlersInFlight, web.AppRunner, str, asyncio.Event]


@pytest.fixture
async def endless_handler_app() -> AsyncIterator[EndlessApp]:
    """A bare aiohttp app whose one handler never returns (``entered`` once it runs), behind
    the tracking middleware."""
    handlers = HandlersInFlight()
    entered = asyncio.Event()

    async def endless(_: web.Request) -> web.Response:
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    app = web.Application(middlewares=[handlers.middleware])
    app.router.add_post("/endless", endless)
    runner = web.AppRunner(app, shutdown_timeout=2.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    yield handlers, runner, f"http://127.0.0.1:{port}/endless", entered
    await runner.cleanup()


async def test_handlers_that_outlast_the_grace_are_cancelled_before_aiohttp_waits_for_them(
    endless_handler_app: EndlessApp, aiohttp_error_log: pytest.LogCaptureFixture
) -> None:
    handlers, runner, url, entered = endless_handler_app
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        request = asyncio.create_task(http.post(url))  # a POST: the client does not retry it
        await asyncio.wait_for(entered.wait(), 5)
        assert len(handlers) == 1
        assert await handlers.finish(grace_s=0.2, cancel_wait_s=1.0) == Finished(1, 0)
        assert len(handlers) == 0
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await request  # the connection is dropped: no answer
        started = time.monotonic()
        await runner.cleanup()  # nothing left in progress: aiohttp does not wait its 2 s
        assert time.monotonic() - started < 1.0
    assert aiohttp_errors(aiohttp_error_log) == []


async def test_handlers_that_return_within_the_grace_are_left_alone() -> None:
    handlers = HandlersInFlight()
    entered, release = asyncio.Event(), asyncio.Event()

    async def brief(_: web.Request) -> web.Response:
        entered.set()
        await release.wait()
        return web.Response(text="done")

    app = web.Application(middlewares=[handlers.middleware])
    app.router.add_get("/brief", brief)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as http:
            request = asyncio.create_task(http.get(f"http://127.0.0.1:{port}/brief"))
            await asyncio.wait_for(entered.wait(), 5)
            asyncio.get_running_loop().call_later(0.1, release.set)
            assert await handlers.finish(grace_s=5.0, cancel_wait_s=1.0) == Finished()
            response = await request
            assert (response.status, await response.text()) == (200, "done")
    finally:
        await runner.cleanup()
