"""What the operator console's browser tests share (``test_the_console_*.py``).

- ``console_fleet``: two real gateway nodes (``a``, ``b``) on one real redis-server, on the
  local model unless told otherwise, with JWT auth, the admin API and console on, and each
  node's own origin allowed (so the page's POSTs, which carry ``Origin``, pass; any other
  origin is refused).
- ``chromium``: Debian's Chromium through Playwright (skipped loudly when either is missing,
  as ``test_browser_client.py`` is).
- ``open_console``: the console of a node in a new page, signed in with ``?token=``, its live
  stream connected; page errors and anything the page's CSP refused collected in ``problems``.
- ``admin_api`` and ``session_on``: what the test does beside the page, over plain HTTP and
  native WebSockets (``harness.Client``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from browser_kit import CHROMIUM_FLAGS, chromium_path
from cluster_kit import Cluster, cluster, connect
from harness import SECRET, Client, token
from process_kit import REPO, GatewayProcess, free_port
from redis_kit import RedisServer

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page, ViewportSize

__all__ = [
    "WAIT_MS",
    "ConsolePage",
    "Fleet",
    "admin_api",
    "admin_headers",
    "admin_token",
    "chromium",
    "console_fleet",
    "open_console",
    "page_text",
    "screenshot",
    "session_on",
    "skip_without_chromium",
]

WAIT_MS = 15_000  # the longest any page condition is awaited
IMG = REPO / "docs" / "img"
VIEWPORT: ViewportSize = {"width": 1366, "height": 820}

CHROMIUM = chromium_path()
try:
    from playwright.async_api import async_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    async_playwright = None  # type: ignore[assignment]

skip_without_chromium = pytest.mark.skipif(
    CHROMIUM is None or async_playwright is None,
    reason="CONSOLE BROWSER TESTS SKIPPED: no Chromium (apt-get install chromium) or no playwright",
)


def admin_token(sub: str = "ops") -> str:
    """An admin's JWT for the fleet's secret, made when used (it expires in 5 minutes)."""
    return token(sub, ["admin"], secret=SECRET)


def admin_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {admin_token()}"}


@dataclass
class Fleet:
    group: Cluster
    a: GatewayProcess
    b: GatewayProcess


@contextlib.asynccontextmanager
async def console_fleet(redis: RedisServer, tmp: Path, **settings: str) -> AsyncIterator[Fleet]:
    ports = free_port(), free_port()
    origins = ",".join(f"http://127.0.0.1:{port}" for port in ports)
    options = {"provider": "local", **settings}
    async with cluster(
        redis, tmp, auth="jwt", auth_secret=SECRET, admin="true", allowed_origins=origins, **options
    ) as group:
        a = await group.node("a", port=str(ports[0]))
        b = await group.node("b", port=str(ports[1]))
        yield Fleet(group, a, b)


async def admin_api(
    fleet: Fleet, node: GatewayProcess, method: str, path: str, body: Any = None
) -> Any:
    """An admin API request that must succeed; its JSON answer."""
    async with fleet.group.http.request(
        method, node.url + path, json=body, headers=admin_headers()
    ) as answer:
        found = await answer.json()
        assert answer.status in (200, 201, 202), (answer.status, found)
        return found


async def session_on(
    fleet: Fleet, node: GatewayProcess, credential: str, mode: str = "text"
) -> Client:
    """A native ``/v1/session`` session on ``node``, started (``client.started``)."""
    client = await connect(fleet.group, node, Authorization=f"Bearer {credential}")
    await client.start(mode)
    return client


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    assert async_playwright is not None
    assert CHROMIUM is not None
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class ConsolePage:
    page: Page
    problems: list[str] = field(default_factory=list)

    def note(self, kind: str, text: str) -> None:
        """What the browser says of the page: anything its CSP refused is a problem (a refused
        request's status, which the browser also logs, is not)."""
        if kind == "error" and ("Content Security Policy" in text or "Refused to" in text):
            self.problems.append(f"refused by the CSP: {text}")

    def row(self, session_id: str) -> Any:
        return self.page.locator(f"[data-testid=session-row][data-session-id='{session_id}']")

    async def tab(self, name: str) -> None:
        await self.page.click(f"[data-testid=tab-{name}]")
        await self.page.wait_for_selector(f"[data-testid=panel-{name}]:not([hidden])")

    async def confirm(self) -> None:
        """Answers the console's confirm dialog with its action (Revoke, Drain)."""
        await self.page.wait_for_selector("[data-testid=confirm-dialog][open]", timeout=WAIT_MS)
        await self.page.click("[data-testid=confirm-ok]")


async def open_console(
    browser: Browser,
    node: GatewayProcess,
    credential: str | None,
    *,
    signed_in: bool = True,
    prepare: Callable[[Page], Awaitable[None]] | None = None,
) -> ConsolePage:
    """``node``'s console in a new page, ``?token=credential`` in its URL (None: none);
    with ``signed_in``, once its table is live from the stream. ``prepare(page)`` runs before
    the page loads (routes, for instance)."""
    page = await browser.new_page(viewport=VIEWPORT)
    console = ConsolePage(page)
    page.on("pageerror", lambda error: console.problems.append(f"page error: {error}"))
    page.on("console", lambda message: console.note(message.type, message.text))
    if prepare is not None:
        await prepare(page)
    query = "" if credential is None else f"?token={credential}"
    await page.goto(f"{node.url}/console{query}")
    await page.wait_for_selector("body[data-ready=true]", timeout=WAIT_MS)
    if signed_in:
        await page.wait_for_selector("[data-testid=stream-state][data-state=live]", timeout=WAIT_MS)
    return console


async def page_text(page: Page) -> str:
    """Everything the page holds as text: its markup, what it shows, every field's value, and
    what it stored (a value set on an input is not in the markup)."""
    text: str = await page.evaluate(
        """() => [
            document.documentElement.outerHTML,
            document.body.innerText,
            ...[...document.querySelectorAll('input, textarea')].map((i) => i.value),
            JSON.stringify(sessionStorage),
            JSON.stringify(localStorage),
        ].join('\\n')"""
    )
    return text


async def screenshot(page: Page, name: str) -> None:
    """``docs/img/console-{name}.png``, the whole page."""
    await page.screenshot(path=str(IMG / f"console-{name}.png"), full_page=True)
