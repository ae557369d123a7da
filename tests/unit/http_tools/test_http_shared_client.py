"""The HTTP tools' one client session: bounded, cookie-free, one per event loop, closable."""

from __future__ import annotations

import asyncio

import aiohttp

from gateway.http_tools.shared_client import SharedHttpClient


async def test_one_bounded_session_without_cookies_until_closed() -> None:
    client = SharedHttpClient(limit=100, limit_per_host=20)
    first = await client.session()
    assert await client.session() is first
    connector = first.connector
    assert isinstance(connector, aiohttp.TCPConnector)
    assert (connector.limit, connector.limit_per_host) == (100, 20)
    assert isinstance(first.cookie_jar, aiohttp.DummyCookieJar)
    await client.close()
    assert first.closed
    second = await client.session()
    assert second is not first
    await client.close()
    await client.close()  # closing twice is harmless


def test_a_new_event_loop_gets_a_new_session_and_the_old_one_is_closed() -> None:
    client = SharedHttpClient()
    made: list[aiohttp.ClientSession] = []

    async def use() -> None:
        made.append(await client.session())

    asyncio.run(use())  # this loop ends without closing the client, as a test's might
    asyncio.run(use())
    assert made[0] is not made[1]
    assert made[0].closed  # closed (not leaked) when the next loop made its own
    assert not made[1].closed

    async def close() -> None:
        await client.close()

    asyncio.run(close())  # from yet another loop: the dead loop's session is closed
    assert made[1].closed
