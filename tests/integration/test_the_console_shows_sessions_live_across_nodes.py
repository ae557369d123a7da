"""The operator console in Chromium, opened on node a of two real nodes on one redis-server:

- sessions opened on node a and on node b (native WebSockets with a JWT or a key, and an OpenAI
  client's ``/v1/realtime``) appear in its table live, each with its node, edge, mode, key and
  team, without a reload; the filters and the sorting work on them; a session that ends, or
  whose client leaves, leaves the table; a stream that ends is opened again;
- a session's timeline (a session of node b, read from node a) shows its tool call with the
  arguments and the result as its client saw them: projected through the tool's allowlist, so
  a field outside it (``kb_get``'s article body) is nowhere in the page; no transcript while
  transcript retention is off.

Writes ``docs/img/console-sessions.png`` and ``docs/img/console-timeline.png``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from console_kit import (
    WAIT_MS,
    Fleet,
    admin_api,
    admin_token,
    chromium,
    console_fleet,
    open_console,
    page_text,
    screenshot,
    session_on,
    skip_without_chromium,
)
from harness import token
from redis_kit import RedisServer

if TYPE_CHECKING:
    from playwright.async_api import Page, Route

pytestmark = skip_without_chromium

TEST_S = 90.0
ARTICLE = "opening-hours"
TITLE = "Opening hours and how to reach us"
BODY_WORDS = "open Monday to Friday from 8:00 to 18:00"  # kb_get's body: outside its allowlist


@pytest.fixture
async def fleet(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Fleet]:
    async with console_fleet(redis_server, tmp_path) as nodes:
        yield nodes


async def first_stream_ends(page: Page) -> None:
    """The page's first stream answers one (empty) directory and ends, as a stream cut by a
    proxy or a restart would; the next ones reach the gateway."""
    cut: list[str] = []

    async def route(route: Route) -> None:
        if cut:
            await route.continue_()
            return
        cut.append(route.request.url)
        empty = {"at": "2026-01-01T00:00:00Z", "sessions": [], "nodes": []}
        body = f"event: sessions\ndata: {json.dumps(empty)}\n\n"
        await route.fulfill(status=200, content_type="text/event-stream", body=body)

    await page.route("**/admin/v1/console/stream", route)


async def test_sessions_on_both_nodes_appear_and_leave_live(fleet: Fleet) -> None:
    async with asyncio.timeout(TEST_S), chromium() as browser:
        console = await open_console(browser, fleet.a, admin_token(), prepare=first_stream_ends)
        page = console.page
        assert "token=" not in page.url  # taken into sessionStorage, out of the address bar
        # Its first stream ended: it connected again by itself.
        await page.wait_for_function(
            "() => window.gatewayConsole.stats.streamConnects >= 2", timeout=WAIT_MS
        )
        assert await page.get_attribute("[data-testid=stream-state]", "data-state") == "live"
        await page.evaluate("() => { window.notReloaded = true; }")
        assert await page.is_visible("[data-testid=sessions-empty]")

        await admin_api(fleet, fleet.a, "PUT", "/admin/v1/teams/support", {"budgets": {}})
        made = await admin_api(
            fleet,
            fleet.a,
            "POST",
            "/admin/v1/keys",
            {"owner": "bob", "name": "support app", "team": "support", "roles": ["caregiver"]},
        )
        alice = await session_on(fleet, fleet.a, token("alice", ["caregiver"]))
        bob = await session_on(fleet, fleet.b, made["secret"], mode="voice")
        carol = await session_on(fleet, fleet.b, token("carol"))
        await alice.say(f'/tool kb_get {{"id": "{ARTICLE}"}}')
        await carol.say("hello from carol")
        # An unmodified OpenAI client on the compatible endpoint: its edge is "realtime".
        sdk = await fleet.group.http.ws_connect(
            f"{fleet.a.url}/v1/realtime?model=local",
            headers={"Authorization": f"Bearer {token('dave')}"},
        )
        created = json.loads((await sdk.receive(timeout=WAIT_MS / 1000)).data)
        assert created["type"] == "session.created"
        dave_row = page.locator("[data-testid=session-row]", has_text="dave")
        await dave_row.wait_for(timeout=WAIT_MS)
        assert await dave_row.locator("td[data-column=edge]").inner_text() == "realtime"

        expected = {
            alice.started["session_id"]: ("a.", "alice", "–", "text"),
            bob.started["session_id"]: ("b.", f"{made['key']['id']} (bob)", "support", "voice"),
            carol.started["session_id"]: ("b.", "carol", "–", "text"),
        }
        for session_id, (node, principal, team, mode) in expected.items():
            row = console.row(session_id)
            await row.wait_for(timeout=WAIT_MS)
            assert (await row.get_attribute("data-node") or "").startswith(node)
            cell = row.locator("td[data-column=node]")
            assert (await cell.inner_text()).startswith(node)
            assert await row.locator("td[data-column=principal]").inner_text() == principal
            assert await row.locator("td[data-column=team]").inner_text() == team
            assert await row.locator("td[data-column=edge]").inner_text() == "websocket"
            assert await row.locator("td[data-column=mode]").inner_text() == mode
            assert await row.locator("td[data-column=model]").inner_text() == "local"
        # The turns and the tool call, counted as they happen.
        alice_row = console.row(alice.started["session_id"])
        await alice_row.locator("td[data-column=tools]", has_text="1").wait_for(timeout=WAIT_MS)
        assert "4 sessions on 2 nodes" in await page.inner_text("[data-testid=session-count]")
        await screenshot(page, "sessions")

        # The filters: by node, then by text.
        b_node = await console.row(bob.started["session_id"]).get_attribute("data-node")
        await page.select_option("[data-testid=session-node]", b_node)
        await alice_row.wait_for(state="detached", timeout=WAIT_MS)
        assert await page.locator("[data-testid=session-row]").count() == 2
        await page.select_option("[data-testid=session-node]", "")
        await page.select_option("[data-testid=session-edge]", "realtime")
        await alice_row.wait_for(state="detached", timeout=WAIT_MS)
        assert await page.locator("[data-testid=session-row]").count() == 1
        await page.select_option("[data-testid=session-edge]", "")
        await page.fill("[data-testid=session-filter]", "carol")
        await alice_row.wait_for(state="detached", timeout=WAIT_MS)
        assert await page.locator("[data-testid=session-row]").count() == 1
        await page.fill("[data-testid=session-filter]", "")
        await alice_row.wait_for(timeout=WAIT_MS)
        # Sorted by a column, then the other way.
        await page.click("th[data-column=principal] button")
        assert await page.get_attribute("th[data-column=principal]", "aria-sort") == "ascending"
        users = await page.locator("td[data-column=principal]").all_inner_texts()
        assert users == sorted(users)
        await page.click("th[data-column=principal] button")
        users = await page.locator("td[data-column=principal]").all_inner_texts()
        assert users == sorted(users, reverse=True)

        # A session that ends leaves the table, still without a reload.
        await carol.send("session.end")
        await carol.last("session.ended")
        await console.row(carol.started["session_id"]).wait_for(state="detached", timeout=WAIT_MS)
        await sdk.close()
        await dave_row.wait_for(state="detached", timeout=WAIT_MS)
        assert await page.locator("[data-testid=session-row]").count() == 2
        assert await page.evaluate("() => window.notReloaded === true")
        assert console.problems == []
        for client in (alice, bob, carol):
            await client.ws.close()


async def test_a_timeline_shows_a_tool_call_as_its_client_saw_it(fleet: Fleet) -> None:
    async with asyncio.timeout(TEST_S), chromium() as browser:
        console = await open_console(browser, fleet.a, admin_token())
        page = console.page
        dana = await session_on(fleet, fleet.b, token("dana", ["caregiver"]))
        session_id = dana.started["session_id"]
        events = await dana.say(f'/tool kb_get {{"id": "{ARTICLE}"}}')
        finished = next(e for e in events if e["type"] == "tool.finished")
        assert set(finished["data"]) == {"id", "title"}  # what the client saw
        await dana.say('/tool get_current_time {"timezone": "Europe/Paris"}')
        await dana.say("thanks")

        await console.row(session_id).wait_for(timeout=WAIT_MS)
        await console.row(session_id).locator("[data-testid=session-open]").click()
        await page.wait_for_selector("[data-testid=panel-timeline]:not([hidden])")
        assert page.url.endswith(f"#timeline/{session_id}")
        tool = page.locator("[data-testid=timeline-entry][data-kind=tool][data-tool=kb_get]")
        await tool.wait_for(timeout=WAIT_MS)
        assert await tool.get_attribute("data-ok") == "true"
        arguments = await tool.locator("[data-testid=tool-arguments]").inner_text()
        assert ARTICLE in arguments
        result = await tool.locator("[data-testid=tool-result]").inner_text()
        assert ARTICLE in result
        assert TITLE in result
        assert "body" not in result
        # Live: the next call shows up while the timeline is open.
        clock = page.locator("[data-testid=timeline-entry][data-tool=get_current_time]")
        await clock.wait_for(timeout=WAIT_MS)
        assert "Europe/Paris" in await clock.inner_text()
        assert await page.inner_text("[data-testid=timeline-state]") == "live"
        facts = await page.inner_text("[data-testid=timeline-facts]")
        assert "dana" in facts
        assert "websocket" in facts
        kinds = await page.locator("[data-testid=timeline-entry]").evaluate_all(
            "(items) => items.map((item) => item.dataset.kind)"
        )
        assert "turn" in kinds
        assert "transcript" not in kinds  # retention is off
        assert "transcript retention" in await page.inner_text("[data-testid=timeline-note]")
        await screenshot(page, "timeline")
        # Never a field outside the allowlist, anywhere in the page.
        assert BODY_WORDS not in await page_text(page)

        # Its end shows, and the polling stops.
        await dana.send("session.end")
        await dana.last("session.ended")
        ended = page.locator("[data-testid=timeline-entry][data-kind=ended]")
        await ended.wait_for(timeout=WAIT_MS)
        await page.wait_for_selector("[data-testid=timeline-state]:has-text('ended')")
        assert BODY_WORDS not in await page_text(page)
        assert console.problems == []
        await dana.ws.close()
