"""The operator console's gate (Chromium; two real nodes on one redis-server, and a third
without the admin API):

- a credential without the admin role (a JWT's, a key's) is refused: the page says so and asks
  for another; the API answers 403 (401 without a credential);
- an admin credential typed into the page's field signs in; it is kept in the tab's
  sessionStorage, never in a cookie;
- a request to the console's API from another origin is refused (403), even with an admin's
  credential;
- a node without ``GATEWAY_ADMIN`` serves no console (404).
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
    admin_headers,
    admin_token,
    chromium,
    console_fleet,
    open_console,
    skip_without_chromium,
)
from harness import token
from redis_kit import RedisServer

pytestmark = skip_without_chromium

TEST_S = 90.0
API = "/admin/v1/console/sessions"


@pytest.fixture
async def fleet(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Fleet]:
    async with console_fleet(redis_server, tmp_path) as nodes:
        yield nodes


async def status_of(fleet: Fleet, url: str, **headers: str) -> int:
    async with fleet.group.http.get(url, headers=headers) as answer:
        await answer.read()
        return answer.status


async def test_non_admins_and_other_origins_are_refused(fleet: Fleet) -> None:
    async with asyncio.timeout(TEST_S), chromium() as browser:
        made = await admin_api(fleet, fleet.a, "POST", "/admin/v1/keys", {"owner": "hal"})
        for credential in (token("hal", ["caregiver"]), made["secret"]):
            console = await open_console(browser, fleet.a, credential, signed_in=False)
            page = console.page
            refusal = page.locator("[data-testid=auth-error]")
            await refusal.wait_for(timeout=WAIT_MS)
            said = await refusal.inner_text()
            assert "refused" in said
            assert "admin role" in said
            assert "HTTP 403" in said
            assert await page.is_visible("[data-testid=credential]")
            assert await page.is_hidden("[data-testid=app]")
            assert await page.evaluate("() => sessionStorage.length") == 0  # forgotten
            assert "token=" not in page.url
            assert console.problems == []
            await page.close()
            bearer = {"Authorization": f"Bearer {credential}"}
            assert await status_of(fleet, fleet.a.url + API, **bearer) == 403
        assert await status_of(fleet, fleet.a.url + API) == 401

        # An admin's credential typed into the field signs in.
        console = await open_console(browser, fleet.b, None, signed_in=False)
        page = console.page
        await page.fill("[data-testid=credential]", admin_token())
        await page.click("[data-testid=sign-in]")
        await page.wait_for_selector("[data-testid=stream-state][data-state=live]", timeout=WAIT_MS)
        assert await page.is_hidden("[data-testid=auth-error]")
        assert await page.evaluate("() => sessionStorage.length") == 1
        assert await page.context.cookies() == []
        assert await page.evaluate("() => document.cookie") == ""
        assert console.problems == []

        # Another origin is refused, whatever its credential; the nodes' own are not.
        for path in (API, "/admin/v1/console/nodes", "/admin/v1/keys"):
            foreign = {"Origin": "http://evil.example", **admin_headers()}
            assert await status_of(fleet, fleet.a.url + path, **foreign) == 403
            own = {"Origin": fleet.a.url, **admin_headers()}
            assert await status_of(fleet, fleet.a.url + path, **own) == 200
        async with fleet.group.http.post(
            f"{fleet.a.url}/admin/v1/console/nodes/anything/drain",
            headers={"Origin": "http://evil.example", **admin_headers()},
        ) as drain:
            assert drain.status == 403

        # No admin API, no console.
        plain = await fleet.group.node("c", admin="false")
        assert await status_of(fleet, plain.url + "/console") == 404
        assert await status_of(fleet, plain.url + API, **admin_headers()) == 404
        assert await status_of(fleet, fleet.a.url + "/console") == 200
