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
  each ``toolCall`` twice. Answers ``{"ok": bool, "detail"}``;
- ``GET /tally``: the tally's summary (``Tally.summary``).

It prints one JSON line with the URLs of the fakes it runs (``openai``; ``gemini`` and
``gemini_ca``; ``chat``) and ``control``, and serves until SIGTERM. Closed connections are
forgotten every few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from fakes.chat.brain import FakeReply, Text
from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.gemini_live.server import FakeGeminiConnection, FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeConnection, FakeOptions, FakeRealtimeServer
from soak.upstream_tally import Tally

__all__ = ["KINDS", "UpstreamFakes", "main"]

_log = logging.getLogger("soak.upstreams")
FORGET_EVERY_S = 5.0


KINDS = ("openai", "gemini", "chat")


class UpstreamFakes:
    def __init__(self, cert_dir: Path, kinds: Sequence[str] = KINDS) -> None:
        self.tally = Tally()
        self.openai: FakeRealtimeServer | None = None
        self.gemini: FakeGeminiServer | None = None
        self.chat: FakeChatServer | None = None
        if "openai" in kinds:
            self.openai = FakeRealtimeServer(FakeOptions(pace=1.0, log_frames=False))
            self.openai.tap = self._openai_frame
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
        self.tally.frame(id(connection), "openai", direction, message)

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

    def fault(self, kind: str, tag: str, seconds: float) -> dict[str, Any]:
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
            str(body.get("kind", "")), str(body.get("tag", "")), float(body.get("seconds", 0))
        )
        return web.json_response(answer)

    async def tally(request: web.Request) -> web.Response:
        return web.json_response(fakes.tally.summary())

    app = web.Application()
    app.router.add_post("/fault", fault)
    app.router.add_get("/tally", tally)
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
