"""What the demo page's WebRTC tests share: the page's selectors and three steps (connect,
read its stats, wait for a condition of the page)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.async_api import Page

WAIT_MS = 15_000  # one page condition
TEST_S = 60  # one test, whole
ASSISTANT = "[data-testid=transcript] li[data-role=assistant]"
ON_WEBRTC = "[data-testid=transport][data-transport=webrtc]"
LIVE = "[data-testid=status][data-state=live]"


async def connect(page: Page, mode: str = "voice") -> str:
    """Connect in ``mode``; the session's id once it is live."""
    await page.select_option("[data-testid=mode]", mode)
    await page.click("[data-testid=connect]")
    await page.wait_for_selector(LIVE, timeout=WAIT_MS)
    return await page.inner_text("[data-testid=session-id]")


async def stats(page: Page) -> dict[str, Any]:
    value: dict[str, Any] = await page.evaluate("() => structuredClone(window.demo.stats)")
    return value


async def until(page: Page, condition: str, within_ms: int = WAIT_MS) -> None:
    await page.wait_for_function(f"() => {condition}", timeout=within_ms, polling=50)
