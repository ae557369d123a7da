"""Vonage's side of a Voice API WebSocket call, on a real socket (aiohttp client), for tests.

What Vonage documents for a call connected to a ``websocket`` endpoint: first one text
``{"event": "websocket:connected", "content-type": "audio/l16;rate=16000", ...}`` with the
NCCO endpoint's ``headers`` at its top level; then the caller's audio, binary 16-bit LE PCM,
20 ms a message (640 bytes at 16 kHz, 320 at 8 kHz) at real time (``speak``; silence between
utterances with ``Behaviour(continuous=True)``); ``websocket:dtmf`` for a key (``press``). What
the gateway sends is buffered and played 20 ms at a time (``heard_pcm``: what the caller
heard); ``{"action": "notify", "payload": …}`` is echoed ``websocket:notify`` with that payload
once the audio before it has played; ``{"action": "clear"}`` drops the unplayed audio and is
answered ``websocket:cleared`` (the notifies it drops are not echoed: a guess, the docs are
silent; ``Behaviour(notify_on_clear="echo")`` echoes them). The caller hangs up by closing the
socket (``hang_up``): Vonage sends no goodbye message.

Faults: ``vanish`` (the TCP connection ends with no WebSocket close), ``send_odd_frame``,
``send_raw``, and ``wrongly_signed_answer_request``. What the gateway sends against Vonage's
format (a binary message that is not one 20 ms frame, an unknown action) lands in
``violations``. The answer webhook (``answer_request``) is ``fakes.carriers.vonage_webhooks``'s,
re-exported here.

Written from https://developer.vonage.com/en/voice/voice-api/concepts/websockets,
https://developer.vonage.com/en/voice/voice-api/ncco-reference,
https://developer.vonage.com/en/voice/voice-api/webhook-reference,
https://developer.vonage.com/en/getting-started/concepts/webhooks#decoding-signed-webhooks and
https://api.support.vonage.com/hc/en-us/articles/19033783342876 (what the payload hash covers).

    async with VonageCall.open_from_ncco(answer.body, url=media_url) as call:
        await call.speak(pcm16)
        await call.wait_for("notify", within_s=5)
        heard = call.heard_pcm()
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import orjson

from fakes.carriers.stream_kit import HeardAudio, Pace, RawReceived, RawStream, cut
from fakes.carriers.vonage_webhooks import (
    SignedRequest,
    answer_request,
    wrongly_signed_answer_request,
)

__all__ = [
    "FRAME_MS",
    "Behaviour",
    "HeardFrame",
    "Received",
    "SignedRequest",
    "VonageCall",
    "answer_request",
    "wrongly_signed_answer_request",
]

FRAME_MS = 20
DTMF_MS = 260  # the duration in the docs' example


class Received(RawReceived):
    """One message the gateway sent, with the ``time.monotonic()`` it arrived at."""

    __slots__ = ()

    @property
    def kind(self) -> Literal["audio", "text"]:
        return "audio" if isinstance(self.data, bytes) else "text"

    @property
    def action(self) -> str | None:
        return self._string("action")


class HeardFrame(HeardAudio):
    """20 ms the caller heard, and the ``time.monotonic()`` it finished playing at."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How the simulated Vonage behaves. ``playback``: ``"realtime"`` plays what it receives
    20 ms at a time (echoing ``notify`` once the audio before has played), ``"instant"`` plays
    it on arrival. ``notify_on_clear``: what becomes of the ``notify`` messages a ``clear``
    drops: ``"drop"`` (never echoed) or ``"echo"`` (at once). ``continuous``: the caller's
    audio never stops (silence between utterances), as on a live call."""

    playback: Literal["realtime", "instant"] = "realtime"
    notify_on_clear: Literal["drop", "echo"] = "drop"
    continuous: bool = False


@dataclass(frozen=True, slots=True)
class _Notify:
    payload: Any


class VonageCall(RawStream):
    """One call's WebSocket, Vonage's end. Build it with ``open`` or ``open_from_ncco``."""

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        session: aiohttp.ClientSession,
        rate: int,
        behaviour: Behaviour,
    ) -> None:
        super().__init__(ws, session)
        self.rate = rate
        self.frame_bytes = rate // 1000 * 2 * FRAME_MS
        self.behaviour = behaviour
        self.received: list[Received] = []
        self.heard: list[HeardFrame] = []
        self.notified: list[tuple[float, Any]] = []  # (when, payload) of each websocket:notify
        self.violations: list[str] = []
        self.max_buffered_frames = 0
        self._buffer: deque[bytes | _Notify] = deque()
        self._generation = 0  # bumped by clear: a frame being played when it comes is not heard
        self._playing = False
        self._to_play = asyncio.Event()  # set when the buffer gets something
        self._outbox: deque[tuple[bytes, asyncio.Future[None] | None]] = deque()
        self._tasks.append(asyncio.create_task(self._read()))
        if behaviour.playback == "realtime":
            self._tasks.append(asyncio.create_task(self._play()))
        if behaviour.continuous:
            self._tasks.append(asyncio.create_task(self._stream()))

    # Opening -----------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        *,
        call_uuid: str,
        token: str | None,
        rate: int = 16000,
        headers: Mapping[str, str] | None = None,
        behaviour: Behaviour = Behaviour(),
    ) -> contextlib.AbstractAsyncContextManager[VonageCall]:
        """Connect to ``url`` and send ``websocket:connected`` with the headers the gateway's
        NCCO would carry (``call_uuid``, ``token``; ``headers`` adds or overrides fields)."""
        fields = {"call_uuid": call_uuid} | ({"token": token} if token is not None else {})
        connecting = cls.connect(
            url, f"audio/l16;rate={rate}", fields | dict(headers or {}), behaviour
        )
        return _closing(connecting)

    @classmethod
    def open_from_ncco(
        cls, ncco: str | bytes, *, url: str | None = None, behaviour: Behaviour = Behaviour()
    ) -> contextlib.AbstractAsyncContextManager[VonageCall]:
        """Do what the NCCO's ``connect`` action says: its websocket ``uri`` (or ``url``, e.g.
        the test server's ``ws://`` address), ``content-type`` and ``headers``."""
        endpoint = _websocket_endpoint(ncco)
        connecting = cls.connect(
            url or str(endpoint["uri"]),
            str(endpoint.get("content-type", "audio/l16;rate=8000")),
            dict(endpoint.get("headers") or {}),
            behaviour,
        )
        return _closing(connecting)

    @classmethod
    async def connect(
        cls,
        url: str,
        content_type: str,
        headers: Mapping[str, Any],
        behaviour: Behaviour = Behaviour(),
    ) -> VonageCall:
        """Open the socket and send the first message; ``close`` the call when done."""
        rate = 16000 if content_type.replace(" ", "").lower().endswith("rate=16000") else 8000
        ws, session = await cls._connect(url)
        call = cls(ws, session, rate, behaviour)
        first = {"event": "websocket:connected", "content-type": content_type, **headers}
        await call.send_raw(orjson.dumps(first).decode())
        return call

    # The caller --------------------------------------------------------------------------------

    async def speak(self, pcm: bytes, *, realtime: bool = True) -> None:
        """The caller says ``pcm`` (16-bit LE at the stream's rate): 20 ms binary messages, the
        last padded with silence, at real time (or all at once: ``realtime=False``; with
        ``continuous`` always at real time, in place of the silence). Returns once the last
        has been sent."""
        frames = [
            pcm[i : i + self.frame_bytes].ljust(self.frame_bytes, b"\x00")
            for i in range(0, len(pcm), self.frame_bytes)
        ]
        if not frames:
            return
        if self.behaviour.continuous:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._outbox.extend((frame, None) for frame in frames[:-1])
            self._outbox.append((frames[-1], done))
            await done
            return
        pace = Pace(FRAME_MS / 1000)
        for n, frame in enumerate(frames):
            if realtime:
                await pace.until(n)
            await self.send_raw(frame)

    async def press(self, digit: str, duration_ms: int = DTMF_MS) -> None:
        """The caller presses a key: one ``websocket:dtmf`` text message."""
        message = {"event": "websocket:dtmf", "digit": digit, "duration": duration_ms}
        await self.send_raw(orjson.dumps(message).decode())

    async def hang_up(self) -> None:
        """The caller hangs up: Vonage closes the socket (code 1000), with no message first."""
        await self._close_socket()

    async def vanish(self) -> None:
        """Fault: the TCP connection ends with no WebSocket close at all (a network drop)."""
        self._ended = True
        await self._stop_tasks()
        cut(self._ws)  # FIN now: the close frame below never leaves
        with contextlib.suppress(Exception):  # only releases the connection
            await asyncio.wait_for(self._ws.close(), 1.0)
        await self._session.close()
        self._news.notify()

    async def send_odd_frame(self) -> None:
        """Fault: a binary message of an odd number of bytes (half a sample)."""
        await self.send_raw(b"\x01" * (self.frame_bytes + 1))

    # What the gateway sent ---------------------------------------------------------------------

    def received_events(self, action: str | None = None) -> list[Received]:
        """Text messages received (those with ``action``, when given), in order."""
        return [r for r in self.received if r.kind == "text" and action in (None, r.action)]

    def received_pcm(self) -> bytes:
        """Every byte of audio received, played or not."""
        return b"".join(r.data for r in self.received if isinstance(r.data, bytes))

    def heard_pcm(self) -> bytes:
        """The audio the caller has heard so far (played to its end; cleared audio is not)."""
        return b"".join(frame.pcm for frame in self.heard)

    async def wait_for(self, action: str, within_s: float, count: int = 1) -> Received:
        """The ``count``-th text message with ``action`` (``"clear"``, ``"notify"``), waiting
        for it ``within_s`` seconds at most (else ``TimeoutError``, as every ``wait_*``)."""
        await self._news.until(lambda: len(self.received_events(action)) >= count, within_s)
        return self.received_events(action)[count - 1]

    async def wait_heard(self, ms: int, within_s: float) -> None:
        """Until the caller has heard ``ms`` of audio."""
        await self._news.until(lambda: len(self.heard) * FRAME_MS >= ms, within_s)

    async def wait_played_out(self, within_s: float) -> None:
        """Until everything received has played (or been cleared)."""
        await self._news.until(lambda: not self._buffer and not self._playing, within_s)

    async def wait_closed(self, within_s: float) -> None:
        """Until the gateway closed the socket."""
        await self._news.until(lambda: self._ws.closed, within_s)

    # Inside ------------------------------------------------------------------------------------

    async def _on_binary(self, data: bytes) -> None:
        self.received.append(Received(time.monotonic(), data))
        if len(data) != self.frame_bytes:
            self.violations.append(f"a binary message of {len(data)} bytes, not {self.frame_bytes}")
            return  # Vonage's behaviour with such a message is undocumented: not played here
        if self.behaviour.playback == "instant":
            self.heard.append(HeardFrame(time.monotonic(), data))
            return
        self._buffer.append(data)
        frames = sum(isinstance(item, bytes) for item in self._buffer) + self._playing
        self.max_buffered_frames = max(self.max_buffered_frames, frames)
        self._to_play.set()

    async def _on_text(self, text: str) -> None:
        received = Received(time.monotonic(), text)
        self.received.append(received)
        message = received.message
        match received.action:
            case "clear":
                await self._clear()
            case "notify" if "payload" in message:
                if self.behaviour.playback == "instant":
                    await self._notify(message["payload"])
                else:
                    self._buffer.append(_Notify(message["payload"]))
                    self._to_play.set()
            case _:
                self.violations.append(f"an unknown text message: {text[:80]!r}")

    async def _clear(self) -> None:
        dropped = [item for item in self._buffer if isinstance(item, _Notify)]
        self._buffer.clear()
        self._generation += 1
        if self.behaviour.notify_on_clear == "echo":
            for item in dropped:
                await self._notify(item.payload)
        await self.send_raw('{"event":"websocket:cleared"}')

    async def _notify(self, payload: Any) -> None:
        self.notified.append((time.monotonic(), payload))
        await self.send_raw(
            orjson.dumps({"event": "websocket:notify", "payload": payload}).decode()
        )

    async def _play(self) -> None:
        """Play the buffer at real time; when it runs dry, the next frame starts when it comes."""
        ends_at = 0.0
        while True:
            if not self._buffer:
                self._to_play.clear()
                await self._to_play.wait()
                continue
            item = self._buffer.popleft()
            if isinstance(item, _Notify):
                await self._notify(item.payload)
                continue
            generation, self._playing = self._generation, True
            ends_at = max(ends_at, time.monotonic()) + FRAME_MS / 1000
            await asyncio.sleep(max(ends_at - time.monotonic(), 0))
            self._playing = False
            if generation == self._generation:
                self.heard.append(HeardFrame(time.monotonic(), item))
            else:
                ends_at = time.monotonic()  # cleared mid-frame: playback stopped there
            self._news.notify()

    async def _stream(self) -> None:
        """Continuous caller audio: the next spoken frame every 20 ms, else silence."""
        silence = bytes(self.frame_bytes)
        pace, n = Pace(FRAME_MS / 1000), 0
        while True:
            frame, done = self._outbox.popleft() if self._outbox else (silence, None)
            await self.send_raw(frame)
            if done is not None and not done.done():
                done.set_result(None)
            n += 1
            await pace.until(n)

    async def _stop_tasks(self) -> None:
        await super()._stop_tasks()
        for _, done in self._outbox:
            if done is not None and not done.done():
                done.set_exception(ConnectionError("the call ended before this was said"))
        self._outbox.clear()


@contextlib.asynccontextmanager
async def _closing(connecting: Awaitable[VonageCall]) -> AsyncIterator[VonageCall]:
    call = await connecting
    try:
        yield call
    finally:
        await call.close()


def _websocket_endpoint(ncco: str | bytes) -> Mapping[str, Any]:
    actions = orjson.loads(ncco)
    for action in actions if isinstance(actions, list) else []:
        if isinstance(action, dict) and action.get("action") == "connect":
            for endpoint in action.get("endpoint") or []:
                if isinstance(endpoint, dict) and endpoint.get("type") == "websocket":
                    return endpoint
    raise ValueError("the NCCO has no connect action with a websocket endpoint")
