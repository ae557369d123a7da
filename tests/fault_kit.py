"""Shared by the tests of the fakes' fault modes (``fakes.faults``): the statuses and the
providers' error bodies expected, waits on a fault's ``on_applied`` hook, the check that a
closed stalled connection leaves nothing running, ``Peer`` (one raw WebSocket client) and a chat
SDK client. Every wait is bounded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
from websockets.asyncio.client import ClientConnection

from fakes.chat.server import FakeChatServer
from fakes.faults import FaultKind, UpstreamFaults
from fakes.shell import ConnectionShell

TIMEOUT_S = 5
QUIET_S = 0.2  # chat only: how long a client reads to see that nothing more comes
GEMINI_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
TEXT_MODEL = "models/gemini-live-2.5-flash-preview"
AUDIO_MODEL = "models/gemini-2.5-flash-native-audio-preview-12-2025"
# status → (OpenAI error type, code), (Google status name)
OPENAI_ERRORS = {
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
}
GOOGLE_ERRORS = {
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
}
SDK_ERRORS: dict[int, type[openai.APIStatusError]] = {
    429: openai.RateLimitError,
    500: openai.InternalServerError,
    503: openai.InternalServerError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
}


# Shared helpers --------------------------------------------------------------------------------


def applied_event(faults: UpstreamFaults, kind: FaultKind) -> asyncio.Event:
    """Set when ``kind`` applies (``on_applied``)."""
    event = asyncio.Event()

    def seen(applied: FaultKind) -> None:
        if applied == kind:
            event.set()

    faults.on_applied = seen
    return event


async def bounded(event: asyncio.Event) -> None:
    async with asyncio.timeout(TIMEOUT_S):
        await event.wait()


async def settled(before: set[asyncio.Task[Any]]) -> None:
    """Every task started since ``before`` ends: a stalled connection leaves nothing running."""
    left = asyncio.all_tasks() - before - {asyncio.current_task()}
    if left:
        _, pending = await asyncio.wait(left, timeout=TIMEOUT_S)
        assert not pending, pending


async def closed(connection: ConnectionShell[Any, Any, Any]) -> None:
    async with asyncio.timeout(TIMEOUT_S):
        await connection.closed.wait()


class Peer:
    """A raw WebSocket client of a realtime fake: JSON in, JSON out, every read bounded."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def recv(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            message: dict[str, Any] = json.loads(await self.ws.recv())
        return message

    async def recv_many(self, count: int) -> list[dict[str, Any]]:
        return [await self.recv() for _ in range(count)]


@asynccontextmanager
async def chat_sdk(
    server: FakeChatServer, max_retries: int = 0
) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="sk-test", max_retries=max_retries
    ) as client:
        yield client


async def chat_text(client: openai.AsyncOpenAI, text: str = "/say hello") -> str:
    async with asyncio.timeout(TIMEOUT_S):
        completion = await client.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": text}]
        )
    return completion.choices[0].message.content or ""
