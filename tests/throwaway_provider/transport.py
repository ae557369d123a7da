"""The echo upstream: a ``Transport`` that says back what it is given, in the mode of the
session. A text message comes back as text (in voice mode, as a transcript with its audio:
silence as long as the words); the audio of a committed turn comes back as the same audio.
``/tools`` lists the tools it was given, read from their declarations in its dialect."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from transports import events as ev
from transports.base import (
    Capabilities,
    Mode,
    ToolChoice,
    ToolResult,
    TurnDetection,
    UpstreamConfig,
)

__all__ = ["DIALECT_KEY", "RATE", "EchoTransport"]

RATE = 16000
DIALECT_KEY = "openaiRealtime"  # the declarations it reads (its record's dialect)
SILENCE_PER_CHARACTER = b"\x00\x00" * (RATE // 100)  # 10 ms of PCM16 a character


class EchoTransport:
    capabilities = Capabilities(
        input_rate=RATE, output_rate=RATE, modes=frozenset({"voice", "text"})
    )

    def __init__(self, prefix: str = "echo: ") -> None:
        self._prefix = prefix
        self._events: asyncio.Queue[ev.UpstreamEvent | None] = asyncio.Queue()
        self._mode: Mode = "text"
        self._tools: tuple[str, ...] = ()
        self._heard = bytearray()  # the audio of the turn not committed yet
        self._committed = bytearray()  # committed, not answered yet
        self._replies = 0

    async def connect(self, config: UpstreamConfig) -> None:
        self._mode = config.mode
        self._tools = tuple(str(t.provider_schemas[DIALECT_KEY]["name"]) for t in config.tools)

    async def events(self) -> AsyncIterator[ev.UpstreamEvent]:
        while (event := await self._events.get()) is not None:
            yield event

    async def send_audio(self, pcm: bytes) -> None:
        self._heard += pcm

    async def commit_audio(self, *, respond: bool = True) -> None:
        self._committed += self._heard
        self._heard.clear()
        if respond:
            await self.request_response()

    async def request_response(self) -> None:
        audio, self._committed = bytes(self._committed), bytearray()
        response_id = self._next_id()
        self._put(ev.ResponseStarted(response_id))
        if audio:
            self._put(ev.AudioDelta(response_id, audio))
        self._put(ev.ResponseDone(response_id, "completed"))

    async def clear_audio(self) -> None:
        self._heard.clear()

    async def send_text(self, text: str) -> None:
        said = f"tools: {', '.join(self._tools)}" if text == "/tools" else self._prefix + text
        response_id = self._next_id()
        self._put(ev.ResponseStarted(response_id))
        if self._mode == "text":
            self._put(ev.TextDelta(response_id, said))
        else:
            self._put(ev.TranscriptDelta("assistant", said, response_id))
            self._put(ev.AudioDelta(response_id, SILENCE_PER_CHARACTER * len(said)))
            self._put(ev.TranscriptDone("assistant", said, response_id))
        self._put(ev.ResponseDone(response_id, "completed"))

    async def add_context(self, text: str) -> None:
        return None  # an echo keeps no conversation

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        await self.send_text("results of " + ", ".join(result.name for result in results))

    async def send_late_result(self, result: ToolResult) -> None:
        await self.send_text(f"late result of {result.name}")

    async def cancel_response(self) -> None:
        return None  # every reply is whole as soon as it is asked for: nothing to cancel

    async def truncate(self, response_id: str, played_ms: int) -> None:
        return None

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        if mode is not None:
            self._mode = mode

    async def close(self) -> None:
        self._events.put_nowait(None)

    def _next_id(self) -> str:
        self._replies += 1
        return f"echo_{self._replies}"

    def _put(self, event: ev.UpstreamEvent) -> None:
        self._events.put_nowait(event)
