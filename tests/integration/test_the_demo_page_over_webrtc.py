"""The browser demo client (``gateway/static``) over WebRTC, in Debian's headless Chromium.

The page makes a peer connection to the gateway (``POST /v1/webrtc/offer``, loopback, host
candidates): its data channel carries the native protocol, its audio track Chromium's fake
microphone (a generated WAV), and the gateway's track the replies, which the page plays through
an ``<audio>`` element. What is checked is on the page (the DOM, ``window.demo.stats`` with the
peer connection's own counters, ``window.demo.events``), or in the gateway (its audit, the
reply track's counters). Its resumes and its fallback to the WebSocket:
``test_the_demo_page_resumes_or_falls_back_to_the_websocket.py``.

Skipped, saying so, when Chromium or Playwright is missing; ``.ci/run`` installs Chromium first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from browser_kit import (
    Launch,
    WatchedPage,
    chromium_path,
    open_watched,
    webrtc_call_of,
    webrtc_chromium,
)
from demo_page_kit import ASSISTANT, ON_WEBRTC, TEST_S, WAIT_MS, connect, stats, until
from harness import Gateway, GatewayFactory, token

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

CHROMIUM = chromium_path()
try:
    from playwright.async_api import async_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    async_playwright = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or async_playwright is None,
    reason="browser test skipped: no Chromium (apt-get install chromium) or no playwright",
)

DENTIST = {"title": "Dentist", "start": "2026-12-01T10:00:00+01:00"}
TRANSCRIPT = "[data-testid=transcript]"


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


@pytest.fixture
async def chromium(tmp_path: Path) -> AsyncIterator[Launch]:
    async with webrtc_chromium(tmp_path) as launch:
        yield launch


async def spoken_turn_is_answered(gateway: Gateway, opened: WatchedPage) -> None:
    page = opened.page
    session_id = await connect(page)
    assert session_id.startswith("sess_")
    await page.wait_for_selector(ON_WEBRTC, timeout=WAIT_MS)
    assert await page.inner_text("[data-testid=transport]") == "WebRTC"

    # The WAV's voiced burst: on the track, heard by the model's VAD, transcribed, answered.
    spoken = page.locator(f"{TRANSCRIPT} li[data-role=user]").filter(has_text="audio:")
    await spoken.wait_for(timeout=WAIT_MS)
    heard_ms = int((await spoken.inner_text()).split("audio:")[1].split("ms")[0])
    assert 600 <= heard_ms <= 1400, heard_ms  # a 900 ms burst, through Opus and the AGC
    await page.locator(ASSISTANT).filter(has_text="You said: audio:").wait_for(timeout=WAIT_MS)
    # The reply's audio came on the gateway's track and played: energy on the page's side.
    await until(page, "window.demo.stats.rtc && window.demo.stats.rtc.audioEnergy > 0.001")
    played = await stats(page)
    assert played["transport"] == "webrtc"
    assert played["rtc"]["packetsSent"] > 100, played  # the microphone, 20 ms a packet
    assert played["rtc"]["packetsReceived"] > 50, played
    assert played["captureRate"] == 48000
    assert await page.evaluate("() => !document.getElementById('remote-audio').paused")
    session = gateway.manager.sessions[session_id]
    assert (session.profile.input_rate, session.profile.output_rate) == (48000, 48000)
    assert webrtc_call_of(gateway).link.out.sent_audio_ms > 0
    assert opened.sockets == []  # no WebSocket at all
    assert opened.problems == []


async def test_a_spoken_turn_is_answered_with_audio_the_page_plays_over_webrtc(
    gateway_factory: GatewayFactory, chromium: Launch
) -> None:
    async with asyncio.timeout(TEST_S):
        gateway = await gateway_factory(local_pace=1.0)
        browser = await chromium()
        opened = await open_watched(browser, f"{gateway.url}/?token={token('rtc-voice')}")
        await spoken_turn_is_answered(gateway, opened)


async def test_on_the_openai_fake_the_tracks_stay_at_48_khz(
    gateway_factory: GatewayFactory, chromium: Launch
) -> None:
    """OpenAI takes 24 kHz: over the WebSocket the page would switch its capture to it; over
    WebRTC the microphone is the track's 48 kHz whatever the upstream takes, and the page asks
    for no other rate (the gateway resamples for the upstream)."""
    async with asyncio.timeout(TEST_S), FakeRealtimeServer(FakeOptions()) as fake:
        gateway = await gateway_factory(
            provider="openai", openai_ws_url=fake.ws_url, openai_api_key="sk-test"
        )
        browser = await chromium()
        opened = await open_watched(browser, f"{gateway.url}/?token={token('rtc-openai')}")
        await spoken_turn_is_answered(gateway, opened)
        started = await opened.page.evaluate("() => window.demo.connection.session")
        assert started["provider"] == "openai"
        assert started["audio"]["upstream_input_rate"] == 24000


async def test_a_tool_call_is_confirmed_in_the_page_over_webrtc(
    gateway_factory: GatewayFactory, chromium: Launch
) -> None:
    async with asyncio.timeout(TEST_S):
        gateway = await gateway_factory(local_pace=1.0)
        opened = await open_watched(
            await chromium(voice_ms=0), f"{gateway.url}/?token={token('rtc-tools')}"
        )
        page = opened.page
        await connect(page)
        await page.wait_for_selector(ON_WEBRTC, timeout=WAIT_MS)
        await page.fill("[data-testid=text]", f"/tool calendar_create_event {json.dumps(DENTIST)}")
        await page.click("[data-testid=send]")
        await page.wait_for_selector("dialog[open]", timeout=WAIT_MS)
        assert "Dentist" in await page.inner_text("[data-testid=confirm-prompt]")
        shown = json.loads(await page.input_value("[data-testid=confirm-params]"))
        assert (shown["title"], shown["start"]) == (DENTIST["title"], DENTIST["start"])
        await page.click("[data-testid=approve]")
        finished = page.locator("[data-testid=tools] li[data-state=ok]")
        await finished.wait_for(timeout=WAIT_MS)
        assert '"title":"Dentist"' in await finished.inner_text()
        assert await page.locator("dialog[open]").count() == 0
        assert gateway.decisions("calendar_create_event") == [
            ("calendar_create_event", "confirmation_pending"),
            ("calendar_create_event", "confirmed"),
        ]
        # The model's spoken answer to the result played from the gateway's track.
        answer = page.locator(f"{ASSISTANT}[data-status=completed]").filter(has_text="ok")
        await answer.wait_for(timeout=WAIT_MS)
        assert "Tool results: calendar_create_event=" in await answer.inner_text()
        await until(page, "window.demo.stats.rtc.audioEnergy > 0.001")
        assert await page.locator("[data-testid=errors] li").count() == 0

        # Ending the session over the data channel ends it, and both sides close the call.
        (session,) = gateway.manager.sessions.values()
        call = webrtc_call_of(gateway)
        await page.click("[data-testid=disconnect]")
        await page.wait_for_selector("[data-testid=banner]:has-text('Session ended: client')")
        await asyncio.wait_for(session.ended.wait(), 5)
        await until(page, "!document.getElementById('remote-audio').srcObject")
        # The gateway closes its call after session.ended (its outbound first, then the link).
        await asyncio.wait_for(call.outbound.released.wait(), 5)
        assert opened.sockets == []
        assert opened.problems == []


async def test_barge_in_over_webrtc_empties_the_gateways_track_at_once(
    gateway_factory: GatewayFactory, chromium: Launch
) -> None:
    """The user talks over a long reply: ``speech.started``, the reply ends ``interrupted``,
    the gateway's track sends nothing more of it (its counter stops, the page's level falls to
    silence), and the model's memory is cut at what the track had sent."""
    async with asyncio.timeout(TEST_S):
        gateway = await gateway_factory(local_pace=1.0)
        # Silence long enough to connect and ask for the reply, then 900 ms of speech.
        browser = await chromium(lead_ms=4000, voice_ms=900)
        opened = await open_watched(browser, f"{gateway.url}/?token={token('rtc-barge')}")
        page = opened.page
        session_id = await connect(page)
        await page.wait_for_selector(ON_WEBRTC, timeout=WAIT_MS)
        long_text = words(80)  # 8 s of speech at real-time pace
        await page.fill("[data-testid=text]", f"/say {long_text}")
        await page.click("[data-testid=send]")
        await until(page, "window.demo.stats.rtc && window.demo.stats.rtc.audioLevel > 0.05")
        call = webrtc_call_of(gateway)

        await until(page, "window.demo.events.some(e => e.type === 'speech.started')")
        sent_at_speech = call.link.out.sent_audio_ms
        bubble = page.locator(f"{ASSISTANT}[data-status]").first
        await bubble.wait_for(timeout=WAIT_MS)
        sent_at_done = call.link.out.sent_audio_ms
        assert await bubble.get_attribute("data-status") == "interrupted"
        shown = (await bubble.inner_text()).split("\n")[0]
        assert long_text.startswith(shown), shown
        assert shown != long_text
        # Nothing of the reply left the track after speech.started (a frame in flight at most).
        assert sent_at_done - sent_at_speech <= 20, (sent_at_speech, sent_at_done)
        assert 1000 < sent_at_speech < 7000, sent_at_speech
        # On the page the reply fell silent (the jitter buffer, then the stats' 250 ms).
        await until(page, "window.demo.stats.rtc.audioLevel < 0.01", within_ms=2000)

        events = await page.evaluate("() => window.demo.events")
        rid = next(e["response_id"] for e in events if e["type"] == "response.started")
        started_at = next(e["at"] for e in events if e["type"] == "response.started")
        speech_at = next(e["at"] for e in events if e["type"] == "speech.started")
        # The model's memory was cut at what the track had sent when the user spoke (its
        # reports come every 60 ms; the track starts within a frame of the reply's audio).
        session: Any = gateway.manager.sessions[session_id]
        ((truncated_rid, truncated_ms),) = session.transport.truncations
        assert truncated_rid == rid
        elapsed_ms = speech_at - started_at
        assert elapsed_ms - 400 <= truncated_ms <= elapsed_ms + 100, (truncated_ms, elapsed_ms)

        # The user's utterance is then answered as usual, and heard.
        await page.locator(ASSISTANT).filter(has_text="You said: audio:").wait_for(timeout=WAIT_MS)
        await until(page, "window.demo.stats.rtc.audioLevel > 0.05")
        assert opened.problems == []
