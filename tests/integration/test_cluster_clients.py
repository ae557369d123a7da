"""The project's clients follow a session that moves: two gateway processes on one real Redis,
behind a load balancer (a TCP proxy choosing the next node that accepts, no stickiness). The
node serving the client is sent SIGTERM; the terminal client and the browser page reconnect
through the balancer and resume on the other node, the user doing nothing."""

from __future__ import annotations

import asyncio
import io
import queue
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as redis
from browser_kit import CHROMIUM_FLAGS, CuttableProxy, chromium_path, over_websocket
from cluster_kit import Cluster, cluster
from redis_kit import RedisServer

from gateway.chat_client import run_chat

CHROMIUM = chromium_path()
WAIT_MS = 15_000


@pytest.fixture
async def on_local(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(redis_server, tmp_path, provider="local") as group:
        yield group


@pytest.fixture
async def balancer() -> AsyncIterator[CuttableProxy]:
    proxy = CuttableProxy()
    await proxy.start()
    yield proxy
    await proxy.stop()


async def owner(group: Cluster, session_id: str) -> str:
    client = redis.Redis(port=group.redis.port, decode_responses=True)
    try:
        return str(await client.hget(f"{group.prefix}:s:{session_id}", "owner"))
    finally:
        await client.aclose()


async def until(predicate: object, within: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_the_terminal_client_resumes_on_another_node_when_its_node_drains(
    on_local: Cluster, balancer: CuttableProxy
) -> None:
    a = await on_local.node("a")
    balancer.targets = [a.port]  # the session starts on a
    b = await on_local.node("b")
    lines: queue.Queue[str] = queue.Queue()
    out = io.StringIO()
    url = f"ws://127.0.0.1:{balancer.port}/v1/session"
    chatting = asyncio.create_task(run_chat(url, None, read_line=lines.get, out=out))
    lines.put("before the deploy\n")
    await until(lambda: "You said: before the deploy" in out.getvalue())
    session_id = out.getvalue().split("connected: session ", 1)[1].split(" ", 1)[0]

    balancer.targets = [a.port, b.port]
    a.signal(signal.SIGTERM)
    await until(lambda: f"resumed: session {session_id}" in out.getvalue())
    assert await a.wait() == 0
    lines.put("after the deploy\n")
    await until(lambda: "You said: after the deploy" in out.getvalue())
    lines.put("")  # end of input: the client ends the session
    assert await asyncio.wait_for(chatting, 15) == 0
    text = out.getvalue()
    assert "the gateway is moving this session to another node" in text
    assert text.count("connected: session") == 1  # one session throughout
    assert await owner(on_local, session_id) == ""  # ended by the client, on b


@pytest.mark.skipif(CHROMIUM is None, reason="browser test skipped: no Chromium")
async def test_the_browser_page_resumes_on_another_node_when_its_node_drains(
    on_local: Cluster, balancer: CuttableProxy
) -> None:
    from playwright.async_api import async_playwright

    a = await on_local.node("a")
    balancer.targets = [a.port]
    b = await on_local.node("b")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = await browser.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            await page.goto(over_websocket(f"http://127.0.0.1:{balancer.port}/"))
            await page.wait_for_selector("body[data-ready=true]")
            await page.select_option("[data-testid=mode]", "text")
            await page.click("[data-testid=connect]")
            await page.wait_for_selector("[data-testid=status][data-state=live]", timeout=WAIT_MS)
            session_id = await page.evaluate("() => window.demo.connection.session.session_id")

            balancer.targets = [a.port, b.port]
            a.signal(signal.SIGTERM)
            await page.wait_for_function("() => window.demo.stats.resumes === 1", timeout=WAIT_MS)
            await page.wait_for_selector("[data-testid=status][data-state=live]", timeout=WAIT_MS)
            assert "moved to another server" in await page.inner_text("[data-testid=banner]")
            assert (await owner(on_local, session_id)).startswith("b.")
            assert await a.wait() == 0

            await page.fill("[data-testid=text]", "typed after the move")
            await page.press("[data-testid=text]", "Enter")
            await page.wait_for_selector("text=You said: typed after the move", timeout=WAIT_MS)
            assert problems == []
        finally:
            await browser.close()
