"""Keys in the operator console (Chromium, node a's console; two real nodes on one redis-server):

- a key made in the console shows its secret once, in a box with a copy button; once the box is
  closed (and after a reload) the secret is nowhere in the page or its storage; the key works
  (a session on node b with it) and is listed with its budget; its limits are edited, and a
  team is made, in the console;
- revoking a key in the console (after a confirm) ends its live session on node b
  (``session.ended``, reason ``key_revoked``) and the key is refused from then on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

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
    session_on,
    skip_without_chromium,
)
from redis_kit import RedisServer

pytestmark = skip_without_chromium

TEST_S = 90.0


@pytest.fixture
async def fleet(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Fleet]:
    async with console_fleet(redis_server, tmp_path) as nodes:
        yield nodes


async def test_a_key_made_in_the_console_shows_its_secret_once_and_works(fleet: Fleet) -> None:
    async with asyncio.timeout(TEST_S), chromium() as browser:
        await admin_api(fleet, fleet.a, "PUT", "/admin/v1/teams/support", {"budgets": {}})
        console = await open_console(browser, fleet.a, admin_token())
        page = console.page
        await console.tab("keys")
        await page.click("[data-testid=key-new]")
        form = page.locator("[data-testid=key-create]")
        await form.locator("[data-testid=field-owner]").fill("erin")
        await form.locator("[data-testid=field-name]").fill("erin's app")
        await form.locator("[data-testid=field-team]").fill("support")
        await form.locator("[data-testid=field-roles]").fill("caregiver")
        await form.locator("[data-testid=field-spend_per_day]").fill("5")
        await form.locator("[data-testid=field-concurrent_sessions]").fill("2")
        await page.click("[data-testid=key-create-submit]")

        box = page.locator("[data-testid=secret-box][open]")
        await box.wait_for(timeout=WAIT_MS)
        secret = await page.input_value("[data-testid=secret-value]")
        assert secret.startswith("gk_")
        await page.click("[data-testid=secret-copy]")
        await page.wait_for_selector("[data-testid=secret-copied]:not(:empty)")
        await page.click("[data-testid=secret-close]")
        await box.wait_for(state="detached", timeout=WAIT_MS)
        row = page.locator("[data-testid=key-row]", has_text="erin's app")
        await row.wait_for(timeout=WAIT_MS)
        assert secret not in await page_text(page)  # gone with the box
        assert await row.get_attribute("data-status") == "active"
        key_id = await row.get_attribute("data-key-id")
        assert "of 5" in await row.locator("[data-testid=key-spend-day]").inner_text()
        listed = await admin_api(fleet, fleet.b, "GET", f"/admin/v1/keys/{key_id}")
        assert (listed["key"]["owner"], listed["key"]["team"]) == ("erin", "support")
        assert listed["key"]["budgets"]["spend_per_day"] == 5
        assert listed["key"]["budgets"]["concurrent_sessions"] == 2

        # Its limits edited: a budget changed, one removed (only what changed is sent).
        await row.locator("[data-testid=key-edit]").click()
        dialog = page.locator("[data-testid=edit-dialog][open]")
        await dialog.wait_for(timeout=WAIT_MS)
        await dialog.locator("[data-testid=field-spend_per_day]").fill("7.5")
        await dialog.locator("[data-testid=field-concurrent_sessions]").fill("")
        await dialog.locator("[data-testid=edit-save]").click()
        await dialog.wait_for(state="detached", timeout=WAIT_MS)
        await row.locator("[data-testid=key-spend-day]", has_text="of 7.50").wait_for(
            timeout=WAIT_MS
        )
        edited = (await admin_api(fleet, fleet.a, "GET", f"/admin/v1/keys/{key_id}"))["key"]
        assert edited["budgets"]["spend_per_day"] == 7.5
        assert edited["budgets"]["concurrent_sessions"] is None
        assert (edited["owner"], edited["team"], edited["roles"]) == (
            "erin",
            "support",
            ["caregiver"],
        )

        # A team made in the console, with a budget.
        await page.click("[data-testid=team-new]")
        team_form = page.locator("[data-testid=team-form]")
        await team_form.locator("[data-testid=field-id]").fill("billing")
        await team_form.locator("[data-testid=field-tokens_per_day]").fill("200000")
        await page.click("[data-testid=team-save]")
        team_row = page.locator("[data-testid=team-row][data-team-id=billing]")
        await team_row.wait_for(timeout=WAIT_MS)
        assert "tokens/day" in await team_row.inner_text()
        team = (await admin_api(fleet, fleet.b, "GET", "/admin/v1/teams/billing"))["team"]
        assert team["budgets"]["tokens_per_day"] == 200000

        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        await page.wait_for_selector("[data-testid=key-row]", timeout=WAIT_MS)
        assert await page.locator("[data-testid=secret-box][open]").count() == 0
        assert secret not in await page_text(page)  # and never shown again

        # The key works, on the other node, and its session shows in the console as its.
        client = await session_on(fleet, fleet.b, secret)
        await client.say("hello")
        await console.tab("sessions")
        session_row = console.row(client.started["session_id"])
        await session_row.wait_for(timeout=WAIT_MS)
        assert await session_row.locator("td[data-column=principal]").inner_text() == (
            f"{key_id} (erin)"
        )
        assert await session_row.locator("td[data-column=team]").inner_text() == "support"
        assert console.problems == []
        await client.ws.close()


async def test_revoking_a_key_in_the_console_ends_its_session(fleet: Fleet) -> None:
    async with asyncio.timeout(TEST_S), chromium() as browser:
        made = await admin_api(
            fleet, fleet.a, "POST", "/admin/v1/keys", {"owner": "frank", "name": "to revoke"}
        )
        key_id, secret = made["key"]["id"], made["secret"]
        client = await session_on(fleet, fleet.b, secret)
        console = await open_console(browser, fleet.a, admin_token())
        page = console.page
        await console.row(client.started["session_id"]).wait_for(timeout=WAIT_MS)
        await console.tab("keys")
        row = page.locator(f"[data-testid=key-row][data-key-id={key_id}]")
        await row.locator("[data-testid=key-revoke]").click()
        # A confirm first: cancelled, nothing happens.
        await page.wait_for_selector("[data-testid=confirm-dialog][open]", timeout=WAIT_MS)
        assert key_id in await page.inner_text("[data-testid=confirm-dialog]")
        await page.click("[data-testid=confirm-cancel]")
        await page.wait_for_selector("[data-testid=confirm-dialog]:not([open])", state="attached")
        assert (await admin_api(fleet, fleet.a, "GET", f"/admin/v1/keys/{key_id}"))["key"][
            "status"
        ] == "active"
        await row.locator("[data-testid=key-revoke]").click()
        await console.confirm()

        ended = await client.last("session.ended", within=WAIT_MS / 1000)
        assert ended["reason"] == "key_revoked"
        await page.wait_for_selector("[data-testid=banner]:has-text('revoked')", timeout=WAIT_MS)
        await page.check("[data-testid=key-show-revoked]")
        await page.wait_for_selector(
            f"[data-testid=key-row][data-key-id={key_id}][data-status=revoked]", timeout=WAIT_MS
        )
        await console.tab("sessions")
        await console.row(client.started["session_id"]).wait_for(state="detached", timeout=WAIT_MS)
        async with fleet.group.http.get(
            fleet.b.url + "/v1/session", headers={"Authorization": f"Bearer {secret}"}
        ) as refused:
            assert refused.status == 401
        assert console.problems == []
        await client.ws.close()
