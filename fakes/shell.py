"""The async shell shared by the fake realtime servers (OpenAI Realtime, Gemini Live).

Each fake keeps its protocol in a pure session that returns *actions*; the aiohttp shell that
carries them out has the same skeleton in both, and that skeleton lives here:

- ``Close`` (from the pure ``close``): the close action both sessions return;
- ``ConnectionShell``: one accepted WebSocket: its frame log (``wait_for`` wakes on an
  ``asyncio.Condition``), the outbox drained by the one writer task (deliveries wait above a
  high-water mark until it is back down to a low-water mark), the paced delivery tasks and the
  serve / read / wind-down sequence. A subclass says how frames are sent and logged and what its
  session does at the start, on a failure and at the end, and overrides where its fake differs;
- ``ServerShell``: the loopback listener: ``start`` / ``stop`` / ``wait_connections`` and
  ``async with``;
- ``serve_until_signalled``: the command line's run loop (until SIGTERM or SIGINT).

A ``FrameTap`` set on a server (``ServerShell.tap``) sees every frame of every connection, in
both directions, whether or not the log keeps them: a long run (the soak) reads what it needs
as it passes instead of keeping hours of audio. ``forget_closed`` lets such a run drop the
connections that are over.
"""

from __future__ import annotations

import asyncio
import signal
import ssl
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from aiohttp import WSMessage, WSMsgType, web

from fakes.close import CLOSE_REASON_MAX_BYTES, Close
from fakes.lifecycle import Served

__all__ = [
    "CLOSE_REASON_MAX_BYTES",
    "Close",
    "ConnectionShell",
    "FrameTap",
    "ServerShell",
    "ShellOptions",
    "ShellStep",
    "serve_until_signalled",
]

_CLOSE_GRACE_S = 2.0  # a peer that stopped reading can hold the writer; then the TCP goes
_HIGH_WATER = 64  # queued frames: a delivery waits above this, until the writer
_LOW_WATER = 16  # has brought the queue back down to this
_SHUTDOWN_REASON = "server shutting down"


class ShellOptions(Protocol):
    @property
    def pace(self) -> float: ...
    @property
    def log_frames(self) -> bool: ...


class ShellStep(Protocol):
    @property
    def actions(self) -> Sequence[Any]: ...
    @property
    def audio_s(self) -> float: ...
    @property
    def wait_s(self) -> float: ...
    @property
    def hang(self) -> bool: ...


# (the connection, "in" or "out", the message as the connection indexes it)
FrameTap = Callable[[Any, str, Mapping[str, Any]], None]

OptionsT = TypeVar("OptionsT", bound=ShellOptions)
KeyT = TypeVar("KeyT")  # what names a delivery (a response id, a generation number)
OutT = TypeVar("OutT")  # what the writer sends, besides closes


class ConnectionShell(ABC, Generic[OptionsT, KeyT, OutT]):
    """One accepted WebSocket's frame log, outbox, writer, deliveries and timers."""

    def __init__(self, options: OptionsT, request: web.Request, number: int) -> None:
        self.options = options
        self.number = number
        self.headers: Mapping[str, str] = request.headers
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self._request = request
        self._index: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._changed = asyncio.Condition()
        self._waiters = 0
        self._outbox: asyncio.Queue[OutT | Close | None] = asyncio.Queue()
        self._drained = asyncio.Event()  # the outbox is at or below the low-water mark
        self._drained.set()
        self._closing = False  # a close is queued: nothing more is sent
        self._deliveries: dict[KeyT, asyncio.Task[None]] = {}
        self._timers: list[asyncio.TimerHandle] = []
        self.tap: FrameTap | None = None  # the server's, given when it accepts the connection

    @property
    def _sees_frames(self) -> bool:
        """Someone reads the frames: the log, or a tap."""
        return self.options.log_frames or self.tap is not None

    # What a fake provides (``_send`` gets a frame, not a close, while the socket is open) ------

    @abstractmethod
    async def drop(self, code: int = 1011, reason: str = "") -> None: ...
    @abstractmethod
    def _apply(self, actions: Sequence[Any]) -> None: ...
    @abstractmethod
    async def _on_frame(self, data: str | bytes) -> None: ...
    @abstractmethod
    async def _send(self, ws: web.WebSocketResponse, item: OutT) -> None: ...
    @abstractmethod
    def _next_step(self, key: KeyT) -> ShellStep | None: ...
    @abstractmethod
    def _failed(self) -> None: ...  # ``serve`` raised: log it, close the connection
    @abstractmethod
    def _delivery_failed(self, key: KeyT) -> None: ...
    @abstractmethod
    def _shut_down(self) -> None: ...  # the session ends (``serve`` is finishing)

    def _extra_tasks(self) -> list[asyncio.Task[None]]:
        """Tasks besides the deliveries that end with the connection."""
        return []

    def _peer_closed(self, message: WSMessage) -> None:
        """The client sent a close frame first."""
        self.close_code = int(message.data)

    def _lost_code(self, ws: web.WebSocketResponse) -> int:
        """The close code when the socket went without a close frame from the client."""
        return 1006

    async def _close_socket(self, ws: web.WebSocketResponse, close: Close) -> None:
        self.close_code = close.code
        await ws.close(code=close.code, message=close.reason.encode())

    # The frame log ------------------------------------------------------------------------------

    async def _wait_logged(
        self, direction: str, key: str, count: int, timeout_s: float
    ) -> dict[str, Any]:
        if direction not in ("in", "out"):
            raise ValueError("direction is 'in' or 'out'")
        if not self.options.log_frames:
            raise RuntimeError("wait_for needs the frame log (log_frames=True)")
        index = (direction, key)
        async with asyncio.timeout(timeout_s), self._changed:
            self._waiters += 1
            try:
                while len(self._index.get(index, ())) < count:
                    if self.closed.is_set():
                        raise ConnectionError(
                            f"connection closed ({self.close_code}) before {direction} "
                            f"{key!r} #{count}"
                        )
                    await self._changed.wait()
            finally:
                self._waiters -= 1
        return self._index[index][count - 1]

    def _log_frame(
        self, direction: str, logged: dict[str, Any], keys: Iterable[str], indexed: dict[str, Any]
    ) -> None:
        if self.tap is not None:
            self.tap(self, direction, indexed)
        if not self.options.log_frames:
            return
        self.log.append((direction, logged))
        for key in keys:
            self._index.setdefault((direction, key), []).append(indexed)

    async def _notify(self) -> None:
        if self._waiters:
            async with self._changed:
                self._changed.notify_all()

    # Serving ------------------------------------------------------------------------------------

    async def _await_closed(self) -> None:
        """Wait for the writer to close; abort the TCP when a peer that does not read holds it."""
        try:
            async with asyncio.timeout(_CLOSE_GRACE_S):
                await self.closed.wait()
        except TimeoutError:  # the writer is stuck behind a peer that does not read
            if self.close_code is None:
                self.close_code = 1006  # no close frame could be sent
            if (transport := self._request.transport) is not None:
                transport.abort()  # close() would wait to flush what the peer never reads
            await self.closed.wait()

    async def _serve(self, ws: web.WebSocketResponse, start: Callable[[], None]) -> None:
        writer = asyncio.create_task(self._write(ws))
        try:
            start()
            await self._read(ws)
        except Exception:
            self._failed()
        finally:
            for timer in self._timers:
                timer.cancel()
            self._shut_down()
            tasks = [*self._deliveries.values(), *self._extra_tasks()]
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
                    self._peer_closed(message)
                return
            else:  # CLOSING (we closed), CLOSED or ERROR (the peer vanished)
                if self.close_code is None:
                    self.close_code = self._lost_code(ws)
                return

    async def _write(self, ws: web.WebSocketResponse) -> None:
        while (item := await self._outbox.get()) is not None:
            if self._outbox.qsize() <= _LOW_WATER:
                self._drained.set()
            if isinstance(item, Close):
                await self._close_socket(ws, item)
                return
            if not ws.closed:
                await self._send(ws, item)

    async def _deliver(self, key: KeyT) -> None:
        """Send one delivery's steps, paced by its audio; cancelled when it is halted."""
        loop = asyncio.get_running_loop()
        pace = self.options.pace
        origin, audio_s = loop.time(), 0.0
        try:
            while (step := self._next_step(key)) is not None:
                self._apply(step.actions)
                if step.hang:
                    await loop.create_future()  # until the delivery is halted
                if step.wait_s > 0:
                    await asyncio.sleep(step.wait_s)
                    origin, audio_s = loop.time(), 0.0
                    continue
                if self._outbox.qsize() > _HIGH_WATER:  # the peer reads slower than we make
                    self._drained.clear()
                    await self._drained.wait()
                audio_s += step.audio_s
                if pace > 0 and step.audio_s > 0:
                    # Against the delivery's start, so waits do not drift.
                    await asyncio.sleep(max(0.0, origin + audio_s * pace - loop.time()))
                else:
                    await asyncio.sleep(0)  # let cancels and barge-in land between messages
        except Exception:
            self._delivery_failed(key)
        finally:
            if self._deliveries.get(key) is asyncio.current_task():
                del self._deliveries[key]

    # Actions the fakes share --------------------------------------------------------------------

    def _queue(self, item: OutT | Close) -> None:
        """Queue a frame, or a close (after which nothing more is queued)."""
        if self._closing:
            return
        if isinstance(item, Close):
            self._closing = True
        self._outbox.put_nowait(item)

    def _begin(self, key: KeyT) -> None:
        self._deliveries[key] = asyncio.create_task(self._deliver(key))

    def _halt(self, key: KeyT) -> None:
        task = self._deliveries.get(key)
        if task is not None and task is not asyncio.current_task():
            del self._deliveries[key]
            task.cancel()


ConnectionT = TypeVar("ConnectionT", bound=ConnectionShell[Any, Any, Any])


class ServerShell(Served, Generic[ConnectionT]):
    """The listener: accepted connections, ``start`` / ``stop`` and ``async with``."""

    def __init__(self) -> None:
        self.connections: list[ConnectionT] = []
        self.tap: FrameTap | None = None  # given to each connection accepted from now on
        self._runner: web.AppRunner | None = None
        self._host = "127.0.0.1"
        self._port = 0
        self._accepted = asyncio.Condition()

    @property
    def port(self) -> int:
        return self._port

    @abstractmethod
    async def _handle(self, request: web.Request) -> web.StreamResponse: ...

    def _ssl_context(self) -> ssl.SSLContext | None:
        return None

    def _advertised_host(self, host: str) -> str:
        """The host the URLs name, for the one listened on."""
        return host

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=self._ssl_context())
        await site.start()
        self._runner = runner
        self._host = self._advertised_host(host)
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
    ) -> ConnectionT:
        """``connections[count - 1]`` once it exists."""
        async with asyncio.timeout(timeout), self._accepted:
            await self._accepted.wait_for(lambda: len(self.connections) >= count)
        return self.connections[count - 1]

    def forget_closed(self) -> list[ConnectionT]:
        """Drop the connections that are over from ``connections`` (a long run's memory);
        returns them. ``wait_connections`` counts only what is left."""
        over = [c for c in self.connections if c.closed.is_set()]
        self.connections = [c for c in self.connections if not c.closed.is_set()]
        return over

    async def _accept(self, connection: ConnectionT) -> None:
        connection.tap = self.tap
        self.connections.append(connection)
        async with self._accepted:
            self._accepted.notify_all()


ServerT = TypeVar("ServerT", bound=ServerShell[Any])


async def serve_until_signalled(
    make_server: Callable[[], ServerT], host: str, port: int, url: Callable[[ServerT], str]
) -> None:
    """Start a server, print ``listening <url>`` and serve until SIGTERM or SIGINT."""
    server = make_server()
    await server.start(host, port)
    print(f"listening {url(server)}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()
