"""The browser demo client (``gateway/static``) over WebRTC when its peer connection is lost, and
without WebRTC, in Debian's headless Chromium (as ``test_the_demo_page_over_webrtc.py``).

A peer connection the gateway drops is replaced by a new one that resumes the session; when
none can be had the session resumes over the WebSocket (its audio stays 48 kHz). A page without
WebRTC (no ``RTCPeerConnection``, the offer refused) runs over the WebSocket from the start, and
says why. The offer is refused by the browser's own request routing (Playwright's
``page.route``), the gateway's peer connection closed from the test.

Skipped, saying so, when Chromium or Playwright is missing; ``.ci/run`` installs Chromium first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from browser_kit import Launch, chromium_path, open_watched, webrtc_call_of, webrtc_chromium
from demo_page_kit import ASSISTANT, ON_WEBRTC, TEST_S, WAIT_MS, connect, stats, until
from harness import GatewayFactory, token

CHROMIUM = chromium_path()
try:
    from playwright.async_api import Page, async_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    async_playwright = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or async_playwright is None,
    reason="browser test skipped: no Chromium (apt-get install chromium) or no playwright",
)

ON_WEBSOCKET = "[data-testid=transport][data-transport=websocket]"
RESUMED = "[data-testid=banner][data-tone=good]"


@pytest.fixture
async def chromium(tmp_path: Path) -> AsyncIterator[Launch]:
    async with webrtc_chromium(tmp_path) as launch:
        yield launch


async def refuse_offers(page: Page) -> None:
    """The page's offers get 503 with the gateway's kind of JSON error, from now on."""
    refusal = {"error": {"code": "unavailable", "message": "no WebRTC today"}}

    async def refuse(route: Any) -> None:
        await route.fulfill(status=503, content_type="application/json", body=json.dumps(refusal))

    await page.route("**/v1/webrtc/offer", refuse)


@pytest.mark.parametrize("dropped", ["peer_connection", "call"])
async def test_a_peer_connection_the_gateway_drops_is_resumed_on_a_new_one(
    gateway_factory: GatewayFactory, chromium: Launch, dropped: str
) -> None:
    """``peer_connection``: the gateway's peer connection closes under its call; ``call``: the
    call ends as after a lost peer. Either way the session is parked for the page's resume."""
    async with asyncio.timeout(TEST_S):
        gateway = await gateway_factory(local_pace=1.0, resume_window_s=30.0)
        opened = await open_watched(
            await chromium(voice_ms=0), f"{gateway.url}/?token={token('rtc-resume')}"
        )
        page = opened.page
        session_id = await connect(page)
        await page.wait_for_selector(ON_WEBRTC, timeout=WAIT_MS)
        first = webrtc_call_of(gateway)
        session = gateway.manager.sessions[session_id]
        if dropped == "peer_connection":
            await first.link.close()
        else:
            await first.close()
        # Either way the call lets the session go (parked, as after a dropped socket), and
        # the page's resume picks it up on a new peer connection.
        await asyncio.wait_for(first.closed.wait(), 5)
        assert not session.ended.is_set()

        await page.wait_for_selector(RESUMED, timeout=WAIT_MS)
        assert "resumed" in await page.inner_text("[data-testid=banner]")
        assert await page.inner_text("[data-testid=session-id]") == session_id
        await page.wait_for_selector(ON_WEBRTC, timeout=WAIT_MS)
        resumed = await stats(page)
        assert (resumed["resumes"], resumed["peerConnections"]) == (1, 2), resumed
        assert webrtc_call_of(gateway) is not first
        await page.fill("[data-testid=text]", "still there?")
        await page.click("[data-testid=send]")
        await page.locator(ASSISTANT).filter(has_text="still there?").wait_for(timeout=WAIT_MS)
        await until(page, "window.demo.stats.rtc.audioEnergy > 0.001")  # on the new track
        assert not session.ended.is_set()
        assert opened.sockets == []
        assert opened.problems == []


async def test_when_webrtc_cannot_come_back_the_session_resumes_over_the_websocket(
    gateway_factory: GatewayFactory, chromium: Launch
) -> None:
    """The session began on WebRTC, so its audio is 48 kHz: resumed over the WebSocket it stays
    so (session.started says it), and the page plays and captures at that rate there."""
    async with asyncio.timeout(TEST_S):
        gateway = await gateway_factory(local_pace=1.0, resume_window_s=30.0)
        opened = await open_watched(
            await chromium(voice_ms=0), f"{gateway.url}/?token={token('rtc-to-ws')}"
        )
        page = opened.page
        session_id = await connect(page)
        await page.wait_for_selector(ON_WEBRTC, timeout=WAIT_MS)
        await refuse_offers(page)
        await webrtc_call_of(gateway).close()

        await page.wait_for_selector(RESUMED, timeout=WAIT_MS)
        assert await page.inner_text("[data-testid=session-id]") == session_id
        await page.wait_for_selector(ON_WEBSOCKET, timeout=WAIT_MS)
        reason = await page.inner_text("[data-testid=transport-reason]")
        assert "the offer was refused: unavailable: no WebRTC today" in reason, reason
        audio = await page.evaluate("() => window.demo.connection.session.audio")
        assert (audio["input_rate"], audio["output_rate"]) == (48000, 48000)
        await page.fill("[data-testid=text]", "and now?")
        await page.click("[data-testid=send]")
        await page.locator(ASSISTANT).filter(has_text="and now?").wait_for(timeout=WAIT_MS)
        # The spoken reply came as binary frames at 48 kHz and played through the worklet.
        await until(
            page,
            "window.demo.stats.playedSamples > 0 && "
            "window.demo.stats.playedSamples === window.demo.stats.receivedSamples",
        )
        assert (await stats(page))["captureRate"] == 48000
        assert len(opened.sockets) == 1
        assert opened.problems == []


async def test_without_webrtc_the_page_runs_over_the_websocket_and_says_why(
    gateway_factory: GatewayFactory, chromium: Launch
) -> None:
    async with asyncio.timeout(TEST_S):
        gateway = await gateway_factory(local_pace=1.0)
        browser = await chromium(voice_ms=0)
        url = f"{gateway.url}/?token={token('rtc-none')}"
        no_rtc = "delete window.RTCPeerConnection; delete window.webkitRTCPeerConnection;"
        cases: list[tuple[str, str | None, bool, str]] = [
            (url, no_rtc, False, "WebRTC unavailable: this browser has no RTCPeerConnection"),
            (url, None, True, "WebRTC unavailable: the offer was refused: unavailable"),
            (f"{url}&transport=websocket", None, False, "chosen"),
        ]
        for address, init_script, refused, says in cases:
            opened = await open_watched(browser, address, init_script=init_script)
            page = opened.page
            if refused:
                await refuse_offers(page)
            await connect(page, "text")
            await page.wait_for_selector(ON_WEBSOCKET, timeout=WAIT_MS)
            assert await page.inner_text("[data-testid=transport]") == "WebSocket"
            assert says in await page.inner_text("[data-testid=transport-reason]")
            assert (await stats(page))["transport"] == "websocket"
            await page.fill("[data-testid=text]", "hello")
            await page.click("[data-testid=send]")
            await (
                page.locator(ASSISTANT).filter(has_text="You said: hello").wait_for(timeout=WAIT_MS)
            )
            assert len(opened.sockets) == 1
            assert opened.problems == []
            await page.close()
        # ?transport=webrtc with no WebRTC: no fallback, the page says why it failed.
        opened = await open_watched(browser, f"{url}&transport=webrtc", init_script=no_rtc)
        await opened.page.click("[data-testid=connect]")
        failed = "[data-testid=status][data-state=failed]"
        await opened.page.wait_for_selector(failed, timeout=WAIT_MS)
        banner = await opened.page.inner_text("[data-testid=banner]")
        assert "no RTCPeerConnection" in banner, banner
        assert opened.sockets == []
