"""``python -m soak.upstreams --cert-dir D [--only KIND]``: the soak's upstream fakes in a
process of their own (so their CPU is not the driver's), with a small control API on loopback.
The soak runs one process per fake (``--only openai``, ``gemini``, ``chat``): real providers are
other machines, and three fakes sharing one event loop made every upstream's answers wait
behind the others' audio (the soak judged the gateway by the fakes' queueing).

- the OpenAI Realtime fake (server VAD, audio at real time), the Gemini Live fake (TLS, audio at
  real time) and the chat-completions fake, none keeping a frame log: a ``Tally``
  (``upstream_tally``) reads every frame as it passes, through the fakes' taps;
- ``POST /fault`` ``{"kind", "tag"}`` aims a fault at the upstream connection of the soak session
  ``tag``: ``openai_drop`` (close 1011), ``openai_expire`` (``session_expired``, close 1001),
  ``gemini_drop``, ``gemini_goaway`` (``goAway``, close 1001 a second later);
  ``gemini_duplicate`` ``{"seconds"}``: every Gemini connection opened in the next seconds sends
  each ``toolCall`` twice. Server-wide, not aimed at a session (``tag`` is not read): the OpenAI
  fake's fault modes (``fakes.faults``, ``server.faults.fail_next``): ``openai_refuse``
  ``{"count"}`` resets the next ``count`` new connections (TCP RST, no HTTP answer),
  ``openai_429`` ``{"count"}`` answers them 429 (``Retry-After: 1``), ``openai_stall_first``: the
  next response sends nothing at all, ``openai_stall_mid`` ``{"after"}``: the next response that
  gets that far stops after ``after`` output chunks. Answers ``{"ok": bool, "detail"}``;
- ``GET /tally``: the tally's summary (``Tally.summary``);
- ``GET /applied``: ``{"applied": [{"kind", "at", "tag", "connection"}]}``, each time a fault mode
  applied: its kind (``refuse``, ``status``, ``stall_first``, ``stall_mid``), when (the machine's
  monotonic clock, ``time.monotonic``: the soak converts it to its own), and for a stall the
  tag of the soak session whose connection it met (None for a connection fault: no session
  has spoken on it yet). Which connection is running is known from the frames: the tap marks
  each connection's tasks (a context variable) as it reads their frames.

It prints one JSON line with the URLs of the fakes it runs (``openai``; ``gemini`` and
``gemini_ca``; ``chat``) and ``control``, and serves until SIGTERM. Closed connections are
forgotten every few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import dataclasses
import json
import logging
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from fakes.chat.brain import FakeReply, Text
from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.faults import FaultKind
from fakes.gemini_live.server import FakeGeminiConnection, FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeConnection, FakeOptions, FakeRealtimeServer
from soak.upstream_tally import Tally

__all__ = ["KINDS", "SERVER_WIDE", "UpstreamFakes", "main"]

_log = logging.getLogger("soak.upstreams")
FORGET_EVERY_S = 5.0
# The server-wide faults of the OpenAI fake: the soak's kind → the fake's fault kind.
SERVER_WIDE: dict[str, FaultKind] = {
    "openai_refuse": "refuse",
    "openai_429": "status",
    "openai_stall_first": "stall_first",
    "openai_stall_mid": "stall_mid",
}
DEFAULT_COUNT = 2  # connections a refuse or a 429 meets
DEFAULT_AFTER = 3  # the chunks a stall_mid response sends first (3 words, 60 ms of audio)
# The connection whose frame the running task read last (``id`` of it): the tap sets it, and
# the tasks a connection starts afterwards (its responses' deliveries) inherit it.
_CONNECTION: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "soak_connection", default=None
)


KINDS = ("openai", "gemini", "chat")


class UpstreamFakes:
    def __init__(self, cert_dir: Path, kinds: Sequence[str] = KINDS) -> None:
        self.tally = Tally()
        self.openai: FakeRealtimeServer | None = None
        self.gemini: FakeGeminiServer | None = None
        self.chat: FakeChatServer | None = None
        self.applied: list[dict[str, Any]] = []
        if "openai" in kinds:
            self.openai = FakeRealtimeServer(FakeOptions(pace=1.0, log_frames=False))
            self.openai.tap = self._openai_frame
            self.openai.faults.on_applied = self._applied
        if "gemini" in kinds:
            self.gemini = FakeGeminiServer(
                FakeGeminiOptions(pace=1.0, log_frames=False), cert_dir=cert_dir
            )
            self.gemini.tap = self._gemini_frame
        if "chat" in kinds:
            self.chat = FakeChatServer(FakeChatOptions(log_exchanges=False))
            self.chat.tap = self._chat_exchange
        self._gemini_options = FakeGeminiOptions() if self.gemini is None else self.gemini.options
        self._restore: asyncio.TimerHandle | None = None
        self._faults: set[asyncio.Task[None]] = set()

    def _openai_frame(self, connection: Any, direction: str, message: Mapping[str, Any]) -> None:
        _CONNECTION.set(id(connection))
        self.tally.frame(id(connection), "openai", direction, message)

    def _applied(self, kind: FaultKind) -> None:
        """A fault mode of the OpenAI fake applied: a connection fault as a connection comes in
        (no session on it yet), a stall in the task of the connection it stalls."""
        key = _CONNECTION.get() if kind in ("stall_first", "stall_mid") else None
        number = None
        if key is not None and self.openai is not None:
            number = next((c.number for c in self.openai.connections if id(c) == key), None)
        self.applied.append(
            {
                "kind": kind,
                "at": time.monotonic(),
                "tag": None if key is None else self.tally.tag_of(key),
                "connection": number,
            }
        )

    def _gemini_frame(self, connection: Any, direction: str, message: Mapping[str, Any]) -> None:
        self.tally.frame(id(connection), "gemini", direction, message)

    def _chat_exchange(self, body: dict[str, Any], reply: FakeReply) -> None:
        self.tally.chat_exchange(body, reply.text if isinstance(reply, Text) else None)

    def _servers(self) -> list[FakeRealtimeServer | FakeGeminiServer | FakeChatServer]:
        return [server for server in (self.openai, self.gemini, self.chat) if server is not None]

    def urls(self) -> dict[str, str]:
        urls = {}
        if self.openai is not None:
            urls["openai"] = self.openai.ws_url
        if self.gemini is not None:
            urls["gemini"] = self.gemini.base_url
            urls["gemini_ca"] = str(self.gemini.ca_file)
        if self.chat is not None:
            urls["chat"] = self.chat.base_url
        return urls

    async def start(self) -> None:
        for server in self._servers():
            await server.start()

    async def stop(self) -> None:
        for task in self._faults:
            task.cancel()
        await asyncio.gather(*self._faults, return_exceptions=True)
        for server in self._servers():
            await server.stop()

    def forget_closed(self) -> None:
        closed = [
            *(self.openai.forget_closed() if self.openai is not None else []),
            *(self.gemini.forget_closed() if self.gemini is not None else []),
        ]
        for connection in closed:
            self.tally.closed(id(connection))

    # Faults ---------------------------------------------------------------------------------

    def _connection(self, upstream: str, tag: str) -> FakeConnection | FakeGeminiConnection | None:
        server = self.openai if upstream == "openai" else self.gemini
        if server is None:
            return None
        connections: list[FakeConnection | FakeGeminiConnection] = [*server.connections]
        for connection in reversed(connections):
            if not connection.closed.is_set() and self.tally.tag_of(id(connection)) == tag:
                return connection
        return None

    def server_wide(self, kind: str, count: int, after: int) -> dict[str, Any]:
        """One of ``SERVER_WIDE``: the OpenAI fake's fault mode on for its next applications."""
        if self.openai is None:
            return {"ok": False, "detail": "no OpenAI fake in this process"}
        fault = SERVER_WIDE[kind]
        faults = self.openai.faults
        if fault in ("refuse", "status"):
            status = 429 if fault == "status" else None
            faults.fail_next(fault, count, status=status)
            what = "reset" if fault == "refuse" else "answered 429"
            return {"ok": True, "detail": f"the next {count} new OpenAI connections {what}"}
        if fault == "stall_first":
            faults.fail_next("stall_first")
            return {"ok": True, "detail": "the next OpenAI response sends nothing"}
        faults.fail_next("stall_mid", after=after)
        return {"ok": True, "detail": f"the next OpenAI response stops after {after} chunks"}

    def fault(
        self,
        kind: str,
        tag: str,
        seconds: float,
        count: int = DEFAULT_COUNT,
        after: int = DEFAULT_AFTER,
    ) -> dict[str, Any]:
        if kind in SERVER_WIDE:
            return self.server_wide(kind, count, after)
        if kind == "gemini_duplicate":
            if self.gemini is None:
                return {"ok": False, "detail": "no Gemini fake in this process"}
            self.gemini.options = dataclasses.replace(
                self._gemini_options, duplicate_tool_calls=True
            )
            if self._restore is not None:
                self._restore.cancel()
            loop = asyncio.get_running_loop()
            self._restore = loop.call_later(seconds, self._stop_duplicating)
            return {"ok": True, "detail": f"new Gemini connections duplicate for {seconds:g} s"}
        upstream, _, action = kind.partition("_")
        connection = self._connection(upstream, tag)
        if connection is None:
            return {"ok": False, "detail": f"no open {upstream} connection of {tag}"}
        if action == "drop":
            work = connection.drop()
        elif action == "expire" and isinstance(connection, FakeConnection):
            work = connection.expire()
        elif action == "goaway" and isinstance(connection, FakeGeminiConnection):
            work = connection.go_away(1.0)
        else:
            return {"ok": False, "detail": f"unknown fault {kind}"}
        task = asyncio.create_task(work)
        self._faults.add(task)
        task.add_done_callback(self._faults.discard)
        return {"ok": True, "detail": f"{upstream} connection {connection.number}"}

    def _stop_duplicating(self) -> None:
        if self.gemini is not None:
            self.gemini.options = self._gemini_options
        self._restore = None


def control_app(fakes: UpstreamFakes) -> web.Application:
    async def fault(request: web.Request) -> web.Response:
        body = await request.json()
        answer = fakes.fault(
            str(body.get("kind", "")),
            str(body.get("tag", "")),
            float(body.get("seconds", 0)),
            int(body.get("count", DEFAULT_COUNT)),
            int(body.get("after", DEFAULT_AFTER)),
        )
        return web.json_response(answer)

    async def tally(request: web.Request) -> web.Response:
        return web.json_response(fakes.tally.summary())

    async def applied(request: web.Request) -> web.Response:
        return web.json_response({"applied": fakes.applied})

    app = web.Application()
    app.router.add_post("/fault", fault)
    app.router.add_get("/tally", tally)
    app.router.add_get("/applied", applied)
    return app


async def serve(cert_dir: Path, kinds: Sequence[str]) -> None:
    fakes = UpstreamFakes(cert_dir, kinds)
    await fakes.start()
    runner = web.AppRunner(control_app(fakes), access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    control_port = int(runner.addresses[0][1])
    urls = {**fakes.urls(), "control": f"http://127.0.0.1:{control_port}"}
    print(json.dumps(urls), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        while not stop.is_set():
            fakes.forget_closed()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), FORGET_EVERY_S)
    finally:
        await runner.cleanup()
        await fakes.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak.upstreams", description=__doc__)
    parser.add_argument("--cert-dir", type=Path, required=True)
    parser.add_argument(
        "--only", choices=KINDS, action="append", help="run this fake (repeatable; default: all)"
    )
    args = parser.parse_args(argv)
    kinds = tuple(args.only or KINDS)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        import uvloop

        uvloop.run(serve(args.cert_dir, kinds))
    except ImportError:  # pragma: no cover (uvloop is a dependency where it builds)
        asyncio.run(serve(args.cert_dir, kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
