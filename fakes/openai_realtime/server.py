"""A faithful fake OpenAI Realtime (GA) server over aiohttp, for tests and benchmarks.

The protocol lives in the pure ``FakeSession`` (``session``); this module is the thin async
shell around it: it accepts the upgrade at ``<prefix>/realtime``, checks the key, feeds client
frames to the session, and carries out the actions it returns. Per connection there are:

- the handler task, which reads frames (text, or binary JSON) in order;
- one writer task, the only one that sends, so frames leave in the order the session made them
  (and so in ``event_id`` order); it also performs closes, after what was queued before;
- one delivery task per response, pulling ``next_step`` and waiting between steps (``pace``);
- timers: ``session.created`` (after ``created_delay_s``) and the session expiry.

Every frame in both directions is logged (``FakeConnection.log``, unless ``log_frames=False``)
and ``wait_for`` wakes on it, so tests wait for events instead of sleeping. In dispatch mode
(``dispatch``) the connections stamp each tool call they emit and its output's arrival in
the server's ``dispatch_log``.

Fault modes (``server.faults``, ``fakes.faults``): ``refuse`` resets a new upgrade request before
any HTTP answer and ``status`` answers it with the API's error JSON (``fakes.fault_replies``);
the stalls hold responses back (``stalls``).

Run it alone with ``python -m fakes.openai_realtime --port P [--fault 503 --fault-count 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from aiohttp import WSMsgType, web

from fakes.fault_replies import openai_error, refuse
from fakes.faults import Refuse, UpstreamFaults, add_fault_arguments, faults_from_args
from fakes.openai_realtime.dispatch import DispatchLog
from fakes.openai_realtime.session import FakeOptions, FakeSession
from fakes.openai_realtime.stalls import ResponseStalls
from fakes.openai_realtime.wire import (
    Action,
    Begin,
    Close,
    Event,
    Halt,
    IdSource,
    Send,
    Stamp,
    Step,
)
from fakes.shell import ConnectionShell, ServerShell, serve_until_signalled

__all__ = ["FakeConnection", "FakeOptions", "FakeRealtimeServer", "main"]

_log = logging.getLogger(__name__)
_BUG_REASON = "fake server error"
_INSECURE_KEY_PROTOCOL = "openai-insecure-api-key."
_HANG = Step(hang=True)  # a stalled response's delivery waits here until it is halted


class FakeConnection(ConnectionShell[FakeOptions, str, Event | Stamp]):
    """One accepted WebSocket: the session, its frame log and the tasks that serve it."""

    def __init__(
        self,
        options: FakeOptions,
        request: web.Request,
        number: int,
        dispatch_log: DispatchLog | None = None,
        ids: IdSource | None = None,
        faults: UpstreamFaults | None = None,
    ) -> None:
        super().__init__(options, request, number)
        self._dispatch_log = dispatch_log
        self._stalls = ResponseStalls(faults or UpstreamFaults())
        self.model: str = request.query.get("model", "")
        self._session = FakeSession(
            options, model=self.model, number=number, now_unix=time.time(), ids=ids
        )
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
        return list(self._index.get(("in", type_), ()))

    def sent(self, type_: str) -> list[dict[str, Any]]:
        """Server events of that type, from the log."""
        return list(self._index.get(("out", type_), ()))

    async def wait_for(
        self,
        type_: str,
        count: int = 1,
        direction: str = "out",
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> dict[str, Any]:
        """The ``count``-th logged event of that type; ``TimeoutError`` if it does not come,
        ``ConnectionError`` if the connection closes without it."""
        return await self._wait_logged(direction, type_, count, timeout)

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
        await self._await_closed()

    # Serving --------------------------------------------------------------------------------

    async def serve(self, ws: web.WebSocketResponse, *, beta: bool) -> None:
        await self._serve(ws, lambda: self._start(beta=beta))

    def _start(self, *, beta: bool) -> None:
        if beta:
            self._apply(self._session.reject_beta())
            return
        if self.options.session_created:
            self._greeter = asyncio.create_task(self._greet())
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(self.options.max_duration_s, self._expire_now))

    def _failed(self) -> None:
        _log.exception("fake realtime connection %d failed", self.number)
        self._apply([Close(1011, _BUG_REASON)])

    def _shut_down(self) -> None:
        self._session.shut_down()

    def _extra_tasks(self) -> list[asyncio.Task[None]]:
        return [self._greeter] if self._greeter else []

    async def _on_frame(self, data: str | bytes) -> None:
        dispatch_log = self._dispatch_log
        arrived_ns = time.perf_counter_ns() if dispatch_log is not None else 0
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raw = data if isinstance(data, str) else data.decode("utf-8", "replace")
            self._record("in", {"type": None, "raw": raw[:200]})
            actions = self._session.invalid_frame(str(error))
        else:
            if dispatch_log is not None:
                dispatch_log.received(event, arrived_ns)
            self._record("in", event if isinstance(event, dict) else {"type": None, "raw": event})
            actions = self._session.handle(event)
        self._apply(actions)
        await self._notify()

    async def _send(self, ws: web.WebSocketResponse, item: Event | Stamp) -> None:
        if isinstance(item, Stamp):  # every frame queued before it is on the socket
            if self._dispatch_log is not None:
                self._dispatch_log.emitted(item.call_id, time.perf_counter_ns())
            return
        try:
            await ws.send_frame(orjson.dumps(item), WSMsgType.TEXT)
        except ConnectionError:
            return
        self._record("out", item)
        await self._notify()

    async def _greet(self) -> None:
        if self.options.created_delay_s > 0:
            await asyncio.sleep(self.options.created_delay_s)
        if not self._session.closed:
            self._apply(self._session.start())

    def _expire_now(self) -> None:
        self._apply(self._session.expire())

    def _next_step(self, key: str) -> Step | None:
        if self._stalls.stalled(key):
            return _HANG
        return self._session.next_step(key)

    def _delivery_failed(self, key: str) -> None:
        _log.exception("fake realtime response %s failed", key)
        self._apply([*self._session.shut_down(), Close(1011, _BUG_REASON)])

    def _apply(self, actions: Sequence[Action]) -> None:
        for action in self._stalls.filter(actions):
            if isinstance(action, Send):
                self._queue(action.event)
            elif isinstance(action, Close | Stamp):
                self._queue(action)
            elif isinstance(action, Begin):
                self._begin(action.response_id)
            elif isinstance(action, Halt):
                self._halt(action.response_id)

    def _record(self, direction: str, event: dict[str, Any]) -> None:
        type_ = event.get("type")
        self._log_frame(direction, event, [type_] if isinstance(type_, str) else [], event)


class FakeRealtimeServer(ServerShell[FakeConnection]):
    """The fake on a loopback port; ``async with FakeRealtimeServer() as server: ...``."""

    def __init__(
        self,
        options: FakeOptions | None = None,
        *,
        dispatch_timings: Path | None = None,
        faults: UpstreamFaults | None = None,
    ) -> None:
        super().__init__()
        self.options = options or FakeOptions()
        # Fault modes (``fakes.faults``), read by every new connection and response.
        self.faults = faults or UpstreamFaults()
        self.ids = IdSource()  # one source for every connection: ids never repeat on a server
        # Dispatch mode: the tool calls' stamps, also appended to ``dispatch_timings`` if given.
        self.dispatch_log = DispatchLog(dispatch_timings) if self.options.dispatch else None

    @property
    def ws_url(self) -> str:
        """The SDK's ``websocket_base_url``."""
        return f"ws://{self._host}:{self._port}/v1"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self.faults.take_connection_fault()
        if isinstance(fault, Refuse):
            return refuse(request)
        if fault is not None:
            return openai_error(fault, self.faults.retry_after_s)
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
        number = len(self.connections) + 1
        connection = FakeConnection(
            self.options, request, number, self.dispatch_log, self.ids, self.faults
        )
        await self._accept(connection)
        await connection.serve(ws, beta="OpenAI-Beta" in request.headers)
        return ws

    async def stop(self) -> None:
        await super().stop()
        if self.dispatch_log is not None:
            self.dispatch_log.close()

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


def _parse_args(argv: Sequence[str] | None) -> tuple[FakeOptions, str, int, Path | None]:
    options, host, port, timings, _ = _parse_command_line(argv)
    return options, host, port, timings


def _parse_command_line(
    argv: Sequence[str] | None,
) -> tuple[FakeOptions, str, int, Path | None, UpstreamFaults]:
    parser = argparse.ArgumentParser(
        prog="python -m fakes.openai_realtime",
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
    dispatch = parser.add_argument_group("dispatch mode (benchmarks; needs --echo)")
    dispatch.add_argument(
        "--dispatch",
        action="store_true",
        help="an append whose audio starts with the marker gets a whole tool call instead of "
        "its echo (fakes.openai_realtime.dispatch)",
    )
    dispatch.add_argument("--dispatch-tool", default="noop", help="the tool the model calls")
    dispatch.add_argument(
        "--timings",
        type=Path,
        default=None,
        help="append each call's stamps here as JSON lines (call_id, emitted_ns, received_ns)",
    )
    add_fault_arguments(parser)
    args = parser.parse_args(argv)
    faults = faults_from_args(parser, args)
    if args.dispatch and not args.echo:
        parser.error("--dispatch needs --echo")
    if args.timings is not None and not args.dispatch:
        parser.error("--timings needs --dispatch")
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
        dispatch=args.dispatch,
        dispatch_tool=args.dispatch_tool,
    )
    return options, args.host, args.port, args.timings, faults


def main(argv: Sequence[str] | None = None) -> int:
    options, host, port, timings, faults = _parse_command_line(argv)
    make_server = functools.partial(
        FakeRealtimeServer, options, dispatch_timings=timings, faults=faults
    )
    asyncio.run(serve_until_signalled(make_server, host, port, lambda server: server.ws_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
