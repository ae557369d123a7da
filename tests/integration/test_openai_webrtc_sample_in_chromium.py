"""OpenAI's browser WebRTC sample, in headless Chromium, against the gateway with only its base
URL changed.

The page is written as OpenAI's docs write it (its JavaScript below follows the sample line by
line): it fetches an ephemeral key from its own server's ``/token`` (here a tiny test server,
which calls the gateway's ``/v1/realtime/client_secrets`` with a ``gk_`` key the page never
sees), makes ``new RTCPeerConnection()``, plays ``pc.ontrack`` in an ``<audio autoplay>``, adds
the ``getUserMedia`` microphone (Chromium's fake one, playing a generated WAV), opens the
``oai-events`` data channel, and posts ``offer.sdp`` to ``baseUrl + "/calls?model=…"`` with the
key. The page is served from another origin than the gateway's (listed in
``GATEWAY_ALLOWED_ORIGINS``): the browser's CORS preflights are answered.

It must hold a voice turn (the WAV's voiced burst heard by the server VAD and answered, the
reply's audio received on the track: ``getStats`` inbound-rtp energy) and a tool call (a text
turn on the data channel, run by the gateway), the GA events seen on the data channel.
Skipped, saying so, when Chromium or Playwright is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from browser_kit import CHROMIUM_FLAGS, chromium_path, write_voice_wav
from harness import Gateway, GatewayFactory, token

CHROMIUM = chromium_path()
try:
    from playwright.async_api import Browser, Page, async_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    async_playwright = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or async_playwright is None,
    reason="browser test skipped: no Chromium (apt-get install chromium) or no playwright",
)

WAIT_MS = 20_000
# OpenAI's sample, with its base URL and model changed; window.events keeps what the data
# channel said, for the test.
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>Realtime WebRTC sample</title></head>
<body><script type="module">
window.events = [];
window.init = async function init() {
  // Get a session token for OpenAI Realtime API
  const tokenResponse = await fetch("/token");
  const data = await tokenResponse.json();
  const EPHEMERAL_KEY = data.value;

  // Create a peer connection
  const pc = new RTCPeerConnection();
  window.pc = pc;

  // Set up to play remote audio from the model
  const audioElement = document.createElement("audio");
  audioElement.autoplay = true;
  document.body.appendChild(audioElement);
  pc.ontrack = (e) => (audioElement.srcObject = e.streams[0]);

  // Add local audio track for microphone input in the browser
  const ms = await navigator.mediaDevices.getUserMedia({
    audio: true,
  });
  pc.addTrack(ms.getTracks()[0]);

  // Set up data channel for sending and receiving events
  const dc = pc.createDataChannel("oai-events");
  window.dc = dc;
  dc.addEventListener("message", (e) => window.events.push(JSON.parse(e.data)));

  // Start the session using the Session Description Protocol (SDP)
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);

  const baseUrl = "__GATEWAY__/v1/realtime/calls";
  const model = "local";
  const sdpResponse = await fetch(`${baseUrl}?model=${model}`, {
    method: "POST",
    body: offer.sdp,
    headers: {
      Authorization: `Bearer ${EPHEMERAL_KEY}`,
      "Content-Type": "application/sdp",
    },
  });

  const answer = {
    type: "answer",
    sdp: await sdpResponse.text(),
  };
  await pc.setRemoteDescription(answer);
  return {status: sdpResponse.status, location: sdpResponse.headers.get("Location")};
};
window.received = async function received() {
  const stats = await window.pc.getStats();
  let energy = 0, samples = 0;
  stats.forEach((s) => {
    if (s.type === "inbound-rtp" && s.kind === "audio") {
      energy += s.totalAudioEnergy || 0;
      samples += s.totalSamplesReceived || 0;
    }
  });
  return {energy, samples};
};
document.body.dataset.ready = "true";
</script></body></html>
"""


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    assert async_playwright is not None
    assert CHROMIUM is not None
    wav = tmp_path / "mic.wav"
    write_voice_wav(wav, lead_ms=1500, voice_ms=900, tail_ms=8000)
    flags = [
        *CHROMIUM_FLAGS,
        f"--use-file-for-fake-audio-capture={wav}%noloop",
        # Host candidates as addresses: aiortc cannot resolve Chromium's mDNS names here.
        "--disable-features=WebRtcHideLocalIpsWithMdns",
        "--autoplay-policy=no-user-gesture-required",
    ]
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=flags
        )
        try:
            yield launched
        finally:
            await launched.close()


async def sample_site(app_state: dict[str, Any]) -> tuple[web.AppRunner, str]:
    """The sample's own server: the page, and ``/token`` (the server side of the sample: it
    holds the gateway key, ``app_state["secret"]``, and asks the gateway for a client
    secret)."""

    async def page(_: web.Request) -> web.Response:
        gateway: Gateway = app_state["gateway"]
        return web.Response(text=PAGE.replace("__GATEWAY__", gateway.url), content_type="text/html")

    async def token_route(_: web.Request) -> web.Response:
        gateway: Gateway = app_state["gateway"]
        secret = app_state["secret"]
        session = {"type": "realtime", "model": "local", "audio": {"output": {"voice": "marin"}}}
        async with gateway.http.post(
            gateway.url + "/v1/realtime/client_secrets",
            json={"session": session},
            headers={"Authorization": f"Bearer {secret}"},
        ) as minted:
            return web.json_response(await minted.json(), status=minted.status)

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/token", token_route)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def events(page: Page) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = await page.evaluate("() => window.events")
    return seen


async def test_openai_s_browser_sample_holds_a_voice_turn_and_a_tool_call(
    gateway_factory: GatewayFactory, browser: Browser
) -> None:
    app_state: dict[str, Any] = {}
    runner, origin = await sample_site(app_state)
    try:
        # The page's origin is not the gateway's: the operator lists it.
        gateway = await gateway_factory(admin=True, allowed_origins=origin)
        admin = {"Authorization": f"Bearer {token('ops', ['admin'])}"}
        async with gateway.http.post(
            gateway.url + "/admin/v1/keys", json={"owner": "sample-app"}, headers=admin
        ) as made:
            assert made.status == 201
            app_state.update(gateway=gateway, secret=(await made.json())["secret"])

        page = await browser.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        page.on(
            "console",
            lambda message: problems.append(message.text) if message.type == "error" else None,
        )
        await page.goto(origin + "/")
        await page.wait_for_selector("body[data-ready=true]", state="attached")
        opened = await page.evaluate("() => window.init()")
        assert opened["status"] == 201, opened
        assert opened["location"].startswith("/v1/realtime/calls/rtc_")

        # The voice turn: the WAV's 900 ms burst, heard, answered, its audio on the track.
        await page.wait_for_function(
            "() => window.events.some((e) => e.type === 'output_audio_buffer.stopped')",
            timeout=WAIT_MS,
        )
        kinds = [e["type"] for e in await events(page)]
        assert kinds[0] == "session.created"
        for kind in (
            "input_audio_buffer.speech_started",
            "response.created",
            "response.output_audio_transcript.delta",
            "output_audio_buffer.started",
            "response.done",
        ):
            assert kind in kinds, kinds
        assert "response.output_audio.delta" not in kinds
        spoken = "".join(
            e["delta"]
            for e in await events(page)
            if e["type"] == "response.output_audio_transcript.delta"
        )
        assert spoken.startswith("You said: audio:"), spoken
        heard_ms = int(spoken.split("audio:")[1].split("ms")[0])
        assert 600 <= heard_ms <= 1400, heard_ms  # the 900 ms burst, as the VAD measured it
        await page.wait_for_function(
            "async () => { const r = await window.received(); return r.energy > 0; }",
            timeout=WAIT_MS,
        )
        received = await page.evaluate("() => window.received()")
        assert received["samples"] > 0, received

        # A tool call, typed on the data channel, run by the gateway.
        await page.evaluate(
            """() => {
              window.dc.send(JSON.stringify({type: "conversation.item.create", item: {
                type: "message", role: "user",
                content: [{type: "input_text", text: "/tool get_current_time {}"}]}}));
              window.dc.send(JSON.stringify({type: "response.create"}));
            }"""
        )
        await page.wait_for_function(
            """() => window.events
                .filter((e) => e.type === 'response.output_audio_transcript.delta')
                .map((e) => e.delta).join('').includes('Tool results: get_current_time=')""",
            timeout=WAIT_MS,
        )
        assert ("get_current_time", "executed") in gateway.decisions("get_current_time")
        assert [e for e in await events(page) if e["type"] == "error"] == []
        (session,) = gateway.manager.sessions.values()
        assert session.user.user_id == "sample-app"  # the key's owner: the minter
        await page.evaluate("() => window.pc.close()")
        await page.close()
        assert problems == []
    finally:
        await runner.cleanup()
