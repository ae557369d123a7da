"""The one ``aiohttp.ClientSession`` of every HTTP tool in this process.

One session means one connection pool: keep-alive connections are reused across tools, users
and sessions, and the pool is bounded (``POOL_LIMIT`` connections, ``POOL_LIMIT_PER_HOST`` per
API), so a burst of tool calls waits for a connection, inside its deadline, rather than opening
sockets without end. Cookies are never kept (``DummyCookieJar``): a cookie one user's call
received must never ride along on another user's.

The session belongs to the event loop that created it, so it is made lazily, inside the running
loop, on the first call, and made again if the loop changed (each test runs its own loop). The
app closes it at shutdown with ``close_shared_http_client()`` (``GatewayServer``'s cleanup).
"""

from __future__ import annotations

import asyncio

import aiohttp

__all__ = [
    "POOL_LIMIT",
    "POOL_LIMIT_PER_HOST",
    "SHARED_HTTP_CLIENT",
    "SharedHttpClient",
    "close_shared_http_client",
]

POOL_LIMIT = 100
POOL_LIMIT_PER_HOST = 20


class SharedHttpClient:
    """A lazily made ``ClientSession`` per event loop, one at a time."""

    def __init__(self, *, limit: int = POOL_LIMIT, limit_per_host: int = POOL_LIMIT_PER_HOST):
        self._limit = limit
        self._limit_per_host = limit_per_host
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def session(self) -> aiohttp.ClientSession:
        """The session of the running loop, made now if there is none (or it was closed)."""
        loop = asyncio.get_running_loop()
        current = self._session
        if current is not None and not current.closed and self._loop is loop:
            return current
        # Swapped before any await: two calls racing here make one session, not two.
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self._limit, limit_per_host=self._limit_per_host),
            cookie_jar=aiohttp.DummyCookieJar(),
            raise_for_status=False,
        )
        stale_loop, self._loop = self._loop, loop
        if current is not None and stale_loop is not None and stale_loop.is_closed():
            # Its loop is gone: nothing can be awaited on it, but closing marks it closed
            # (aiohttp then neither warns nor touches the dead loop's transports).
            await current.close()
        return self._session

    async def close(self) -> None:
        """Close the session if it belongs to the running loop; the next call makes a new one."""
        session, self._session = self._session, None
        loop, self._loop = self._loop, None
        if session is None or session.closed:
            return
        # A session of another loop that still runs cannot be closed from here; a dead loop's can.
        if loop is asyncio.get_running_loop() or (loop is not None and loop.is_closed()):
            await session.close()


SHARED_HTTP_CLIENT = SharedHttpClient()


async def close_shared_http_client() -> None:
    """The app's shutdown hook: close the HTTP tools' connection pool."""
    await SHARED_HTTP_CLIENT.close()
