"""What the browser test needs besides the gateway: Chromium, a fake microphone, a cuttable link.

- ``CHROMIUM_FLAGS`` (and ``WEBRTC_FLAGS``, for the page over WebRTC): how it is launched.
- ``over_websocket``: the page's URL with the WebSocket chosen (it prefers WebRTC).
- ``chromium_path``: Debian's Chromium (``GATEWAY_TEST_CHROMIUM`` overrides), or ``None``.
  Playwright drives it through ``executable_path``; it never downloads a browser.
- ``write_voice_wav``: the WAV Chromium plays as its microphone
  (``--use-file-for-fake-audio-capture``): silence, a voiced burst with a syllable rhythm and a
  gliding pitch (speech-like enough for the browser's noise suppression to keep it), silence.
- ``write_silent_wav``: a microphone that hears nothing (without a file Chromium's fake device
  beeps).
- For the page over WebRTC: ``webrtc_chromium`` (browsers with ``WEBRTC_FLAGS`` and a WAV as
  their microphone), ``open_watched`` (a page whose errors and WebSockets are recorded) and
  ``webrtc_call_of`` (the gateway's call carrying a session).
- ``CuttableProxy``: a TCP proxy in front of the gateway. ``cut()`` aborts every connection
  through it (the browser sees its socket drop, as on a lost network) while it keeps
  accepting new ones, so the page can reconnect and resume. In front of several gateways it
  is the load balancer of a cluster: each new connection goes to the next of ``targets`` that
  accepts it (no stickiness, as the cluster needs none).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import wave
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

__all__ = [
    "CHROMIUM_FLAGS",
    "WEBRTC_FLAGS",
    "CuttableProxy",
    "WatchedPage",
    "chromium_path",
    "open_watched",
    "over_websocket",
    "webrtc_call_of",
    "webrtc_chromium",
    "write_silent_wav",
    "write_voice_wav",
]

# As root in a container, without a GPU, and without the background traffic this machine's
# closed network refuses (see the env notes).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
]
# For the page over WebRTC: host candidates with their IP addresses (the gateway cannot resolve
# the mDNS ``.local`` names Chromium puts in their place by default), and the reply's
# ``<audio>`` element playing without a click.
WEBRTC_FLAGS = [
    *CHROMIUM_FLAGS,
    "--disable-features=WebRtcHideLocalIpsWithMdns",
    "--autoplay-policy=no-user-gesture-required",
]


def over_websocket(url: str) -> str:
    """The demo page's ``url`` with ``transport=websocket``: the page uses WebRTC when it can
    (``transport=auto``, its default), and the tests of its WebSocket path want that path."""
    return f"{url}{'&' if '?' in url else '?'}transport=websocket"


def chromium_path() -> str | None:
    configured = os.environ.get("GATEWAY_TEST_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def write_voice_wav(
    path: Path, *, lead_ms: int, voice_ms: int, tail_ms: int, rate: int = 48000
) -> None:
    def silence(ms: int) -> np.ndarray:
        return np.zeros(rate * ms // 1000)

    t = np.arange(rate * voice_ms // 1000) / rate
    syllables = 0.55 + 0.45 * np.sin(2 * math.pi * 4 * t)
    pitch = 140 + 30 * np.sin(2 * math.pi * 1.5 * t)
    phase = 2 * math.pi * np.cumsum(pitch) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 6)) * syllables
    voiced *= 0.25 / np.max(np.abs(voiced))
    samples = np.concatenate([silence(lead_ms), voiced, silence(tail_ms)])
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((samples * 32767).astype("<i2").tobytes())


def write_silent_wav(path: Path, *, ms: int = 30_000, rate: int = 48000) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.zeros(rate * ms // 1000, dtype="<i2").tobytes())


Launch = Callable[..., Awaitable["Browser"]]


@contextlib.asynccontextmanager
async def webrtc_chromium(tmp_path: Path) -> AsyncIterator[Launch]:
    """``await launch(lead_ms=…, voice_ms=…)``: a Chromium (``WEBRTC_FLAGS``) whose microphone
    is silent for ``lead_ms``, speaks for ``voice_ms`` (``write_voice_wav``), then is silent
    for 20 s; ``voice_ms=0``: one whose microphone hears nothing. Closed on the way out."""
    from playwright.async_api import async_playwright

    chromium = chromium_path()
    assert chromium is not None
    launched: list[Browser] = []
    async with async_playwright() as playwright:

        async def launch(*, lead_ms: int = 1500, voice_ms: int = 900) -> Browser:
            wav = tmp_path / f"mic{len(launched)}.wav"
            if voice_ms == 0:
                write_silent_wav(wav)
            else:
                write_voice_wav(wav, lead_ms=lead_ms, voice_ms=voice_ms, tail_ms=20_000)
            flags = [*WEBRTC_FLAGS, f"--use-file-for-fake-audio-capture={wav}%noloop"]
            browser = await playwright.chromium.launch(
                executable_path=chromium, headless=True, args=flags
            )
            launched.append(browser)
            return browser

        try:
            yield launch
        finally:
            for browser in launched:
                await browser.close()


class WatchedPage:
    """A page with what went wrong in it (``problems``) and the WebSockets it opened."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.problems: list[str] = []
        self.sockets: list[str] = []
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("websocket", lambda ws: self.sockets.append(ws.url))


async def open_watched(
    browser: Browser, url: str, *, init_script: str | None = None
) -> WatchedPage:
    """The demo page at ``url``, ready (``init_script`` runs before the page's own scripts)."""
    page = await browser.new_page()
    watched = WatchedPage(page)
    if init_script is not None:
        await page.add_init_script(init_script)
    await page.goto(url)
    await page.wait_for_selector("body[data-ready=true]")
    return watched


def webrtc_call_of(gateway: Any) -> Any:
    """The gateway's ``NativeCall`` carrying its only session."""
    (session,) = gateway.manager.sessions.values()
    call = gateway.server.webrtc.call_for(session.session_id)
    assert call is not None, "no WebRTC call carries the session"
    return call


class CuttableProxy:
    def __init__(self, *target_ports: int) -> None:
        self.targets = list(target_ports)
        self._next = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self.cuts = 0

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> None:
        """Every connection dies at once, with no close handshake (a lost network)."""
        self.cuts += 1
        for writer in list(self._links):
            writer.transport.abort()
        self._links.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(len(self.targets)):
            port = self.targets[self._next % len(self.targets)]
            self._next += 1
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                continue
        else:
            writer.transport.abort()
            return
        self._links |= {writer, up_writer}
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        self._links -= {writer, up_writer}

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # One side ended: end the other too (a half-open link would keep a socket alive).
            sink.transport.abort()
            with contextlib.suppress(Exception):
                await sink.wait_closed()
