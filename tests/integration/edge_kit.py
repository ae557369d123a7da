"""One driver per client edge, for the edge contract suite (``test_every_edge_keeps_the_contract``).

Each driver speaks its edge's own wire protocol over a real socket, as that edge's clients do:
the native protocol on ``/v1/session``, OpenAI's Realtime GA protocol on ``/v1/realtime`` and
over OpenAI's WebRTC interface (``/v1/realtime/calls``: the events on a data channel, the audio
on tracks), and Twilio Media Streams on ``/twilio/media``. They all do the same things
(``EdgeDriver``), each in its protocol's words: a user's message, an utterance, approving a
pending confirmation, bad input, hanging up. What each observes comes back in one shape
(``Reply``), so one suite holds every edge to one contract.

The phone has no way to type: its one text message is the call's first (the greeting setting,
as a deployment says what a caller "says" on pick-up), and it sees no transcript, so its
``Reply.transcript`` is what the session recorded the model saying; the caller's side is the
audio it got. It has no channel for errors either: bad input is logged and the call goes on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from harness import Client, ConnectionClosed, Gateway, pcm_silence, pcm_tone, speak, token
from realtime_call_kit import call, mint
from realtime_call_kit import say as call_say
from test_gateway_twilio import AUTH_TOKEN, TwilioClient
from test_gateway_twilio import call as phone_call
from webrtc_kit import LOUD, Peer

from gateway.session.session import Session

WITHIN_S = 10.0
REALTIME_RATE = 24000  # /v1/realtime's PCM16 both ways
WEBRTC_RATE = 48000  # the tracks' PCM16
BYTES_PER_MS = {"native": 24 * 2, "realtime": REALTIME_RATE // 1000 * 2, "phone": 8}

MakeGateway = Callable[..., Awaitable[Gateway]]


@dataclass(frozen=True)
class Reply:
    """The model's answer to the user's last turn, as the edge showed it."""

    transcript: str
    audio_ms: int


class EdgeDriver(Protocol):
    name: str
    gateway: Gateway

    async def open(self, make: MakeGateway, first: str | None = None, **settings: Any) -> None:
        """A gateway with ``settings``, and one session on it; ``first``: the user's first
        message, said at once."""
        ...

    async def say(self, text: str) -> None:
        """A user's text message (not on the phone: its only one is ``first``)."""
        ...

    async def speak(self, ms: int) -> None:
        """An utterance: ``ms`` of speech, then enough silence to end it."""
        ...

    async def reply(self) -> Reply:
        """The reply to the user's last turn, once it has ended (tool rounds included)."""
        ...

    async def reply_playing(self) -> None:
        """Until the reply's audio has begun to arrive."""
        ...

    async def was_cut(self) -> bool:
        """The reply in progress was cut short by the user's speech (the edge said so)."""
        ...

    async def approve(self) -> None:
        """Approve the pending confirmation, the way this edge's user does."""
        ...

    async def send_garbage(self) -> str | None:
        """A frame that is not the protocol; the error code the client was told, if any."""
        ...

    async def hang_up(self) -> None:
        """The client closes its socket."""
        ...

    async def closed_by_gateway(self) -> bool:
        """The gateway closed the socket (read until then)."""
        ...


def the_session(gateway: Gateway) -> Session:
    sessions = list(gateway.manager.sessions.values())
    assert len(sessions) == 1, sessions
    return sessions[0]


async def eventually(predicate: Callable[[], bool], within: float = WITHIN_S) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


# -- /v1/session ---------------------------------------------------------------------------------


class NativeDriver:
    name = "native"

    async def open(self, make: MakeGateway, first: str | None = None, **settings: Any) -> None:
        self.gateway = await make(**settings)
        ws = await self.gateway.http.ws_connect(
            f"{self.gateway.url}/v1/session",
            headers={"Authorization": f"Bearer {token('alice')}"},
        )
        self.client = Client(ws)
        await self.client.start("voice")
        self._seen = 0
        if first is not None:
            await self.say(first)

    async def say(self, text: str) -> None:
        self._mark()
        await self.client.send("text.send", text=text)

    async def speak(self, ms: int) -> None:
        self._mark()
        await speak(self.client, ms)

    def _mark(self) -> None:
        self._seen = len(self.client.events)
        self._audio_from = len(self.client.audio)

    async def reply(self) -> Reply:
        await self.client.until_reply(WITHIN_S)
        events = self.client.events[self._seen :]
        done = [e for e in events if e["type"] == "response.done"][-1]
        audio = sum(len(frame) for frame in self.client.audio[self._audio_from :])
        return Reply(done["text"], audio // BYTES_PER_MS[self.name])

    async def reply_playing(self) -> None:
        deadline = time.monotonic() + WITHIN_S
        while not self.client.audio[self._audio_from :]:
            await self.client.next(max(deadline - time.monotonic(), 0.01))

    async def was_cut(self) -> bool:
        done = await self.client.last("response.done", WITHIN_S)
        return bool(done["status"] == "interrupted")

    async def approve(self) -> None:
        requested = await self.client.last("confirmation.requested", WITHIN_S)
        self._mark()
        await self.client.send(
            "confirmation.respond",
            confirmation_id=requested["confirmation_id"],
            decision="approve",
        )

    async def send_garbage(self) -> str | None:
        await self.client.send_raw("{this is not json")
        return str((await self.client.last("error", WITHIN_S))["code"])

    async def hang_up(self) -> None:
        await self.client.ws.close()

    async def closed_by_gateway(self) -> bool:
        try:
            while True:
                await self.client.next(WITHIN_S)
        except ConnectionClosed:
            return True


# -- /v1/realtime ----------------------------------------------------------------------------------


class RealtimeDriver:
    name = "realtime"

    async def open(self, make: MakeGateway, first: str | None = None, **settings: Any) -> None:
        self.gateway = await make(**settings)
        self.ws = await self.gateway.http.ws_connect(
            f"{self.gateway.url}/v1/realtime?model=local",
            headers={"Authorization": f"Bearer {token('alice')}"},
        )
        self.events: list[dict[str, Any]] = []
        assert (await self._next())["type"] == "session.created"
        self._seen = 0
        if first is not None:
            await self.say(first)

    async def _send(self, kind: str, **fields: Any) -> None:
        await self.ws.send_str(json.dumps({"type": kind, **fields}))

    async def _next(self, within: float = WITHIN_S) -> dict[str, Any]:
        msg = await self.ws.receive(timeout=within)
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise ConnectionClosed(self.ws.close_code)
        event: dict[str, Any] = json.loads(msg.data)
        self.events.append(event)
        return event

    async def _until(self, kind: str, **match: Any) -> dict[str, Any]:
        for event in self.events[self._seen :]:
            if event["type"] == kind and all(event.get(k) == v for k, v in match.items()):
                return event
        deadline = time.monotonic() + WITHIN_S
        while True:
            event = await self._next(max(deadline - time.monotonic(), 0.01))
            if event["type"] == kind and all(event.get(k) == v for k, v in match.items()):
                return event

    async def say(self, text: str) -> None:
        self._seen = len(self.events)
        content = [{"type": "input_text", "text": text}]
        await self._send(
            "conversation.item.create",
            item={"type": "message", "role": "user", "content": content},
        )
        await self._send("response.create")

    async def speak(self, ms: int) -> None:
        self._seen = len(self.events)
        pcm = pcm_tone(ms, REALTIME_RATE) + pcm_silence(600, REALTIME_RATE)
        step = REALTIME_RATE * 20 // 1000 * 2
        for start in range(0, len(pcm), step):
            chunk = base64.b64encode(pcm[start : start + step]).decode()
            await self._send("input_audio_buffer.append", audio=chunk)

    async def reply(self) -> Reply:
        # A reply that only ran the gateway's tools has no output: the answer is the next one.
        while True:
            done = await self._until("response.done")
            self._seen = self.events.index(done) + 1
            output = done["response"]["output"]
            if output:
                break
        parts = [part for item in output for part in item.get("content", [])]
        transcript = "".join(str(p.get("transcript") or p.get("text") or "") for p in parts)
        audio = sum(
            len(base64.b64decode(e["delta"]))
            for e in self.events
            if e["type"] == "response.output_audio.delta"
            and e["response_id"] == done["response"]["id"]
        )
        return Reply(transcript, audio // BYTES_PER_MS[self.name])

    async def reply_playing(self) -> None:
        await self._until("response.output_audio.delta")

    async def was_cut(self) -> bool:
        done = await self._until("response.done")
        self._seen = self.events.index(done) + 1  # the answer to the interruption comes next
        details = done["response"].get("status_details") or {}
        return bool(
            done["response"]["status"] == "cancelled" and details.get("reason") == "turn_detected"
        )

    async def approve(self) -> None:
        # The gateway's tools are hidden here: the user says yes, the model calls again with
        # the confirmation's id (docs/protocol.md 10.15).
        await self.reply()  # the model asking
        await self.say("yes")

    async def send_garbage(self) -> str | None:
        self._seen = len(self.events)
        await self.ws.send_str("{this is not json")
        return str((await self._until("error"))["error"]["code"])

    async def hang_up(self) -> None:
        await self.ws.close()

    async def closed_by_gateway(self) -> bool:
        try:
            while True:
                await self._next()
        except ConnectionClosed:
            return True


# -- /v1/realtime/calls (OpenAI's WebRTC interface) ----------------------------------------------


class RealtimeCallDriver:
    """OpenAI's WebRTC interface: an ephemeral key, an aiortc peer on ``oai-events``; the GA
    events on the data channel, the audio on the tracks (48 kHz both ways)."""

    name = "webrtc-call"

    async def open(self, make: MakeGateway, first: str | None = None, **settings: Any) -> None:
        self.gateway = await make(**settings)
        minted = await mint(self.gateway, token("alice"))
        assert minted.status == 200, minted.text
        self.peer = Peer("oai-events")
        await call(self.gateway, minted.json()["value"], self.peer)
        await self.peer.until_event("session.created")
        self._mark()
        if first is not None:
            await self.say(first)

    def _mark(self) -> None:
        self._seen = len(self.peer.events)
        self._levels = len(self.peer.levels)

    async def _until(self, kind: str, **match: Any) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next(
                (
                    e
                    for e in self.peer.events[self._seen :]
                    if e["type"] == kind and all(e.get(k) == v for k, v in match.items())
                ),
                None,
            )

        await self.peer.until(lambda: found() is not None, WITHIN_S)
        event = found()
        assert event is not None
        return event

    async def say(self, text: str) -> None:
        self._mark()
        call_say(self.peer, text)

    async def speak(self, ms: int) -> None:
        self._mark()
        self.peer.microphone.push(pcm_tone(ms, WEBRTC_RATE) + pcm_silence(600, WEBRTC_RATE))

    async def reply(self) -> Reply:
        # A reply that only ran the gateway's tools has no output: the answer is the next one.
        while True:
            done = await self._until("response.done")
            self._seen = self.peer.events.index(done) + 1
            output = done["response"]["output"]
            if output:
                break
        parts = [part for item in output for part in item.get("content", [])]
        transcript = "".join(str(p.get("transcript") or p.get("text") or "") for p in parts)
        # Its audio is the track's: begun (the rest plays out in real time).
        started = ("output_audio_buffer.started", done["response"]["id"])
        await self.peer.until(
            lambda: (
                any((e["type"], e.get("response_id")) == started for e in self.peer.events)
                and self._loud_since() > 0
            ),
            WITHIN_S,
        )
        return Reply(transcript, self._loud_since() * 20)

    def _loud_since(self) -> int:
        return sum(level > LOUD for level in self.peer.levels[self._levels :])

    async def reply_playing(self) -> None:
        await self._until("output_audio_buffer.started")

    async def was_cut(self) -> bool:
        done = await self._until("response.done")
        self._seen = self.peer.events.index(done) + 1
        details = done["response"].get("status_details") or {}
        cleared = any(e["type"] == "output_audio_buffer.cleared" for e in self.peer.events)
        return bool(
            done["response"]["status"] == "cancelled"
            and details.get("reason") == "turn_detected"
            and cleared
        )

    async def approve(self) -> None:
        await self.reply()  # the model asking
        await self.say("yes")

    async def send_garbage(self) -> str | None:
        self._mark()
        self.peer.channel.send("{this is not json")
        return str((await self._until("error"))["error"]["code"])

    async def hang_up(self) -> None:
        await self.peer.close()

    async def closed_by_gateway(self) -> bool:
        await eventually(lambda: self.peer.pc.connectionState in ("closed", "failed"))
        return True


# -- /twilio/media ---------------------------------------------------------------------------------


class PhoneDriver:
    name = "phone"

    async def open(self, make: MakeGateway, first: str | None = None, **settings: Any) -> None:
        self.gateway = await make(
            twilio_auth_token=AUTH_TOKEN, twilio_greeting=first or "", **settings
        )
        self.caller: TwilioClient = await phone_call(self.gateway)
        await eventually(lambda: len(self.gateway.manager.sessions) == 1)
        self.session = the_session(self.gateway)
        self._history = self._received = 0  # the greeting is the call's first turn

    def _mark(self) -> None:
        self._history = len(self.session.snapshot().history)
        self._received = len(self.caller.received)

    async def say(self, text: str) -> None:
        raise AssertionError("a caller cannot type: its one message is the call's first")

    async def speak(self, ms: int) -> None:
        self._mark()
        await self.caller.speak(pcm_tone(ms, 8000) + pcm_silence(600, 8000))

    def _replied(self) -> bool:
        history = self.session.snapshot().history[self._history :]
        return bool(history) and history[-1].role == "assistant" and self.session.at_turn_boundary()

    async def reply(self) -> Reply:
        deadline = time.monotonic() + WITHIN_S
        while not (self._replied() and self._media_since()):
            assert time.monotonic() < deadline, "no reply within the time"
            # the reply's end is the session's (a phone line says nothing of it): look often
            with contextlib.suppress(TimeoutError):
                await self.caller.next(0.05)
        said = self.session.snapshot().history[-1].text
        return Reply(said, sum(len(m) for m in self._media_since()) // BYTES_PER_MS[self.name])

    def _media_since(self) -> list[bytes]:
        return [
            base64.b64decode(e["media"]["payload"])
            for _, e in self.caller.received[self._received :]
            if e["event"] == "media"
        ]

    async def reply_playing(self) -> None:
        await self.caller.until("media", WITHIN_S)

    async def was_cut(self) -> bool:
        await self.caller.until("clear", WITHIN_S)  # Twilio drops what it buffered
        return True

    async def approve(self) -> None:
        await eventually(lambda: bool(self.session.conversation.book.pending()))
        self._mark()
        await self.caller.send("dtmf", dtmf={"track": "inbound_track", "digit": "1"})

    async def send_garbage(self) -> str | None:
        await self.caller.ws.send_str("{this is not json")
        return None  # a phone line has no way to show an error: it is logged

    async def hang_up(self) -> None:
        await self.caller.ws.close()

    async def closed_by_gateway(self) -> bool:
        while await self.caller.next(WITHIN_S) is not None:
            pass
        return True


DRIVERS: dict[str, Callable[[], EdgeDriver]] = {
    "native": NativeDriver,
    "realtime": RealtimeDriver,
    "webrtc-call": RealtimeCallDriver,
    "phone": PhoneDriver,
}
