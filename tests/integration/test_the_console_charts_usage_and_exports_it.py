"""Usage in the operator console (Chromium, node a's console; two real nodes on one
redis-server and the OpenAI Realtime fake, which reports each response's tokens, priced by a
table): sessions on both nodes spend; the sessions table shows it; the Usage tab charts it per
day and in total by key and by provider and lists it; its CSV export downloads the gateway's
CSV through fetch with the credential; the Keys tab shows the spend against the key's budget.

Writes ``docs/img/console-usage.png``.
"""

from __future__ import annotations

import asyncio
import json
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
    screenshot,
    session_on,
    skip_without_chromium,
)
from harness import token
from redis_kit import RedisServer

from fakes.openai_realtime.server import FakeRealtimeServer

pytestmark = skip_without_chromium

TEST_S = 90.0
# Every token costs 1/1000 of the currency: a response's cost is its total tokens / 1000.
PRICES = {
    "currency": "USD",
    "models": {
        "openai/*": dict.fromkeys(
            ("input_text", "input_audio", "output_text", "output_audio"), 1000.0
        )
    },
}


@pytest.fixture
async def fleet(
    redis_server: RedisServer, tmp_path: Path, fake: FakeRealtimeServer
) -> AsyncIterator[Fleet]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    async with console_fleet(
        redis_server,
        tmp_path,
        provider="openai",
        openai_ws_url=fake.ws_url,
        price_table=str(prices),
    ) as nodes:
        yield nodes


async def test_usage_is_charted_listed_and_exported(fleet: Fleet) -> None:
    async with asyncio.timeout(TEST_S), chromium() as browser:
        await admin_api(fleet, fleet.a, "PUT", "/admin/v1/teams/support", {"budgets": {}})
        made = await admin_api(
            fleet,
            fleet.a,
            "POST",
            "/admin/v1/keys",
            {
                "owner": "ivy",
                "name": "ivy's app",
                "team": "support",
                "budgets": {"spend_per_day": 100},
            },
        )
        key_id = made["key"]["id"]
        on_a = await session_on(fleet, fleet.a, made["secret"])
        on_b = await session_on(fleet, fleet.b, token("jack"))
        for turn in range(3):
            await on_a.say(f"tell me something, part {turn}")
        await on_b.say("and something for me")

        console = await open_console(browser, fleet.a, admin_token())
        page = console.page
        spend = console.row(on_a.started["session_id"]).locator("td[data-column=spend]")
        await spend.wait_for(timeout=WAIT_MS)
        await page.wait_for_function(
            "(cell) => cell.textContent !== '–' && Number(cell.textContent) > 0",
            arg=await spend.element_handle(),
            timeout=WAIT_MS,
        )

        await console.tab("usage")
        row = page.locator(f"[data-testid=usage-row][data-id={key_id}]")
        await row.wait_for(timeout=WAIT_MS)
        assert "ivy's app" in await row.inner_text()
        assert await page.locator(f"[data-testid=usage-daily] rect[data-id*='{key_id}']").count()
        assert await page.locator(f"[data-testid=usage-totals] rect[data-id*='{key_id}']").count()
        await page.select_option("[data-testid=usage-group]", "team")
        await page.locator("[data-testid=usage-row][data-id=support]").wait_for(timeout=WAIT_MS)
        await page.select_option("[data-testid=usage-group]", "provider")
        provider = page.locator("[data-testid=usage-row][data-id=openai]")
        await provider.wait_for(timeout=WAIT_MS)
        cells = await provider.locator("td").all_inner_texts()
        assert float(cells[0]) > 0  # spend
        assert int(cells[1].replace(",", "")) > 0  # tokens
        await page.select_option("[data-testid=usage-metric]", "tokens")
        await page.wait_for_selector("#usage-daily-title:has-text('Tokens per day')")
        await page.select_option("[data-testid=usage-group]", "key")
        await row.wait_for(timeout=WAIT_MS)
        await page.select_option("[data-testid=usage-metric]", "spend")
        await screenshot(page, "usage")

        async with page.expect_download(timeout=WAIT_MS) as downloading:
            await page.click("[data-testid=usage-csv]")
        download = await downloading.value
        assert download.suggested_filename.startswith("usage-key-")
        saved = await download.path()
        assert saved is not None
        lines = saved.read_text().splitlines()
        assert lines[0] == "day,group_by,id,tokens,spend,minutes"
        assert any(f",key,{key_id}," in line for line in lines[1:])

        await console.tab("keys")
        key_row = page.locator(f"[data-testid=key-row][data-key-id={key_id}]")
        await key_row.wait_for(timeout=WAIT_MS)
        assert "of 100" in await key_row.locator("[data-testid=key-spend-day]").inner_text()
        team_row = page.locator("[data-testid=team-row][data-team-id=support]")
        await team_row.wait_for(timeout=WAIT_MS)
        assert console.problems == []
        for client in (on_a, on_b):
            await client.ws.close()
