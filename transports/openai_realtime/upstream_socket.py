"""The upstream WebSocket under ``OpenAIRealtimeTransport``: ours, or the official SDK's.

The transport reads and writes raw text frames through ``RealtimeSocket``: ``recv`` during the
provider's handshake, then ``push`` (every message to a callback), ``send_many_now``/``send``
to write,
``wait_closed`` for the server's close code (1006: the connection ended without a close frame).

- By default the socket is ``rfc6455.client``'s (``open_socket``): frames parsed in
  ``data_received`` and handed to the transport at once. The SDK client still decides where to
  connect and with which credentials (``endpoint``: its WebSocket or REST base URL, its auth and
  default headers), as its own ``realtime.connect`` would; only the socket is ours. Against the
  SDK's ``websockets`` connection (a reader task and a coroutine chain per frame) this roughly
  halved the gateway's CPU per relayed audio frame pair (``scripts/bench relay``).
- ``SdkSocket``, the SDK's ``realtime.connect``, when a caller passes its own SDK client, or when
  the environment names a proxy for the endpoint (the SDK's ``websockets`` speaks to proxies; our
  socket does not). Its frames go straight to the ``websockets`` connection (``frame_sender``).
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from openai import AsyncOpenAI
from websockets.exceptions import ConnectionClosed as WebsocketsClosed

from rfc6455.client import ConnectionClosed, connect
from rfc6455.frames import CLOSE_ABNORMAL

if TYPE_CHECKING:
    from openai.resources.realtime.realtime import AsyncRealtimeConnection

__all__ = [
    "KEEPALIVE_S",
    "MAX_SERVER_EVENT",
    "ConnectionClosed",
    "RealtimeSocket",
    "SdkSocket",
    "endpoint",
    "env_proxy",
    "frame_sender",
    "open_socket",
]

# Like websockets' default keepalive under the SDK: a ping after 20 s of silence.
KEEPALIVE_S = 20.0
# The SDK sets no limit on the server's events; ours is generous but finite (a whole
# conversation.item.retrieve of long audio is the largest event OpenAI sends).
MAX_SERVER_EVENT = 256 * 1024 * 1024


class RealtimeSocket(Protocol):
    async def recv(self) -> str | bytes:
        """The next message before ``push``; raises ``ConnectionClosed`` once closed."""
        ...

    def push(self, on_message: Callable[[str | bytes], None]) -> None:
        """Every message from now on (queued ones first) goes to ``on_message``."""
        ...

    async def wait_closed(self) -> int:
        """The server's close code, once the connection is closed."""
        ...

    def send_many_now(self, texts: Sequence[str]) -> bool:
        """Write these frames now, in one write; False (nothing written) when that would have
        to wait."""
        ...

    async def send(self, text: str) -> None:
        """Write one frame (before any await) and wait while the socket is full."""
        ...

    async def close(self) -> None: ...


class SdkSocket:
    """The SDK's realtime connection, read by a task of its own and written as raw frames."""

    def __init__(self, conn: AsyncRealtimeConnection) -> None:
        self._conn = conn
        self._send = frame_sender(conn)
        self._reader: asyncio.Task[int] | None = None

    async def send(self, text: str) -> None:
        await self._send(text)

    async def recv(self) -> str | bytes:
        try:
            return await self._conn.recv_bytes()
        except WebsocketsClosed as exc:
            raise ConnectionClosed(
                exc.rcvd.code if exc.rcvd is not None else CLOSE_ABNORMAL
            ) from None

    def push(self, on_message: Callable[[str | bytes], None]) -> None:
        self._reader = asyncio.create_task(self._read(on_message))

    async def _read(self, on_message: Callable[[str | bytes], None]) -> int:
        try:
            while True:
                on_message(await self.recv())
        except ConnectionClosed as closed:
            return closed.code

    async def wait_closed(self) -> int:
        assert self._reader is not None, "push() first"
        return await asyncio.shield(self._reader)

    def send_many_now(self, texts: Sequence[str]) -> bool:
        return False  # websockets' send is a coroutine: the caller awaits ``send``

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        await self._conn.close()


def frame_sender(conn: AsyncRealtimeConnection) -> Callable[[str], Awaitable[None]]:
    """How to send one text frame on ``conn``: straight on its websockets connection.

    The SDK's ``send_raw`` first runs the bookkeeping of its own reconnection queue, which this
    transport never enables (it reconnects by itself); skipping it saves about 15 % of the
    gateway's CPU per relayed audio frame on the SDK's socket. Falls back to ``send_raw`` if an
    SDK release no longer has the attribute.
    """
    inner = getattr(conn, "_connection", None)
    send = getattr(inner, "send", None)
    return send if callable(send) else conn.send_raw


def endpoint(client: AsyncOpenAI, model: str) -> tuple[str, dict[str, str]]:
    """Where the SDK's ``realtime.connect(model=…)`` would connect, and the headers it sends:
    its WebSocket base URL, else its base URL as ws(s); then ``/realtime`` with its default
    query and ``model``; its auth headers, then its default headers (those it sends)."""
    base = client.websocket_base_url
    if base is None:
        rest = urllib.parse.urlsplit(str(client.base_url))
        base = rest._replace(scheme="ws" if rest.scheme == "http" else "wss").geturl()
    parts = urllib.parse.urlsplit(str(base))
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query += [(k, v) for k, v in client.default_query.items() if isinstance(v, str)]
    query = [(k, v) for k, v in query if k != "model"] + [("model", model)]
    url = parts._replace(
        path=parts.path.rstrip("/") + "/realtime", query=urllib.parse.urlencode(query)
    ).geturl()
    headers: dict[str, str] = {}
    for source in (client.auth_headers, client.default_headers):
        for name, value in source.items():
            if isinstance(value, str):  # the SDK marks headers it leaves out with Omit
                headers[name] = value
    return url, headers


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``, as websockets (the SDK's socket) would pick
    it: ``wss``/``ws`` first, then ``https``, then ``http`` for ``ws``; ``all_proxy`` last."""
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "wss"
    port = parts.port or (443 if secure else 80)
    if urllib.request.proxy_bypass(f"{parts.hostname}:{port}"):
        return None
    proxies = urllib.request.getproxies()
    for scheme in ("wss", "https", "all") if secure else ("ws", "https", "http", "all"):
        if proxies.get(scheme):
            return proxies[scheme]
    return None


async def open_socket(client: AsyncOpenAI, model: str) -> RealtimeSocket:
    """A new socket to the endpoint ``client`` names: ours, or the SDK's behind a proxy.
    Raises what the connection raises (``HandshakeError`` with the HTTP status of a refusal,
    ``OSError``, the SDK's errors)."""
    url, headers = endpoint(client, model)
    if env_proxy(url) is not None:
        return SdkSocket(await client.realtime.connect(model=model).enter())
    return await connect(url, headers, max_message=MAX_SERVER_EVENT, keepalive_s=KEEPALIVE_S)
