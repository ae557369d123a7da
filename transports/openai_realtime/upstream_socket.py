"""The upstream WebSocket under ``OpenAIRealtimeTransport``: aiohttp's, or the official SDK's.

The transport reads and writes raw text frames (``RealtimeSocket``); the socket under them is:

- by default an aiohttp WebSocket (``open_aiohttp``) on the same event loop as the client side,
  with aiohttp's C frame reader. The SDK client still decides where to connect and with which
  credentials (``endpoint``: its WebSocket or REST base URL, its auth and default headers), as
  its own ``realtime.connect`` would; only the socket is ours. Against the SDK's ``websockets``
  connection (a frame parser and send path in Python) this cut the gateway's CPU per relayed
  audio frame pair by 12-18 % (50 sessions × 50 frames/s, gateways measured side by side);
- ``SdkSocket`` when a caller passes its own SDK client (``client=``): its ``realtime.connect``
  opens the socket and the frames go straight to its ``websockets`` connection (``frame_sender``).

Either way a close arrives as ``UpstreamClosed`` with the close code the server sent, or 1006
when the connection went without a close frame.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import aiohttp
from openai import AsyncOpenAI
from websockets.exceptions import ConnectionClosed

if TYPE_CHECKING:
    from openai.resources.realtime.realtime import AsyncRealtimeConnection

__all__ = [
    "AiohttpSocket",
    "RealtimeSocket",
    "SdkSocket",
    "UpstreamClosed",
    "endpoint",
    "env_proxy",
    "frame_sender",
    "open_aiohttp",
]

# The close code when the connection ended without a close frame (RFC 6455, 7.1.5).
ABNORMAL_CLOSE = 1006
NO_STATUS_CLOSE = 1005
# Like websockets' default keepalive under the SDK: a ping every 20 s; no answer closes.
KEEPALIVE_S = 20.0
CLOSE_TIMEOUT_S = 2.0


class UpstreamClosed(Exception):
    """The upstream socket closed; ``code`` is the server's close code (1006 if none came)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"upstream closed with code {code}")
        self.code = code


class RealtimeSocket(Protocol):
    # One text frame out; a bound method, fetched once per connection by the hot path.
    send: Callable[[str], Awaitable[None]]

    async def recv(self) -> str | bytes:
        """The next data frame; raises ``UpstreamClosed`` once the socket is closed."""
        ...

    async def close(self) -> None: ...


class AiohttpSocket:
    """An aiohttp client WebSocket and the client session that owns its connection."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, http: aiohttp.ClientSession) -> None:
        self._ws = ws
        self._http = http
        self.send: Callable[[str], Awaitable[None]] = ws.send_str

    async def recv(self) -> str | bytes:
        msg = await self._ws.receive()
        if msg.type is aiohttp.WSMsgType.TEXT or msg.type is aiohttp.WSMsgType.BINARY:
            data: str | bytes = msg.data
            return data
        if msg.type is aiohttp.WSMsgType.CLOSE:  # the server's close frame, with its code
            code = msg.data if isinstance(msg.data, int) and msg.data else NO_STATUS_CLOSE
            raise UpstreamClosed(code)
        # Gone without a close frame (a drop, a protocol error): 1006, as websockets reports it.
        raise UpstreamClosed(ABNORMAL_CLOSE)

    async def close(self) -> None:
        try:
            await self._ws.close()
        finally:
            await self._http.close()


class SdkSocket:
    """The SDK's realtime connection, read and written as raw frames."""

    def __init__(self, conn: AsyncRealtimeConnection) -> None:
        self._conn = conn
        self.send = frame_sender(conn)

    async def recv(self) -> str | bytes:
        try:
            return await self._conn.recv_bytes()
        except ConnectionClosed as exc:
            raise UpstreamClosed(
                exc.rcvd.code if exc.rcvd is not None else ABNORMAL_CLOSE
            ) from None

    async def close(self) -> None:
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
    """The HTTP proxy the environment names for ``url``, as websockets (the SDK's socket)
    would pick it (``wss``/``ws`` first, then ``https``, then ``http`` for ``ws``); SOCKS
    proxies are not supported by aiohttp and are ignored."""
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "wss"
    port = parts.port or (443 if secure else 80)
    if urllib.request.proxy_bypass(f"{parts.hostname}:{port}"):
        return None
    proxies = urllib.request.getproxies()
    for scheme in ("wss", "https") if secure else ("ws", "https", "http"):
        proxy = proxies.get(scheme)
        if proxy and proxy.startswith(("http://", "https://")):
            return proxy
    return None


async def open_aiohttp(client: AsyncOpenAI, model: str) -> AiohttpSocket:
    """A new aiohttp WebSocket to the endpoint ``client`` names. Raises what aiohttp raises
    (``WSServerHandshakeError`` with the HTTP status for a refusal, ``ClientError``, OSError)."""
    url, headers = endpoint(client, model)
    http = aiohttp.ClientSession()
    try:
        ws = await http.ws_connect(
            url,
            headers=headers,
            proxy=env_proxy(url),
            compress=0,  # as the SDK: no permessage-deflate
            max_msg_size=0,  # as the SDK: no limit on the server's events
            autoping=True,
            heartbeat=KEEPALIVE_S,
            timeout=aiohttp.ClientWSTimeout(ws_close=CLOSE_TIMEOUT_S),
        )
    except BaseException:
        await http.close()
        raise
    return AiohttpSocket(ws, http)
