"""Draining a node from the operator console (Chromium, node a's console; two real nodes on one
redis-server): after a confirm, node b drains as on SIGTERM: the test's session on b is told
``session.moving``, resumes on node a, and the console shows it there; node b exits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cluster_kit import connect, resume
from console_kit import (
    WAIT_MS,
    Fleet,
    admin_token,
    chromium,
    console_fleet,
    open_console,
    session_on,
    skip_without_chromium,
)
from harness import token
from redis_kit import RedisServer

pytestmark = skip_without_chromium

TEST_S = 90.0


@pytest.fixture
async def fleet(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Fleet]:
    async with console_fleet(redis_server, tmp_path, drain_grace_s="3") as nodes:
        yield nodes


async def test_draining_node_b_from_the_console_moves_its_session_to_a(fleet: Fleet) -> None:
    async with asyncio.timeout(TEST_S), chromium() as browser:
        credential = token("gina", ["caregiver"])
        client = await session_on(fleet, fleet.b, credential)
        started = client.started
        await client.say("before the drain")
        console = await open_console(browser, fleet.a, admin_token())
        page = console.page
        await console.row(started["session_id"]).wait_for(timeout=WAIT_MS)
        b_node = await console.row(started["session_id"]).get_attribute("data-node")
        assert b_node is not None
        assert b_node.startswith("b.")

        await console.tab("nodes")
        row = page.locator(f"[data-testid=node-row][data-node-id='{b_node}']")
        await row.wait_for(timeout=WAIT_MS)
        assert await row.get_attribute("data-alive") == "true"
        assert await row.locator("[data-testid=node-sessions]").inner_text() == "1"
        await row.locator("[data-testid=node-drain]").click()
        await console.confirm()

        moving = await client.last("session.moving", within=WAIT_MS / 1000)
        assert moving["session_id"] == started["session_id"]
        await page.wait_for_selector("[data-testid=banner]:has-text('drains')", timeout=WAIT_MS)
        assert await row.locator("[data-testid=node-drain]").is_disabled()

        again = await connect(fleet.group, fleet.a, Authorization=f"Bearer {credential}")
        answer = await resume(again, started, token=moving["resume_token"])
        assert answer["type"] == "session.started", answer
        assert answer["resumed"] is True
        assert (await again.say("after the drain"))[-1]["text"] == "You said: after the drain"
        assert await asyncio.wait_for(fleet.b.wait(), 20) == 0  # b drained, then exited

        await console.tab("sessions")
        moved = console.row(started["session_id"])
        await page.wait_for_selector(
            f"[data-testid=session-row][data-session-id='{started['session_id']}']"
            "[data-node^='a.']",
            timeout=WAIT_MS,
        )
        assert await moved.count() == 1
        assert console.problems == []
        await again.ws.close()
        await client.ws.close()
