"""A simulated Telnyx media stream: Telnyx's side of a bidirectional Media Streaming WebSocket
(RTP mode), on a real WebSocket (aiohttp), for the phone edge's tests.

Telnyx connects to the call's ``stream_url`` and sends ``connected``, then ``start``
(``stream_id``; ``start.call_control_id``, ``from``, ``to``, ``client_state``, the call's, where
the gateway puts its stream token in base64; ``custom_parameters``; ``media_format``), then
``media`` while the caller talks (base64 RTP payload, 20 ms a frame; ``media.track``,
``media.chunk``, ``media.timestamp`` and a top-level ``sequence_number``, as decimal strings),
``dtmf`` for a key and ``stop`` at the end. A ``stream_auth_token`` also goes in the
``x-telnyx-streaming-auth-token`` upgrade header and in ``connected``.

What the gateway sends is recorded with a monotonic time (``received``) and played by a
``Playout`` (``fakes.carriers.telnyx_media``: real time, or at once; marks echoed after the
media before them, ``clear`` as documented). Anything off-protocol (media under 20 ms or over
30 s a frame, a nameless mark, an unknown event, a binary or non-JSON frame) is noted in
``protocol_errors`` and answered with an ``error`` frame (unless ``error_frames=False``).

Faults: ``OutOfOrder`` media frames (``chunk`` and ``sequence_number`` keep the order they were
made in); ``hang_up(stop_message=False)``, a stream that ends with no ``stop``; ``drop``, a TCP
connection cut with no close handshake.

Guessed (no example in the pages): the shapes of ``dtmf``, the ``mark`` echo, ``stop``, ``error``
(its code made up) and the token in ``connected``; 20 ms frames; ``media.timestamp`` in ms.

Sources: https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket,
https://developers.telnyx.com/docs/voice/programmable-voice/media-streaming,
https://developers.telnyx.com/api-reference/call-commands/answer-call
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

from fakes.carriers.telnyx_media import OutOfOrder, Playout, StreamOptions
from fakes.carriers.telnyx_webhooks import SignedWebhook, WebhookSigner, webhook_request
from gateway.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from gateway.audio.resample import StreamResampler

__all__ = [
    "Codec",
    "OutOfOrder",
    "Received",
    "SignedWebhook",
    "StreamOptions",
    "TelnyxCall",
    "TelnyxStream",
    "WebhookSigner",
    "webhook_request",
]

Codec = Literal["PCMU", "PCMA"]
_ENCODE: dict[str, Callable[[bytes], bytes]] = {"PCMU": ulaw_encode, "PCMA": alaw_encode}
_DECODE: dict[str, Callable[[bytes], bytes]] = {"PCMU": ulaw_decode, "PCMA": alaw_decode}
_BYTES_PER_MS = 8  # G.711 at 8 kHz
_FRAME_MS = 20
_PLAY_BYTES = (20 * _BYTES_PER_MS, 30_000 * _BYTES_PER_MS)  # Telnyx plays 20 ms to 30 s a frame
_DEFAULT_OPTIONS = StreamOptions()
_USER_ID = "3e6f995f-85f7-4705-9741-53b116d28237"


@dataclass(frozen=True, slots=True)
class Received:
    """One message the gateway sent, when it arrived (``time.monotonic()``)."""

    at: float
    event: str
    message: dict[str, Any] = field(repr=False)


class TelnyxCall:
    """One call's media stream, Telnyx's side: ``async with TelnyxCall.open(url, token=t) as
    call: await call.speak(pcm); await call.wait_for_echo("m1"); call.heard_pcm()``."""

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        *,
        call_control_id: str,
        stream_id: str,
        codec: Codec,
        play_codec: Codec,
        options: StreamOptions,
    ) -> None:
        self.ws = ws
        self.call_control_id = call_control_id
        self.stream_id = stream_id
        self.codec = codec
        self.play_codec = play_codec
        self.options = options
        self.received: list[Received] = []
        self.sent: list[dict[str, Any]] = []  # in the order they left
        self.protocol_errors: list[str] = []
        self.playout = Playout(self._echo, realtime=options.realtime)
        self.echoed = self.playout.echoed  # the names of the marks echoed, in order
        self._changed = asyncio.Condition()
        self._sequence = 0
        self._chunk = 0
        self._resamplers: dict[int, StreamResampler] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = asyncio.Event()

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        url: str,
        *,
        call_control_id: str | None = None,
        token: str | None = None,
        client_state: str | None = None,
        codec: Codec = "PCMU",
        play_codec: Codec | None = None,
        options: StreamOptions = _DEFAULT_OPTIONS,
        from_: str = "+13125550100",
        to: str = "+13125550199",
        custom_parameters: Mapping[str, str] | None = None,
        stream_auth_token: str | None = None,
        stream_id: str | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> AsyncIterator[TelnyxCall]:
        """Connect, send ``connected`` and ``start``, serve the stream until the block ends (then
        ``stop`` if still on). ``token``: sent base64 in ``start.client_state`` (or give the
        ``client_state`` itself); ``codec``: what Telnyx sends; ``play_codec`` (default: the
        same): the answer's ``stream_bidirectional_codec``; ``options``: playout, faults."""
        if token is not None:
            client_state = base64.b64encode(token.encode()).decode("ascii")
        headers = {"x-telnyx-streaming-auth-token": stream_auth_token} if stream_auth_token else {}
        own = session is None
        http = session or aiohttp.ClientSession()
        try:
            ws = await http.ws_connect(url, headers=headers, autoping=True)
            call = cls(
                ws,
                call_control_id=call_control_id or "v3:" + uuid.uuid4().hex,
                stream_id=stream_id or str(uuid.uuid4()),
                codec=codec,
                play_codec=play_codec or codec,
                options=options,
            )
            connected: dict[str, Any] = {"event": "connected", "version": "1.0.0"}
            if stream_auth_token:
                connected["connected"] = {"x-telnyx-streaming-auth-token": stream_auth_token}
            await call._emit(connected)
            start: dict[str, Any] = {
                "user_id": _USER_ID,
                "call_control_id": call.call_control_id,
                "call_session_id": str(uuid.uuid4()),
                "from": from_,
                "to": to,
                "tags": [],
                "custom_parameters": dict(custom_parameters or {}),
                "media_format": {"encoding": codec, "sample_rate": 8000, "channels": 1},
            }
            if client_state is not None:
                start["client_state"] = client_state
            await call._send("start", start=start)
            call._tasks.append(asyncio.create_task(call._read()))
            if options.realtime:
                call._tasks.append(asyncio.create_task(call.playout.run()))
            try:
                yield call
            finally:
                await call._finish()
        finally:
            if own:
                await http.close()

    # -- what the caller does ---------------------------------------------------------------------

    async def speak(self, pcm: bytes, *, rate: int = 8000, paced: bool = False) -> None:
        """Caller audio (PCM16 at 8 or 16 kHz) as ``media`` frames of 20 ms in ``codec``;
        ``paced`` sends one frame per 20 ms, as a live call does. With ``out_of_order`` the
        frames leave permuted, their ``chunk`` and ``sequence_number`` still counting the order
        they were made in."""
        if rate not in (8000, 16000):
            raise ValueError("speak takes PCM16 at 8000 or 16000 Hz")
        if rate != 8000:
            pcm = self._resamplers.setdefault(rate, StreamResampler(rate, 8000)).process(pcm)
        encoded = _ENCODE[self.codec](pcm)
        step = _FRAME_MS * _BYTES_PER_MS
        frames: list[dict[str, Any]] = []
        for offset in range(0, len(encoded), step):
            self._chunk += 1
            self._sequence += 1
            media = {
                "track": "inbound",
                "chunk": str(self._chunk),
                "timestamp": str((self._chunk - 1) * _FRAME_MS),
                "payload": base64.b64encode(encoded[offset : offset + step]).decode(),
            }
            frames.append(self._message("media", self._sequence, media=media))
        if self.options.out_of_order is not None:
            frames = self.options.out_of_order.permute(frames)
        next_at = time.monotonic()
        for frame in frames:
            await self._emit(frame)
            if paced:
                next_at += _FRAME_MS / 1000
                await asyncio.sleep(max(next_at - time.monotonic(), 0))

    async def silence(self, ms: int, *, paced: bool = False) -> None:
        await self.speak(b"\x00\x00" * (8 * ms), paced=paced)

    async def press(self, digit: str) -> None:
        """A key press, as Telnyx's ``dtmf`` frame."""
        await self._send("dtmf", dtmf={"digit": digit})

    async def hang_up(self, *, stop_message: bool = True) -> None:
        """The stream ends: ``stop``, then the socket closes. ``stop_message=False``: the fault
        of a stream that ends with no ``stop``."""
        if self.ws.closed:
            return
        if stop_message:
            stop = {"user_id": _USER_ID, "call_control_id": self.call_control_id}
            await self._send("stop", stop=stop)
        await self.ws.close()
        await self._wind_down()

    async def drop(self) -> None:
        """Fault: the connection dies with no message and no close handshake."""
        sock = self.ws.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        await self._wind_down()

    async def send_raw(self, data: str | bytes) -> None:
        """Anything at all on the stream (a malformed frame, an event Telnyx may add)."""
        await (self.ws.send_bytes(data) if isinstance(data, bytes) else self.ws.send_str(data))

    # -- what the caller heard --------------------------------------------------------------------

    def heard(self) -> bytes:
        """What was played to the caller so far, in ``play_codec`` (cleared media excluded)."""
        return bytes(self.playout.heard)

    def heard_pcm(self) -> bytes:
        """What the caller heard, as PCM16 at 8 kHz."""
        return _DECODE[self.play_codec](bytes(self.playout.heard))

    def queued_ms(self) -> float:
        """Media received and not yet played."""
        return self.playout.queued_ms()

    def received_events(self, event: str | None = None) -> list[Received]:
        return [r for r in self.received if event is None or r.event == event]

    async def wait_for(
        self,
        event: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
        *,
        count: int = 1,
    ) -> Received:
        """The ``count``-th message of kind ``event`` (counting those already received)."""
        await self._until(lambda: len(self.received_events(event)) >= count, timeout)
        matches = self.received_events(event)
        if len(matches) < count:
            raise ConnectionError(f"the stream closed before {event} #{count}")
        return matches[count - 1]

    async def wait_for_echo(
        self,
        name: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> float:
        """When mark ``name`` was echoed (``time.monotonic()``), waiting for it if need be."""
        await self._until(lambda: name in self.playout.echoed_at, timeout)
        if name not in self.playout.echoed_at:
            raise ConnectionError(f"the stream closed before mark {name} was echoed")
        return self.playout.echoed_at[name]

    async def wait_closed(
        self,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> int | None:
        """Until the stream is closed (by the gateway or by us); its close code."""
        await asyncio.wait_for(self.closed.wait(), timeout)
        return self.ws.close_code

    async def _until(self, done: Callable[[], bool], within_s: float) -> None:
        async with asyncio.timeout(within_s), self._changed:
            await self._changed.wait_for(lambda: done() or self.closed.is_set())

    # -- Telnyx's side of the socket --------------------------------------------------------------

    def _message(self, event: str, sequence: int, **fields: Any) -> dict[str, Any]:
        return {
            "event": event,
            "sequence_number": str(sequence),
            **fields,
            "stream_id": self.stream_id,
        }

    async def _send(self, event: str, **fields: Any) -> None:
        self._sequence += 1
        await self._emit(self._message(event, self._sequence, **fields))

    async def _emit(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.send_str(json.dumps(message))

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await self._on_text(msg.data)
                elif msg.type == aiohttp.WSMsgType.BINARY:
                    await self._refuse("a binary frame (Telnyx's stream is JSON text)")
        finally:
            await self._wind_down()

    async def _on_text(self, text: str) -> None:
        try:
            message = json.loads(text)
            event = str(message["event"])
        except (ValueError, TypeError, KeyError):
            await self._refuse("a frame that is not a JSON object with an event")
            return
        self.received.append(Received(time.monotonic(), event, message))
        if message.get("stream_id", self.stream_id) != self.stream_id:
            self.protocol_errors.append(f"{event} names another stream_id")
        if event == "media":
            await self._on_media(message)
        elif event == "mark":
            mark = message.get("mark")
            name = mark.get("name") if isinstance(mark, dict) else None
            if not isinstance(name, str) or not name:
                await self._refuse("a mark without mark.name")
            else:
                self.playout.mark(name)
        elif event == "clear":
            await self.playout.clear()
        else:
            await self._refuse(f"an event Telnyx does not take: {event}")
        await self.playout.settle()
        async with self._changed:
            self._changed.notify_all()

    async def _on_media(self, message: Mapping[str, Any]) -> None:
        media = message.get("media")
        payload = media.get("payload") if isinstance(media, dict) else None
        try:
            if not isinstance(payload, str):
                raise ValueError("no payload")
            audio = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            await self._refuse("a media frame whose media.payload is not base64")
            return
        if not _PLAY_BYTES[0] <= len(audio) <= _PLAY_BYTES[1]:
            self.protocol_errors.append(
                f"media of {len(audio) / _BYTES_PER_MS:g} ms (Telnyx plays 20 ms to 30 s a frame)"
            )
        self.playout.media(audio)

    async def _refuse(self, problem: str) -> None:
        self.protocol_errors.append(problem)
        if self.options.error_frames:
            error = {"code": 100003, "title": "malformed_frame", "detail": problem}
            await self._send("error", payload=error)

    async def _echo(self, name: str) -> None:
        await self._send("mark", mark={"name": name})
        async with self._changed:
            self._changed.notify_all()

    async def _wind_down(self) -> None:
        self.closed.set()
        self.playout.stop()
        async with self._changed:
            self._changed.notify_all()

    async def _finish(self) -> None:
        if not self.ws.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.hang_up(), 2.0)
        await self._wind_down()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


TelnyxStream = TelnyxCall  # an alias: "the stream" reads as well as "the call" in a test
