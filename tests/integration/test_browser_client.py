"""The browser demo client (``gateway/static``) end to end, in Debian's headless Chromium.

Chromium's fake microphone plays a generated WAV; the page (served by the gateway, which runs on
the local model at real-time pace) captures it with its AudioWorklet, sends PCM16 at 16 kHz, and
plays the reply through its playback worklet. Everything the test checks is on the page (the DOM
and ``window.demo.stats``) or in the gateway's audit. The gateway is reached through a TCP proxy
that the test can cut, to drop the page's socket as a lost network would.

Skipped, saying so, when Chromium or Playwright is missing; ``.ci/run`` installs Chromium first.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from browser_kit import (
    CHROMIUM_FLAGS,
    CuttableProxy,
    chromium_path,
    over_websocket,
    write_voice_wav,
)
from harness import Gateway, GatewayFactory, token

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

CHROMIUM = chromium_path()
try:
    from playwright.async_api import Browser, Page, async_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    async_playwright = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or async_playwright is None,
    reason="browser test skipped: no Chromium (apt-get install chromium) or no playwright",
)

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "img" / "browser-client.png"
WAIT_MS = 15_000
DENTIST = {"title": "Dentist", "start": "2026-12-01T10:00:00+01:00"}


@pytest.fixture
async def proxied(gateway_factory: GatewayFactory) -> AsyncIterator[tuple[Gateway, CuttableProxy]]:
    # Real-time pace: the reply's audio arrives as a live stream would, for the playback queue.
    gateway = await gateway_factory(local_pace=1.0, resume_window_s=30.0)
    proxy = CuttableProxy(int(gateway.url.rsplit(":", 1)[1]))
    await proxy.start()
    try:
        yield gateway, proxy
    finally:
        await proxy.stop()


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    assert async_playwright is not None
    assert CHROMIUM is not None
    wav = tmp_path / "mic.wav"
    write_voice_wav(wav, lead_ms=1500, voice_ms=900, tail_ms=8000)
    flags = [*CHROMIUM_FLAGS, f"--use-file-for-fake-audio-capture={wav}%noloop"]
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=flags
        )
        try:
            yield launched
        finally:
            await launched.close()


async def open_page(browser: Browser, url: str) -> tuple[Page, list[str]]:
    page = await browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    await page.goto(over_websocket(url))
    await page.wait_for_selector("body[data-ready=true]")
    return page, problems


async def stats(page: Page) -> dict[str, Any]:
    value: dict[str, Any] = await page.evaluate("() => ({...window.demo.stats})")
    return value


async def test_voice_reply_tools_confirmation_and_resume(
    proxied: tuple[Gateway, CuttableProxy], browser: Browser
) -> None:
    gateway, proxy = proxied
    jwt = token("browser-user")
    page, problems = await open_page(browser, f"http://127.0.0.1:{proxy.port}/?token={jwt}")

    await page.click("[data-testid=connect]")
    await page.wait_for_selector("[data-testid=status][data-state=live]", timeout=WAIT_MS)
    session_id = await page.inner_text("[data-testid=session-id]")
    assert session_id.startswith("sess_")

    # The WAV's voiced burst: captured, sent, heard by the model's VAD, transcribed, answered.
    spoken = page.locator("[data-testid=transcript] li[data-role=user]").filter(has_text="audio:")
    await spoken.wait_for(timeout=WAIT_MS)
    heard_ms = int((await spoken.inner_text()).split("audio:")[1].split("ms")[0])
    assert 700 <= heard_ms <= 1300, heard_ms  # a 900 ms burst, as the gateway's VAD measured it
    reply = page.locator("[data-testid=transcript] li[data-role=assistant]").filter(
        has_text="You said: audio:"
    )
    await reply.wait_for(timeout=WAIT_MS)
    # Its audio is played through the worklet to the last sample, with no underrun.
    await page.wait_for_function(
        "() => window.demo.stats.playedSamples > 0 && "
        "window.demo.stats.playedSamples === window.demo.stats.receivedSamples",
        timeout=WAIT_MS,
    )
    played = await stats(page)
    assert played["framesSent"] > 100  # 20 ms frames from the microphone, live
    assert played["underruns"] == 0, played
    # The level meter followed the microphone.
    assert await page.evaluate("() => document.getElementById('level').max") == 0

    # A typed tool call that needs confirmation opens the dialog; approving it runs the tool.
    await page.fill("[data-testid=text]", f"/tool calendar_create_event {json.dumps(DENTIST)}")
    await page.click("[data-testid=send]")
    await page.wait_for_selector("dialog[open]", timeout=WAIT_MS)
    assert "Dentist" in await page.inner_text("[data-testid=confirm-prompt]")
    shown = json.loads(await page.input_value("[data-testid=confirm-params]"))
    assert shown["title"] == "Dentist"
    await page.click("[data-testid=approve]")
    finished = page.locator("[data-testid=tools] li[data-state=ok]")
    await finished.wait_for(timeout=WAIT_MS)
    assert "calendar_create_event" in await finished.inner_text()
    assert '"title":"Dentist"' in await finished.inner_text()
    assert await page.locator("dialog[open]").count() == 0
    assert gateway.decisions("calendar_create_event") == [
        ("calendar_create_event", "confirmation_pending"),
        ("calendar_create_event", "confirmed"),
    ]

    # The network drops: the page reconnects through the same address and resumes.
    proxy.cut()
    await page.wait_for_selector("[data-testid=banner][data-tone=good]", timeout=WAIT_MS)
    assert "resumed" in await page.inner_text("[data-testid=banner]")
    assert await page.inner_text("[data-testid=session-id]") == session_id
    assert (await stats(page))["resumes"] == 1
    await page.fill("[data-testid=text]", "still there?")
    await page.click("[data-testid=send]")
    await (
        page.locator("[data-testid=transcript] li[data-role=assistant]")
        .filter(has_text="still there?")
        .wait_for(timeout=WAIT_MS)
    )

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert problems == []


async def test_edited_arguments_reject_and_refusals_are_shown(
    gateway_factory: GatewayFactory, browser: Browser
) -> None:
    gateway = await gateway_factory(local_pace=1.0)
    page, problems = await open_page(browser, f"{gateway.url}/?token={token('editor')}")
    await page.select_option("[data-testid=mode]", "text")
    await page.click("[data-testid=connect]")
    await page.wait_for_selector("[data-testid=status][data-state=live]", timeout=WAIT_MS)
    assert "text" in await page.inner_text("[data-testid=status]")

    # Approve with edited arguments: the tool runs with what the user wrote.
    await page.fill("[data-testid=text]", f"/tool calendar_create_event {json.dumps(DENTIST)}")
    await page.press("[data-testid=text]", "Enter")
    await page.wait_for_selector("dialog[open]", timeout=WAIT_MS)
    assert await page.is_disabled("[data-testid=approve-edited]")
    await page.fill("[data-testid=confirm-params]", "not json")
    assert await page.is_disabled("[data-testid=approve-edited]")
    edited = {**DENTIST, "title": "Dentist (moved)", "start": "2026-12-02T11:00:00+01:00"}
    await page.fill("[data-testid=confirm-params]", json.dumps(edited))
    await page.click("[data-testid=approve-edited]")
    finished = page.locator("[data-testid=tools] li[data-state=ok]")
    await finished.wait_for(timeout=WAIT_MS)
    assert "Dentist (moved)" in await finished.inner_text()

    # Reject: nothing runs, and the timeline says so.
    other = {**DENTIST, "start": "2026-12-03T09:00:00+01:00"}
    await page.fill("[data-testid=text]", f"/tool calendar_create_event {json.dumps(other)}")
    await page.press("[data-testid=text]", "Enter")
    await page.wait_for_selector("dialog[open]", timeout=WAIT_MS)
    await page.click("[data-testid=reject]")
    await (
        page.locator("[data-testid=tools] li")
        .filter(has_text="confirmation rejected")
        .wait_for(timeout=WAIT_MS)
    )
    assert [d for _, d in gateway.decisions("calendar_create_event")].count("rejected") == 1

    # An error event is shown plainly; ending the session says why it ended.
    await page.evaluate(
        "() => window.demo.connection.send({type: 'confirmation.respond', "
        "confirmation_id: 'conf_nope', decision: 'approve'})"
    )
    await (
        page.locator("[data-testid=errors] li")
        .filter(has_text="confirmation_not_found")
        .wait_for(timeout=WAIT_MS)
    )
    await page.click("[data-testid=disconnect]")
    await page.wait_for_selector("[data-testid=banner]:has-text('Session ended: client')")
    assert problems == []

    # A refused token: the page asks the gateway why and shows it.
    refused, _ = await open_page(browser, f"{gateway.url}/?token=not-a-jwt")
    await refused.click("[data-testid=connect]")
    await refused.wait_for_selector("[data-testid=status][data-state=failed]", timeout=WAIT_MS)
    assert "unauthorized: invalid token" in await refused.inner_text("[data-testid=banner]")


async def test_a_resume_after_the_window_shows_that_it_failed(
    gateway_factory: GatewayFactory, browser: Browser
) -> None:
    gateway = await gateway_factory(local_pace=1.0, resume_window_s=0.1)
    proxy = CuttableProxy(int(gateway.url.rsplit(":", 1)[1]))
    await proxy.start()
    try:
        page, problems = await open_page(
            browser, f"http://127.0.0.1:{proxy.port}/?token={token('late')}"
        )
        await page.select_option("[data-testid=mode]", "text")
        await page.click("[data-testid=connect]")
        await page.wait_for_selector("[data-testid=status][data-state=live]", timeout=WAIT_MS)
        proxy.cut()  # the first retry comes after 250 ms, the next after 500 ms more
        await page.wait_for_selector("[data-testid=status][data-state=failed]", timeout=WAIT_MS)
        assert "could not resume" in await page.inner_text("[data-testid=banner]")
        assert await page.is_disabled("[data-testid=text]")
        assert problems == []
    finally:
        await proxy.stop()


async def test_on_openai_the_page_captures_at_24_khz_so_nothing_is_resampled(
    gateway_factory: GatewayFactory, browser: Browser
) -> None:
    """OpenAI Realtime takes 24 kHz: session.started says so (``upstream_input_rate``), the
    page tells the gateway with ``session.update`` and its worklet switches, and every frame
    it sends afterwards is 20 ms at 24 kHz, which the session passes on untouched."""
    async with FakeRealtimeServer(FakeOptions()) as fake:
        gateway = await gateway_factory(
            provider="openai", openai_ws_url=fake.ws_url, openai_api_key="sk-test"
        )
        page, problems = await open_page(browser, f"{gateway.url}/?token={token('rate-user')}")
        sent: list[str | bytes] = []
        page.on("websocket", lambda ws: ws.on("framesent", lambda m: sent.append(m)))
        await page.click("[data-testid=connect]")
        await page.wait_for_selector("[data-testid=status][data-state=live]", timeout=WAIT_MS)
        spoken = page.locator("[data-testid=transcript] li[data-role=user]").filter(
            has_text="audio:"
        )
        await spoken.wait_for(timeout=WAIT_MS)  # the voiced burst reached the model, and back
        assert (await stats(page))["captureRate"] == 24000
        session = next(iter(gateway.manager.sessions.values()))
        assert session.profile.input_rate == 24000
    updates = [json.loads(m) for m in sent if isinstance(m, str) and '"session.update"' in m]
    assert updates == [{"type": "session.update", "audio": {"input_rate": 24000}}]
    switched = next(i for i, m in enumerate(sent) if isinstance(m, str) and "session.update" in m)
    frames = [len(m) for m in sent[switched:] if isinstance(m, bytes)]
    assert len(frames) > 50
    assert set(frames) == {960}  # 20 ms of PCM16 at 24 kHz, nothing of the old rate
    assert problems == []
