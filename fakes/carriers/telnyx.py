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

import base64
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import aiohttp

from fakes.carriers.json_stream import JsonStream
from fakes.carriers.stream_kit import Pace, Received, client_session, media_payload
from fakes.carriers.telnyx_media import OutOfOrder, Playout, StreamOptions
from fakes.carriers.telnyx_webhooks import SignedWebhook, WebhookSigner, webhook_request
from gateway.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode

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


class TelnyxCall(JsonStream):
    """One call's media stream, Telnyx's side: ``async with TelnyxCall.open(url, token=t) as
    call: await call.speak(pcm); await call.wait_for_echo("m1"); call.heard_pcm()``."""

    carrier = "Telnyx"

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
        self.playout = Playout(self._echo, realtime=options.realtime)
        super().__init__(ws, self.playout)
        self.call_control_id = call_control_id
        self.stream_id = stream_id
        self.codec = codec
        self.play_codec = play_codec
        self.options = options
        self.echoed = self.playout.echoed  # the names of the marks echoed, in order
        self._sequence = 0
        self._chunk = 0

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
        async with client_session(session) as http:
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
            call._serve()
            try:
                yield call
            finally:
                await call._finish()

    # -- what the caller does ---------------------------------------------------------------------

    async def speak(self, pcm: bytes, *, rate: int = 8000, paced: bool = False) -> None:
        """Caller audio (PCM16 at 8 or 16 kHz) as ``media`` frames of 20 ms in ``codec``;
        ``paced`` sends one frame per 20 ms, as a live call does. With ``out_of_order`` the
        frames leave permuted, their ``chunk`` and ``sequence_number`` still counting the order
        they were made in."""
        encoded = _ENCODE[self.codec](self._narrowband(pcm, rate))
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
        pace = Pace(_FRAME_MS / 1000)
        for n, frame in enumerate(frames, 1):
            await self._emit(frame)
            if paced:
                await pace.until(n)

    async def silence(self, ms: int, *, paced: bool = False) -> None:
        await self.speak(b"\x00\x00" * (8 * ms), paced=paced)

    async def press(self, digit: str) -> None:
        """A key press, as Telnyx's ``dtmf`` frame."""
        await self._send("dtmf", dtmf={"digit": digit})

    async def hang_up(self, *, stop_message: bool = True) -> None:
        """The stream ends: ``stop``, then the socket closes. ``stop_message=False``: the fault
        of a stream that ends with no ``stop``."""
        stop = {"user_id": _USER_ID, "call_control_id": self.call_control_id}
        await self._hang_up({"stop": stop} if stop_message else None)

    # -- what the caller heard --------------------------------------------------------------------

    def heard_pcm(self) -> bytes:
        """What the caller heard, as PCM16 at 8 kHz."""
        return _DECODE[self.play_codec](bytes(self.playout.heard))

    def queued_ms(self) -> float:
        """Media received and not yet played."""
        return self.playout.queued_ms()

    async def wait_for_echo(
        self,
        name: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> float:
        """When mark ``name`` was echoed (``time.monotonic()``), waiting for it if need be."""
        echoed_at = self.playout.echoed_at
        return await self._found(lambda: echoed_at.get(name), timeout, f"mark {name} was echoed")

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

    async def _on_message(self, event: str, message: dict[str, Any]) -> None:
        if message.get("stream_id", self.stream_id) != self.stream_id:
            self.protocol_errors.append(f"{event} names another stream_id")
        await self._take_media_mark_clear(event, message)

    async def _on_media(self, message: dict[str, Any]) -> None:
        audio = media_payload(message)
        if audio is None:
            await self._refuse("a media frame whose media.payload is not base64")
            return
        if not _PLAY_BYTES[0] <= len(audio) <= _PLAY_BYTES[1]:
            self.protocol_errors.append(
                f"media of {len(audio) / _BYTES_PER_MS:g} ms (Telnyx plays 20 ms to 30 s a frame)"
            )
        self.playout.media(audio)

    async def _refuse(self, problem: str) -> None:
        await super()._refuse(problem)
        if self.options.error_frames:
            error = {"code": 100003, "title": "malformed_frame", "detail": problem}
            await self._send("error", payload=error)

    async def _echo(self, name: str) -> None:
        await self._send("mark", mark={"name": name})
        self._changes.notify()


TelnyxStream = TelnyxCall  # an alias: "the stream" reads as well as "the call" in a test
