"""What the browser test needs besides the gateway: Chromium, a fake microphone, a cuttable link.

- ``chromium_path``: Debian's Chromium (``GATEWAY_TEST_CHROMIUM`` overrides), or ``None``.
  Playwright drives it through ``executable_path``; it never downloads a browser.
- ``write_voice_wav``: the WAV Chromium plays as its microphone
  (``--use-file-for-fake-audio-capture``): silence, a voiced burst with a syllable rhythm and a
  gliding pitch (speech-like enough for the browser's noise suppression to keep it), silence.
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
from pathlib import Path

import numpy as np

__all__ = ["CHROMIUM_FLAGS", "CuttableProxy", "chromium_path", "write_voice_wav"]

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
