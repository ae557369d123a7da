"""A browser-like microphone for soak voice sessions: a frame every 20 ms at real time, silence
unless the user speaks, and the turns that speech makes on a server-VAD provider (OpenAI
Realtime's fake): an utterance, the first audio of the reply (the voice latency: from the last
speech frame sent), ``audio.playback`` while it plays, and now and then a barge-in."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp

from soak.audio import FRAME_MS, pcm_frames
from soak.context import SessionContext
from soak.conversation import Conversation, Interrupted
from soak.link import Link

__all__ = ["Microphone", "voice_turn"]

PLAYBACK_EVERY_S = 0.25
REPLY_WITHIN_S = 30.0
BYTES_PER_MS = 48  # the reply's audio: PCM16 at 24 kHz


class Microphone:
    """Sends 20 ms frames on the conversation's current socket, paced against the clock."""

    def __init__(self, conv: Conversation, rate: int) -> None:
        self.conv = conv
        self.speech, self.silence = pcm_frames(rate)
        self._to_speak = 0
        self._spoken: asyncio.Future[float] | None = None
        self._task = asyncio.create_task(self._run())

    def say(self, ms: int) -> asyncio.Future[float]:
        """Speak ``ms`` of speech; the future is the monotonic time of its last frame."""
        self._to_speak = max(ms // FRAME_MS, 1)
        self._spoken = asyncio.get_running_loop().create_future()
        return self._spoken

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += FRAME_MS / 1000
            await asyncio.sleep(max(0.0, due - loop.time()))
            if loop.time() - due > 0.2:  # fell behind (a pause): start again from now
                due = loop.time()
            frame = self.silence
            if self._to_speak > 0:  # the user talks on even while the socket is down
                frame = self.speech
                self._to_speak -= 1
            link = self.conv.link
            if link is not None and not link.closed.is_set():
                with contextlib.suppress(ConnectionError, aiohttp.ClientError, RuntimeError):
                    await link.send_audio(frame)
            if self._to_speak == 0 and self._spoken is not None and not self._spoken.done():
                self._spoken.set_result(loop.time())

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def voice_turn(ctx: SessionContext, conv: Conversation, mic: Microphone) -> None:
    """An utterance and the reply to it; with ``barge_in``, the user talks over the reply."""
    ctx.turn += "/utterance"
    link = conv.link
    if link is None:
        raise Interrupted
    spoken = await mic.say(ctx.rng.randint(600, 1200))
    audio = link.expect_audio()
    barge_in = ctx.rng.random() < 0.2
    first_audio: float | None = None
    deadline = ctx.clock.now() + REPLY_WITHIN_S
    while True:
        if first_audio is None and audio.done() and not audio.cancelled():
            first_audio = audio.result()
            ctx.sample("voice", spoken - ctx.clock.origin, first_audio - ctx.clock.origin)
            if barge_in:
                ctx.record.barge_ins += 1
                ctx.record.broke(ctx.clock.now(), "barge-in")
                await asyncio.sleep(0.15)
                await _barge_in(ctx, conv, mic)
                return
        event = await _next_or_playback(ctx, conv, link, deadline)
        if event is not None and _reply_over(event):
            return


async def _barge_in(ctx: SessionContext, conv: Conversation, mic: Microphone) -> None:
    """Speak over the reply: ``speech.started``, the reply ends ``interrupted``, and the model
    answers the new utterance."""
    mic.say(700)
    deadline = ctx.clock.now() + REPLY_WITHIN_S
    cut = False
    while True:
        event = await conv.event(max(deadline - ctx.clock.now(), 0.01))
        if event["type"] == "response.done" and event.get("status") in ("interrupted", "cancelled"):
            cut = True
        elif cut and _reply_over(event):
            return
        elif not cut and event["type"] == "response.done" and event.get("text"):
            cut = True  # the reply ended before the user spoke over it: answer comes next


def _reply_over(event: dict[str, Any]) -> bool:
    return event["type"] == "response.done" and bool(
        event.get("text") or event.get("status") != "completed"
    )


async def _next_or_playback(
    ctx: SessionContext, conv: Conversation, link: Link, deadline: float
) -> dict[str, Any] | None:
    """The next event, or None after a quarter of a second, having told the gateway how much
    of the reply has played (a browser does so while it plays)."""
    left = deadline - ctx.clock.now()
    if left <= 0:
        raise TimeoutError("no voice reply in time")
    try:
        return await conv.event(min(left, PLAYBACK_EVERY_S))
    except TimeoutError:
        if link.response_id and link.response_audio_bytes:
            played = link.response_audio_bytes // BYTES_PER_MS
            await conv.send("audio.playback", response_id=link.response_id, played_ms=played)
        return None
