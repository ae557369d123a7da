"""A simulated phone call through the Twilio bridge, as Twilio makes it: the voice webhook
(signed), then the Media Streams socket with the stream token of its TwiML: ``connected``,
``start``, µ-law ``media`` every 20 ms at real time, ``mark`` echoes, ``dtmf`` and ``stop``.

The nodes greet each call with a tool that needs confirmation (``GATEWAY_TWILIO_GREETING``), so
every call begins with the model asking; the caller presses 1 (or 2) and the tool runs once.
Then a few utterances (the phone latency: from the last speech frame to the first ``media``
of the reply), now and then talking over the reply (the bridge must send ``clear``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import time
import uuid
from typing import Any

import aiohttp
import orjson

from gateway.edges.twilio.signature import twilio_signature
from soak.audio import FRAME_MS, ulaw_frames
from soak.context import SessionContext
from soak.nodes import Node, NodeDirectory
from soak.routing import PHONE_ALIASES

__all__ = ["TWILIO_AUTH_TOKEN", "run_call"]

TWILIO_AUTH_TOKEN = "soak-twilio-auth-token"
_TOKEN = re.compile(r'<Parameter name="token" value="([^"]+)"')
QUIET_S = 0.7
BARGE_IN_GRACE_S = 1.5  # the VAD hears the caller, the model stops: a reply may go on this long
WITHIN_S = 20.0


class PhoneLine:
    """The stream's socket: Twilio's side of it."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, stream_sid: str) -> None:
        self.ws = ws
        self.stream_sid = stream_sid
        self.media = 0
        self.last_media = 0.0
        self.clears = 0
        self.marked: dict[str, float] = {}  # response id (of the marks) → last mark's time
        self.cleared = asyncio.Event()  # a clear came (the caller clears it before talking over)
        self.closed = asyncio.Event()
        self._to_speak = 0
        self._spoken: asyncio.Future[float] | None = None
        self._first_media: asyncio.Future[float] | None = None
        self._chunk = 0
        self.speech, self.silence = ulaw_frames()
        self._reader = asyncio.create_task(self._read())
        self._pacer = asyncio.create_task(self._pace())

    async def send(self, event: str, **body: Any) -> None:
        message = {"event": event, "streamSid": self.stream_sid, **body}
        with contextlib.suppress(ConnectionError, aiohttp.ClientError, RuntimeError):
            await self.ws.send_str(orjson.dumps(message).decode())

    def say(self, ms: int) -> asyncio.Future[float]:
        """When the caller has said ``ms`` of speech; at once when the stream is over (its pacer
        has stopped: nothing would ever say it, and a caller awaiting it would wait forever)."""
        loop = asyncio.get_running_loop()
        self._spoken = loop.create_future()
        if self._pacer.done() or self.closed.is_set():
            self._spoken.set_result(loop.time())
            return self._spoken
        self._to_speak = max(ms // FRAME_MS, 1)
        return self._spoken

    def expect_media(self) -> asyncio.Future[float]:
        self._first_media = asyncio.get_running_loop().create_future()
        return self._first_media

    async def quiet(self, within: float = WITHIN_S) -> None:
        """Until no media has come for a while (the reply has played)."""
        deadline = time.monotonic() + within
        while time.monotonic() - self.last_media < QUIET_S:
            if self.closed.is_set():
                return
            if time.monotonic() > deadline:
                raise TimeoutError("the reply never ended")
            await asyncio.sleep(0.1)

    async def _read(self) -> None:
        try:
            while True:
                message = await self.ws.receive()
                if message.type is not aiohttp.WSMsgType.TEXT:
                    return
                event = orjson.loads(message.data)
                kind = event.get("event")
                if kind == "media":
                    self.media += 1
                    self.last_media = time.monotonic()
                    waiter = self._first_media
                    if waiter is not None and not waiter.done():
                        waiter.set_result(self.last_media)
                elif kind == "mark":  # played at once: echo it, as Twilio does after playing
                    mark = event.get("mark") or {}
                    self.marked[str(mark.get("name", "")).split(":", 1)[0]] = time.monotonic()
                    await self.send("mark", mark=mark)
                elif kind == "clear":
                    self.clears += 1
                    self.cleared.set()
        except (aiohttp.ClientError, ConnectionError, orjson.JSONDecodeError):
            return
        finally:
            self.closed.set()

    async def _pace(self) -> None:
        try:
            await self._frames()
        finally:  # a caller waiting for the end of what it says is not left waiting
            if self._spoken is not None and not self._spoken.done():
                self._spoken.set_result(asyncio.get_running_loop().time())

    async def _frames(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while not self.closed.is_set():
            due += FRAME_MS / 1000
            await asyncio.sleep(max(0.0, due - loop.time()))
            if loop.time() - due > 0.2:
                due = loop.time()
            frame = self.silence
            if self._to_speak > 0:
                frame, self._to_speak = self.speech, self._to_speak - 1
            self._chunk += 1
            media = {
                "track": "inbound",
                "chunk": str(self._chunk),
                "timestamp": str(self._chunk * FRAME_MS),
                "payload": base64.b64encode(frame).decode(),
            }
            await self.send("media", sequenceNumber=str(self._chunk + 1), media=media)
            if self._to_speak == 0 and self._spoken is not None and not self._spoken.done():
                self._spoken.set_result(loop.time())

    async def close(self) -> None:
        self._pacer.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), 5)
        self._reader.cancel()
        await asyncio.gather(self._pacer, self._reader, return_exceptions=True)


async def _media(line: PhoneLine, media: asyncio.Future[float], within: float = WITHIN_S) -> float:
    """When ``media`` came; ``TimeoutError`` if neither it nor the stream's end came in time,
    ``ConnectionError`` if the stream ended first."""
    closed: asyncio.Future[Any] = asyncio.ensure_future(line.closed.wait())
    waits: set[asyncio.Future[Any]] = {media, closed}
    try:
        await asyncio.wait(waits, timeout=within, return_when=asyncio.FIRST_COMPLETED)
    finally:
        closed.cancel()
    if media.done() and not media.cancelled():
        return media.result()
    if line.closed.is_set():
        raise ConnectionError("the stream closed")
    raise TimeoutError("no media in time")


async def _webhook(http: aiohttp.ClientSession, node: Node, call_sid: str) -> str | None:
    url = f"{node.url}/twilio/voice"
    form = {"CallSid": call_sid, "AccountSid": "ACsoak", "From": "+15550100", "To": "+15550199"}
    headers = {"X-Twilio-Signature": twilio_signature(TWILIO_AUTH_TOKEN, url, form)}
    try:
        async with http.post(url, data=form, headers=headers) as response:
            if response.status != 200:
                return None
            found = _TOKEN.search(await response.text())
    except (aiohttp.ClientError, OSError):
        return None
    return found.group(1) if found else None


async def run_call(ctx: SessionContext, nodes: NodeDirectory, http: aiohttp.ClientSession) -> None:
    record = ctx.record
    node = nodes.pick()
    call_sid = "CA" + uuid.uuid4().hex
    token = await _webhook(http, node, call_sid) if node is not None else None
    if node is None or token is None:
        record.refused = "the webhook was refused"
        return
    try:
        ws = await http.ws_connect(node.media_url, max_msg_size=0, heartbeat=None)
    except (aiohttp.ClientError, OSError) as error:
        record.refused = f"no media socket: {error}"
        return
    line = PhoneLine(ws, "MZ" + uuid.uuid4().hex)
    try:
        await _call(ctx, line, node, call_sid, token, nodes)
    finally:
        await line.close()


async def _call(
    ctx: SessionContext,
    line: PhoneLine,
    node: Node,
    call_sid: str,
    token: str,
    nodes: NodeDirectory,
) -> None:
    record = ctx.record
    await line.ws.send_str(orjson.dumps({"event": "connected", "protocol": "Call"}).decode())
    start = {
        "accountSid": "ACsoak",
        "streamSid": line.stream_sid,
        "callSid": call_sid,
        "tracks": ["inbound"],
        "customParameters": {"token": token},
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
    }
    await line.send("start", sequenceNumber="1", start=start)
    try:
        await _media(line, line.expect_media())
    except TimeoutError:
        record.refused = "no greeting"
        return
    except ConnectionError:
        record.refused = f"stream closed ({line.ws.close_code}) before the greeting"
        return
    record.session_id, record.started_at = call_sid, ctx.clock.now()
    record.nodes.append(node.name)
    record.alias = PHONE_ALIASES.get(node.name)
    try:
        await line.quiet()
        digit = "2" if ctx.rng.random() < 0.15 else "1"
        twice = ctx.take_fault() == "dtmf_twice"
        for _ in range(2 if twice else 1):
            await line.send(
                "dtmf", sequenceNumber="0", dtmf={"track": "inbound_track", "digit": digit}
            )
        if twice:
            ctx.fault_done("dtmf_twice", detail=f"digit {digit} pressed twice")
        await _media(line, line.expect_media())
        await line.quiet()
        for _ in range(ctx.rng.randint(1, 3)):
            if ctx.stopping.is_set() or line.closed.is_set():
                break
            await _utterance(ctx, line)
            record.turns += 1
    except ConnectionError:
        pass
    except TimeoutError as error:
        if not line.closed.is_set():
            record.problem(f"phone call stuck: {error}")
    if line.closed.is_set():
        _closed_by_gateway(ctx, line, nodes.nodes[node.name])
        return
    await line.send("stop", sequenceNumber="0", stop={"accountSid": "ACsoak", "callSid": call_sid})
    try:
        await asyncio.wait_for(line.closed.wait(), 10.0)
    except TimeoutError:
        record.problem("the stream stayed open after stop")
    record.end_reason, record.ended_at = "client", ctx.clock.now()


async def _utterance(ctx: SessionContext, line: PhoneLine) -> None:
    ctx.in_turn = True
    try:
        spoken = await line.say(ctx.rng.randint(600, 1000))
        first = await _media(line, line.expect_media())
        ctx.sample("phone", spoken - ctx.clock.origin, first - ctx.clock.origin)
        if ctx.rng.random() < 0.2:
            ctx.record.barge_ins += 1
            ctx.record.broke(ctx.clock.now(), "barge-in")
            line.cleared.clear()
            await asyncio.sleep(0.2)
            playing = max(line.marked, key=line.marked.__getitem__, default="")
            talked_at = time.monotonic()
            await line.say(700)
            try:
                await asyncio.wait_for(line.cleared.wait(), 5.0)
            except TimeoutError:
                # No clear: right if the reply had ended before the model heard the caller
                # (nothing left to cut); wrong if it went on playing over them.
                went_on = line.marked.get(playing, 0.0) - talked_at
                if went_on > BARGE_IN_GRACE_S and not line.closed.is_set():
                    ctx.record.problem(
                        f"talked over the reply: no clear, it played {went_on:.1f} s on"
                    )
        await line.quiet()
    finally:
        ctx.in_turn = False


def _closed_by_gateway(ctx: SessionContext, line: PhoneLine, node: Node) -> None:
    """The gateway ended the call: right if its node was draining (a call does not move)."""
    record = ctx.record
    record.ended_at = ctx.clock.now()
    if node.state != "up" or any(record.ended_at - t < 30 for t in node.restarts):
        record.end_reason = "shutdown"
    else:
        record.lost = f"the gateway closed the call ({line.ws.close_code})"
