"""Echo peers for the Autobahn TestSuite cases, run offline by ``kosoku``.

Used by ``python -m tests.autobahn`` (``__main__.py``), which ``test_autobahn.py`` and
``scripts/autobahn`` run in a process of their own: kosoku stays out of pytest's process.

Six targets, each an echo (text back as text, binary as binary, close when the peer closes):

- servers, driven by kosoku's fuzzing client (``run_fuzzingclient``): ours (aiohttp answers the
  upgrade, ``gateway.edges.socket.ClientSocket`` takes the connection over, as
  ``NativeRoutes.session_socket`` does), ``websockets``' server, aiohttp's ``WebSocketResponse``;
- clients, driven by kosoku's fuzzing server (``run_fuzzingserver``): ours
  (``rfc6455.client.connect``, as the OpenAI upstream opens it), ``websockets``'
  client, aiohttp's ``ws_connect``. A client under test asks ``/getCaseCount``, runs case N on
  ``/runCase?case=N&agent=NAME``, then ends the run on ``/updateReports?agent=NAME``.

Cases 1-7, 9 and 10: 12 and 13 are permessage-deflate, which the gateway does not negotiate.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from kosoku import FailureError, run_fuzzingclient, run_fuzzingserver
from websockets.asyncio.client import connect as websockets_connect
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as websockets_serve
from websockets.exceptions import ConnectionClosed as WebsocketsClosed
from websockets.exceptions import WebSocketException

from gateway.edges.socket import ClientSocket
from rfc6455.client import ConnectionClosed, HandshakeError, connect

__all__ = [
    "CASES",
    "CLIENTS",
    "MAX_MESSAGE",
    "SERVERS",
    "VERDICTS",
    "CaseVerdict",
    "run_client",
    "run_server",
    "verdict_counts",
]

CASES: tuple[str, ...] = ("1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*")
# Cases 9.1.6 and 9.2.6 send 16 MiB messages: the harness's limit only, not the gateway's.
MAX_MESSAGE = 20 * 1024 * 1024
VERDICTS: tuple[str, ...] = ("OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED", "FAILED")
CASE_TIMEOUT_S = 120.0  # one case, however slow; the whole run is bounded by the case count
HOST = "127.0.0.1"


@dataclass(frozen=True)
class CaseVerdict:
    """One case's outcome: ``verdict`` is one of ``VERDICTS``."""

    case_id: str
    description: str
    verdict: str
    behavior: str
    behavior_close: str
    result: str
    result_close: str

    def line(self) -> str:
        first = re.sub(r"<[^>]+>", "", self.description.split("\n", 1)[0]).strip()
        return (
            f"{self.case_id} [{self.behavior}/{self.behavior_close}] {first} "
            f"-- {self.result} {self.result_close}"
        )


def _verdict(result: Any) -> CaseVerdict:
    """A ``kosoku`` ``CaseResult`` as one of ``VERDICTS``: its ``behavior``, except that a case
    kosoku does not count as passed (the exchange or the closing handshake not acceptable:
    ``ERROR``, a wrong close code, an unclean close) is ``FAILED``."""
    behavior = result.behavior.value
    verdict = behavior
    if behavior != "UNIMPLEMENTED" and (behavior not in VERDICTS or not result.passed):
        verdict = "FAILED"
    return CaseVerdict(
        case_id=result.case_id,
        description=result.description,
        verdict=verdict,
        behavior=behavior,
        behavior_close=result.behavior_close.value,
        result=result.result,
        result_close=result.result_close,
    )


def verdict_counts(verdicts: Sequence[CaseVerdict]) -> dict[str, int]:
    counts = Counter(v.verdict for v in verdicts)
    return {name: counts.get(name, 0) for name in VERDICTS}


# -- servers under test ------------------------------------------------------------------------

ServerFactory = Callable[[], contextlib.AbstractAsyncContextManager[str]]


async def _ours_echo(request: web.Request) -> web.StreamResponse:
    # As NativeRoutes.session_socket accepts; no keepalive (a ping of ours in the middle of a
    # case is an event the case does not expect), no control-frame budget (cases 2.x ping).
    sock = await ClientSocket.accept(request, max_message=MAX_MESSAGE, keepalive_s=0)
    try:
        while (message := await sock.receive()) is not None:
            if isinstance(message, str):
                await sock.send_text(message)
            else:
                await sock.send_bytes(message)
    except ConnectionError:
        pass
    await sock.close()
    return sock.response


async def _aiohttp_echo(request: web.Request) -> web.StreamResponse:
    ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE, compress=False)
    await ws.prepare(request)
    async for message in ws:
        if message.type is aiohttp.WSMsgType.TEXT:
            await ws.send_str(message.data)
        elif message.type is aiohttp.WSMsgType.BINARY:
            await ws.send_bytes(message.data)
    return ws


@contextlib.asynccontextmanager
async def _aiohttp_app(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, HOST, 0)
    await site.start()
    try:
        host, port = runner.addresses[0][:2]
        yield f"ws://{host}:{port}"
    finally:
        await runner.cleanup()


def ours_server() -> contextlib.AbstractAsyncContextManager[str]:
    return _aiohttp_app(_ours_echo)


def aiohttp_server() -> contextlib.AbstractAsyncContextManager[str]:
    return _aiohttp_app(_aiohttp_echo)


@contextlib.asynccontextmanager
async def websockets_server() -> AsyncIterator[str]:
    async def echo(ws: ServerConnection) -> None:
        with contextlib.suppress(WebsocketsClosed):
            async for message in ws:
                await ws.send(message)

    async with websockets_serve(
        echo, HOST, 0, compression=None, max_size=MAX_MESSAGE, ping_interval=None
    ) as server:
        port = server.sockets[0].getsockname()[1]
        yield f"ws://{HOST}:{port}"


SERVERS: dict[str, ServerFactory] = {
    "ours": ours_server,
    "websockets": websockets_server,
    "aiohttp": aiohttp_server,
}


async def run_server(
    factory: ServerFactory, cases: Sequence[str] = CASES, *, concurrency: int = 1
) -> list[CaseVerdict]:
    """Every case in ``cases`` against the server ``factory`` starts."""
    async with factory() as url:
        try:
            results = await run_fuzzingclient(url, list(cases), concurrency=concurrency)
        except FailureError as failure:
            results = failure.results
    return [_verdict(result) for result in results]


# -- clients under test ------------------------------------------------------------------------

# echo(url) runs one connection: every message back until the server closes; first(url) returns
# the first message (the case count).
Echo = Callable[[str], Awaitable[None]]
First = Callable[[str], Awaitable[str]]


@dataclass(frozen=True)
class ClientTarget:
    echo: Echo
    first: First


async def _ours_echo_client(url: str) -> None:
    # As the OpenAI upstream connects (upstream_socket.open_socket), without its keepalive
    # (a ping of ours in the middle of a case is an event the case does not expect).
    conn = await connect(url, {}, max_message=MAX_MESSAGE, keepalive_s=0)
    try:
        while True:
            await conn.send(await conn.recv())
    except ConnectionClosed:
        pass
    await conn.close()


async def _ours_first(url: str) -> str:
    conn = await connect(url, {}, max_message=MAX_MESSAGE, keepalive_s=0)
    try:
        message = await conn.recv()
    finally:
        await conn.close()
    assert isinstance(message, str)
    return message


async def _websockets_echo_client(url: str) -> None:
    async with websockets_connect(
        url, compression=None, max_size=MAX_MESSAGE, ping_interval=None
    ) as ws:
        with contextlib.suppress(WebsocketsClosed):
            async for message in ws:
                await ws.send(message)


async def _websockets_first(url: str) -> str:
    async with websockets_connect(url, compression=None) as ws:
        message = await ws.recv()
    assert isinstance(message, str)
    return message


async def _aiohttp_echo_client(url: str) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, max_msg_size=MAX_MESSAGE, compress=0) as ws,
    ):
        async for message in ws:
            if message.type is aiohttp.WSMsgType.TEXT:
                await ws.send_str(message.data)
            elif message.type is aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(message.data)


async def _aiohttp_first(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        message = await ws.receive()
    assert message.type is aiohttp.WSMsgType.TEXT
    return str(message.data)


CLIENTS: dict[str, ClientTarget] = {
    "ours": ClientTarget(_ours_echo_client, _ours_first),
    "websockets": ClientTarget(_websockets_echo_client, _websockets_first),
    "aiohttp": ClientTarget(_aiohttp_echo_client, _aiohttp_first),
}


async def run_client(
    target: ClientTarget, agent: str, cases: Sequence[str] = CASES
) -> list[CaseVerdict]:
    """Every case in ``cases`` against the client ``target``, run as Autobahn's clients do."""
    async with run_fuzzingserver(list(cases), host=HOST, port=0) as server:
        base = f"ws://{server.address}:{server.port}"
        async with asyncio.timeout(CASE_TIMEOUT_S):
            count = int(await target.first(f"{base}/getCaseCount"))
        for case in range(1, count + 1):
            async with asyncio.timeout(CASE_TIMEOUT_S):
                # A case may fail the connection on purpose: that is the verdict's business.
                with contextlib.suppress(
                    OSError, HandshakeError, aiohttp.ClientError, WebSocketException
                ):
                    await target.echo(f"{base}/runCase?case={case}&agent={agent}")
        async with asyncio.timeout(CASE_TIMEOUT_S):
            await target.echo(f"{base}/updateReports?agent={agent}")
            try:
                results = await server.get_result()
            except FailureError as failure:
                results = failure.results
    return [_verdict(result) for result in results]
