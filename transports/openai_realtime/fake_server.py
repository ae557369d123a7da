"""A faithful fake OpenAI Realtime (GA) server over aiohttp, for tests and benchmarks.

The protocol lives in the pure ``FakeSession`` (``fake_session``); this module is the thin async
shell around it: it accepts the upgrade at ``<prefix>/realtime``, checks the key, feeds client
frames to the session, and carries out the actions it returns. Per connection there are:

- the handler task, which reads frames (text, or binary JSON) in order;
- one writer task, the only one that sends, so frames leave in the order the session made them
  (and so in ``event_id`` order); it also performs closes, after what was queued before;
- one delivery task per response, pulling ``next_step`` and waiting between steps (``pace``);
- timers: ``session.created`` (after ``created_delay_s``) and the session expiry.

Every frame in both directions is logged (``FakeConnection.log``, unless ``log_frames=False``)
and ``wait_for`` wakes on it, so tests wait for events instead of sleeping.

Run it alone with ``python -m transports.openai_realtime.fake_server --port P``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import orjson
from aiohttp import WSMsgType, web

from transports.openai_realtime.fake_session import FakeOptions, FakeSession
from transports.openai_realtime.fake_wire import Action, Begin, Close, Event, Halt, Send

__all__ = ["FakeConnection", "FakeOptions", "FakeRealtimeServer", "main"]

_log = logging.getLogger(__name__)
_SHUTDOWN_REASON = "server shutting down"
_BUG_REASON = "fake server error"
_CLOSE_GRACE_S = 2.0  # a peer that stopped reading can hold the writer; then the TCP goes
_HIGH_WATER = 64  # queued frames: a response's delivery waits above this, until the writer
_LOW_WATER = 16  # has brought the queue back down to this
_INSECURE_KEY_PROTOCOL = "openai-insecure-api-key."

_Outgoing = Event | Close | None  # None stops the writer


class FakeConnection:
    """One accepted WebSocket: the session, its frame log and the tasks that serve it."""

    def __init__(self, options: FakeOptions, request: web.Request, number: int) -> None:
        self.options = options
        self.number = number
        self.model: str = request.query.get("model", "")
        self.headers: Mapping[str, str] = request.headers
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self._request = request
        self._session = FakeSession(options, model=self.model, number=number, now_unix=time.time())
        self._by_type: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._changed = asyncio.Condition()
        self._waiters = 0
        self._outbox: asyncio.Queue[_Outgoing] = asyncio.Queue()
        self._drained = asyncio.Event()  # the outbox is at or below the low-water mark
        self._drained.set()
        self._closing = False  # a close is queued: nothing more is sent
        self._deliveries: dict[str, asyncio.Task[None]] = {}
        self._timers: list[asyncio.TimerHandle] = []
        self._greeter: asyncio.Task[None] | None = None

    # Test API -------------------------------------------------------------------------------

    @property
    def session(self) -> dict[str, Any]:
        """The effective session config (what ``session.updated`` carries)."""
        return self._session.config

    @property
    def items(self) -> list[dict[str, Any]]:
        """The conversation items, in order."""
        return self._session.items

    def received(self, type_: str) -> list[dict[str, Any]]:
        """Client events of that type, from the log."""
        return list(self._by_type.get(("in", type_), ()))

    def sent(self, type_: str) -> list[dict[str, Any]]:
        """Server events of that type, from the log."""
        return list(self._by_type.get(("out", type_), ()))

    async def wait_for(
        self,
        type_: str,
        count: int = 1,
        direction: str = "out",
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> dict[str, Any]:
        """The ``count``-th logged event of that type; ``TimeoutError`` if it does not come,
        ``ConnectionError`` if the connection closes without it."""
        if direction not in ("in", "out"):
            raise ValueError("direction is 'in' or 'out'")
        if not self.options.log_frames:
            raise RuntimeError("wait_for needs the frame log (log_frames=True)")
        key = (direction, type_)
        async with asyncio.timeout(timeout), self._changed:
            self._waiters += 1
            try:
                while len(self._by_type.get(key, ())) < count:
                    if self.closed.is_set():
                        raise ConnectionError(
                            f"connection closed ({self.close_code}) before {direction} "
                            f"{type_!r} #{count}"
                        )
                    await self._changed.wait()
            finally:
                self._waiters -= 1
        return self._by_type[key][count - 1]

    async def expire(self) -> None:
        """The session expires now: ``error`` ``session_expired``, then close 1001."""
        self._apply(self._session.expire())
        await self.closed.wait()

    async def drop(self, code: int = 1011, reason: str = "") -> None:
        """Abrupt server close: frames not yet sent are discarded."""
        while not self._outbox.empty():
            self._outbox.get_nowait()
        self._apply(self._session.shut_down())
        self._apply([Close(code, reason)])
        try:
            async with asyncio.timeout(_CLOSE_GRACE_S):
                await self.closed.wait()
        except TimeoutError:  # the writer is stuck behind a peer that does not read
            if self.close_code is None:
                self.close_code = 1006  # no close frame could be sent
            if (transport := self._request.transport) is not None:
                transport.abort()  # close() would wait to flush what the peer never reads
            await self.closed.wait()

    # Serving --------------------------------------------------------------------------------

    async def serve(self, ws: web.WebSocketResponse, *, beta: bool) -> None:
        loop = asyncio.get_running_loop()
        writer = asyncio.create_task(self._write(ws))
        try:
            if beta:
                self._apply(self._session.reject_beta())
            else:
                if self.options.session_created:
                    self._greeter = asyncio.create_task(self._greet())
                expiry = loop.call_later(self.options.max_duration_s, self._expire_now)
                self._timers.append(expiry)
            await self._read(ws)
        except Exception:
            _log.exception("fake realtime connection %d failed", self.number)
            self._apply([Close(1011, _BUG_REASON)])
        finally:
            for timer in self._timers:
                timer.cancel()
            self._session.shut_down()
            tasks = [*self._deliveries.values(), *([self._greeter] if self._greeter else [])]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._outbox.put_nowait(None)
            await writer
            if not ws.closed:
                await ws.close()
            if self.close_code is None:
                self.close_code = ws.close_code if ws.close_code is not None else 1006
            self.closed.set()
            await self._notify()

    async def _read(self, ws: web.WebSocketResponse) -> None:
        while True:
            message = await ws.receive()
            if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                await self._on_frame(message.data)
            elif message.type is WSMsgType.CLOSE:
                if self.close_code is None:  # the client closed first
                    self.close_code = int(message.data)
                return
            else:  # CLOSING (we closed), CLOSED or ERROR (the peer vanished)
                if self.close_code is None:
                    self.close_code = 1006
                return

    async def _on_frame(self, data: str | bytes) -> None:
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raw = data if isinstance(data, str) else data.decode("utf-8", "replace")
            self._record("in", {"type": None, "raw": raw[:200]})
            actions = self._session.invalid_frame(str(error))
        else:
            self._record("in", event if isinstance(event, dict) else {"type": None, "raw": event})
            actions = self._session.handle(event)
        self._apply(actions)
        await self._notify()

    async def _write(self, ws: web.WebSocketResponse) -> None:
        while (item := await self._outbox.get()) is not None:
            if self._outbox.qsize() <= _LOW_WATER:
                self._drained.set()
            if isinstance(item, Close):
                self.close_code = item.code
                await ws.close(code=item.code, message=item.reason.encode())
                return
            if ws.closed:
                continue
            try:
                await ws.send_frame(orjson.dumps(item), WSMsgType.TEXT)
            except ConnectionError:
                continue
            self._record("out", item)
            await self._notify()

    async def _greet(self) -> None:
        if self.options.created_delay_s > 0:
            await asyncio.sleep(self.options.created_delay_s)
        if not self._session.closed:
            self._apply(self._session.start())

    def _expire_now(self) -> None:
        self._apply(self._session.expire())

    async def _deliver(self, response_id: str) -> None:
        """Send one response's steps, paced by its audio; cancelled when it is halted."""
        loop = asyncio.get_running_loop()
        pace = self.options.pace
        origin, audio_s = loop.time(), 0.0
        try:
            while (step := self._session.next_step(response_id)) is not None:
                self._apply(step.actions)
                if step.hang:
                    await loop.create_future()  # until the response is cancelled
                if step.wait_s > 0:
                    await asyncio.sleep(step.wait_s)
                    origin, audio_s = loop.time(), 0.0
                    continue
                if self._outbox.qsize() > _HIGH_WATER:  # the peer reads slower than we make
                    self._drained.clear()
                    await self._drained.wait()
                audio_s += step.audio_s
                if pace > 0 and step.audio_s > 0:
                    # Against the response's start, so waits do not drift.
                    await asyncio.sleep(max(0.0, origin + audio_s * pace - loop.time()))
                else:
                    await asyncio.sleep(0)  # let cancels and barge-in land between deltas
        except Exception:
            _log.exception("fake realtime response %s failed", response_id)
            self._apply([*self._session.shut_down(), Close(1011, _BUG_REASON)])
        finally:
            if self._deliveries.get(response_id) is asyncio.current_task():
                del self._deliveries[response_id]

    def _apply(self, actions: Sequence[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                if not self._closing:
                    self._outbox.put_nowait(action.event)
            elif isinstance(action, Close):
                if not self._closing:
                    self._closing = True
                    self._outbox.put_nowait(action)
            elif isinstance(action, Begin):
                delivery = asyncio.create_task(self._deliver(action.response_id))
                self._deliveries[action.response_id] = delivery
            elif isinstance(action, Halt):
                task = self._deliveries.get(action.response_id)
                if task is not None and task is not asyncio.current_task():
                    del self._deliveries[action.response_id]
                    task.cancel()

    def _record(self, direction: str, event: dict[str, Any]) -> None:
        if not self.options.log_frames:
            return
        self.log.append((direction, event))
        type_ = event.get("type")
        if isinstance(type_, str):
            self._by_type.setdefault((direction, type_), []).append(event)

    async def _notify(self) -> None:
        if self._waiters:
            async with self._changed:
                self._changed.notify_all()


class FakeRealtimeServer:
    """The fake on a loopback port; ``async with FakeRealtimeServer() as server: ...``."""

    def __init__(self, options: FakeOptions | None = None) -> None:
        self.options = options or FakeOptions()
        self.connections: list[FakeConnection] = []
        self._runner: web.AppRunner | None = None
        self._host = "127.0.0.1"
        self._port = 0
        self._accepted = asyncio.Condition()

    @property
    def port(self) -> int:
        return self._port

    @property
    def ws_url(self) -> str:
        """The SDK's ``websocket_base_url``."""
        return f"ws://{self._host}:{self._port}/v1"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        self._host = host
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Close every connection (1001) and the listener."""
        open_connections = [c for c in self.connections if not c.closed.is_set()]
        await asyncio.gather(*(c.drop(1001, _SHUTDOWN_REASON) for c in open_connections))
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def wait_connections(
        self,
        count: int,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> FakeConnection:
        """``connections[count - 1]`` once it exists."""
        async with asyncio.timeout(timeout), self._accepted:
            await self._accepted.wait_for(lambda: len(self.connections) >= count)
        return self.connections[count - 1]

    async def __aenter__(self) -> FakeRealtimeServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if not request.path.endswith("/realtime"):
            return _error_response(404, "not_found", f"Invalid URL (GET {request.path})")
        if not self._authorized(request):
            return _error_response(
                401,
                "invalid_api_key",
                "Incorrect API key provided. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
            )
        ws = web.WebSocketResponse(
            protocols=("realtime",), max_msg_size=0, compress=True, autoping=True
        )
        if not ws.can_prepare(request).ok:
            return _error_response(426, "upgrade_required", "Expected a WebSocket upgrade.")
        await ws.prepare(request)
        connection = FakeConnection(self.options, request, len(self.connections) + 1)
        self.connections.append(connection)
        async with self._accepted:
            self._accepted.notify_all()
        await connection.serve(ws, beta="OpenAI-Beta" in request.headers)
        return ws

    def _authorized(self, request: web.Request) -> bool:
        key = self.options.api_key
        if key is None:
            return True
        if request.headers.get("Authorization") == f"Bearer {key}":
            return True
        offered = request.headers.get("Sec-WebSocket-Protocol", "")
        return f"{_INSECURE_KEY_PROTOCOL}{key}" in (p.strip() for p in offered.split(","))


def _error_response(status: int, code: str, message: str) -> web.Response:
    error = {"type": "invalid_request_error", "code": code, "message": message, "param": None}
    return web.json_response({"error": error}, status=status)


# Command line --------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> tuple[FakeOptions, str, int]:
    parser = argparse.ArgumentParser(
        prog="python -m transports.openai_realtime.fake_server",
        description="A faithful fake OpenAI Realtime (GA) server on ws://HOST:PORT/v1.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", default=None, help="only this Bearer key is accepted")
    parser.add_argument("--max-duration-s", type=float, default=3600.0)
    parser.add_argument("--pace", type=float, default=0.0, help="1.0 = real-time audio")
    parser.add_argument("--no-session-created", action="store_true")
    parser.add_argument("--created-delay-ms", type=float, default=0.0)
    parser.add_argument("--ignore-interrupt", action="store_true")
    parser.add_argument("--echo", action="store_true", help="answer each append with its audio")
    parser.add_argument("--no-log", action="store_true", help="keep no frame log")
    parser.add_argument("--arg-fragment", type=int, default=3)
    args = parser.parse_args(argv)
    options = FakeOptions(
        api_key=args.api_key,
        max_duration_s=args.max_duration_s,
        pace=args.pace,
        session_created=not args.no_session_created,
        created_delay_s=args.created_delay_ms / 1000,
        ignore_interrupt=args.ignore_interrupt,
        echo=args.echo,
        log_frames=not args.no_log,
        arg_fragment=args.arg_fragment,
    )
    return options, args.host, args.port


async def _serve_until_signalled(options: FakeOptions, host: str, port: int) -> None:
    server = FakeRealtimeServer(options)
    await server.start(host, port)
    print(f"listening {server.ws_url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    options, host, port = _parse_args(argv)
    asyncio.run(_serve_until_signalled(options, host, port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
