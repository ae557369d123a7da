"""The integration harness: a gateway on a free loopback port and a docs/protocol.md
test client.

Imported by the tests of this folder as ``harness`` (pytest puts the folder on ``sys.path``).

The client below is written from docs/protocol.md alone (plain aiohttp WebSocket, JSON and bytes);
it does not use the gateway's own codec, so it checks the wire contract, not our encoder.
"""

from __future__ import annotations

import base64
import json
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
import jwt

from gateway.config import Settings
from gateway.observability import Metrics
from gateway.registry import Registry, load_registry
from gateway.server import GatewayServer
from gateway.session.manager import SessionManager
from gateway.toolrun import MemoryAuditSink
from registry_build import build_registry
from registry_build.build import serialize_artifact
from transports.base import (
    Mode,
    ToolChoice,
    ToolResult,
    Transport,
    TurnDetection,
    UpstreamConfig,
)
from transports.events import UpstreamEvent

SECRET = "integration-secret-0123456789abcdef"
TIMEOUT_S = 5.0


def token(
    sub: str = "alice",
    roles: list[str] | tuple[str, ...] = (),
    *,
    ttl: int = 300,
    secret: str = SECRET,
    **claims: Any,
) -> str:
    payload = {"sub": sub, "roles": list(roles), "exp": int(time.time()) + ttl, **claims}
    return jwt.encode(payload, secret, "HS256")


def pcm_tone(ms: int, rate: int = 16000, amplitude: int = 8000) -> bytes:
    """A loud square wave: the local model's energy VAD hears it as speech."""
    samples = rate * ms // 1000
    period = max(rate // 400, 2)
    out = bytearray()
    for i in range(samples):
        value = amplitude if (i // (period // 2)) % 2 == 0 else -amplitude
        out += int(value).to_bytes(2, "little", signed=True)
    return bytes(out)


def pcm_silence(ms: int, rate: int = 16000) -> bytes:
    return bytes(rate * ms // 1000 * 2)


async def speak(client: Client, ms: int, rate: int = 16000) -> None:
    """An utterance as 20 ms binary frames: a tone, then enough silence to end it."""
    pcm = pcm_tone(ms, rate) + pcm_silence(600, rate)
    step = rate * 20 // 1000 * 2
    for start in range(0, len(pcm), step):
        await client.send_raw(pcm[start : start + step])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class _FakeServer(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


FakeT = TypeVar("FakeT", bound=_FakeServer)


class Fakes(Generic[FakeT]):
    """The fake upstream servers one test starts (``await fakes(**options)``), all stopped at
    its end (``stop_all``, from the fixture)."""

    def __init__(self, make: Callable[..., FakeT]) -> None:
        self._make = make
        self.servers: list[FakeT] = []

    async def __call__(self, **options: Any) -> FakeT:
        server = self._make(**options)
        await server.start()
        self.servers.append(server)
        return server

    async def stop_all(self) -> None:
        for server in self.servers:
            await server.stop()


class Client:
    """One protocol client. Text events and binary frames are kept in arrival order."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.audio: list[bytes] = []
        # ("event", dict) or ("audio", bytes), in the order they arrived, and when (monotonic).
        self.timeline: list[tuple[str, Any]] = []
        self.arrived: list[float] = []
        self.close_code: int | None = None
        self.started: dict[str, Any] = {}

    async def send(self, type_: str, **fields: Any) -> None:
        await self.ws.send_str(json.dumps({"type": type_, **fields}))

    async def send_raw(self, data: str | bytes) -> None:
        if isinstance(data, bytes):
            await self.ws.send_bytes(data)
        else:
            await self.ws.send_str(data)

    async def next(self, within: float = TIMEOUT_S) -> dict[str, Any]:
        """The next text event (binary frames on the way are collected)."""
        deadline = time.monotonic() + within
        while True:
            msg = await self.ws.receive(timeout=max(deadline - time.monotonic(), 0.01))
            if msg.type == aiohttp.WSMsgType.BINARY:
                self.audio.append(msg.data)
                self.timeline.append(("audio", msg.data))
                self.arrived.append(time.monotonic())
                continue
            if msg.type == aiohttp.WSMsgType.TEXT:
                event: dict[str, Any] = json.loads(msg.data)
                self.events.append(event)
                self.timeline.append(("event", event))
                self.arrived.append(time.monotonic())
                return event
            if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                self.close_code = self.ws.close_code
                raise ConnectionClosed(self.close_code)
            raise AssertionError(f"unexpected frame {msg!r}")

    async def until(
        self, type_: str, within: float = TIMEOUT_S, **match: Any
    ) -> list[dict[str, Any]]:
        """Events up to and including the first of ``type_`` whose fields match ``match``."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + within
        while True:
            event = await self.next(max(deadline - time.monotonic(), 0.01))
            seen.append(event)
            if event["type"] == type_ and all(event.get(k) == v for k, v in match.items()):
                return seen

    async def last(self, type_: str, within: float = TIMEOUT_S, **match: Any) -> dict[str, Any]:
        return (await self.until(type_, within, **match))[-1]

    async def start(self, mode: str = "text", **fields: Any) -> dict[str, Any]:
        await self.send("session.start", mode=mode, **fields)
        self.started = await self.last("session.started")
        return self.started

    async def say(self, text: str) -> list[dict[str, Any]]:
        """Send a text message; the events up to the response that is not a tool-call one."""
        await self.send("text.send", text=text)
        return await self.until_reply()

    async def until_reply(self, within: float = TIMEOUT_S) -> list[dict[str, Any]]:
        """Events until a ``response.done`` of a response that did not only call tools."""
        seen: list[dict[str, Any]] = []
        tool_responses: set[str] = set()
        while True:
            event = await self.next(within)
            seen.append(event)
            if event["type"] == "tool.started":
                tool_responses.add(_current_response(seen))
            if event["type"] == "response.done" and event["response_id"] not in tool_responses:
                return seen

    async def next_spoken(self, within: float = 10.0) -> dict[str, Any]:
        """The next ``response.done`` that says something (a reply held for its tool calls
        says nothing)."""
        while True:
            event = await self.next(within)
            if event["type"] == "response.done" and event["text"]:
                return event

    async def wait_closed(self, within: float = TIMEOUT_S) -> int | None:
        """Read until the server closes; the close code."""
        try:
            while True:
                await self.next(within)
        except ConnectionClosed as closed:
            return closed.code


def _current_response(seen: list[dict[str, Any]]) -> str:
    for event in reversed(seen):
        if event["type"] == "response.started":
            return str(event["response_id"])
    return ""


class DelegatingTransport:
    """A ``Transport`` that forwards everything to a real one; subclasses change one thing."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities

    async def connect(self, config: UpstreamConfig) -> None:
        await self.inner.connect(config)
        self.capabilities = self.inner.capabilities

    def events(self) -> AsyncIterator[UpstreamEvent]:
        return self.inner.events()

    async def send_audio(self, pcm: bytes) -> None:
        await self.inner.send_audio(pcm)

    async def commit_audio(self, *, respond: bool = True) -> None:
        await self.inner.commit_audio(respond=respond)

    async def request_response(self) -> None:
        await self.inner.request_response()

    async def clear_audio(self) -> None:
        await self.inner.clear_audio()

    async def send_text(self, text: str) -> None:
        await self.inner.send_text(text)

    async def add_context(self, text: str) -> None:
        await self.inner.add_context(text)

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        await self.inner.send_tool_results(results)

    async def send_late_result(self, result: ToolResult) -> None:
        await self.inner.send_late_result(result)

    async def cancel_response(self) -> None:
        await self.inner.cancel_response()

    async def truncate(self, response_id: str, played_ms: int) -> None:
        await self.inner.truncate(response_id, played_ms)

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        await self.inner.update(
            mode=mode,
            instructions=instructions,
            turn_detection=turn_detection,
            tool_choice=tool_choice,
        )

    async def close(self) -> None:
        await self.inner.close()


RUNNER_TOOLS = Path(__file__).resolve().parents[1] / "fixtures" / "runner_tools"


def registry_with_variant(root: Path, source: str, tool_id: str, **changes: Any) -> Registry:
    """The runner fixture tools plus a copy of ``source`` named ``tool_id`` whose schema.json
    has ``changes`` (e.g. ``requiresConfirmation=True``), built and loaded under ``root``."""
    folder = root / tool_id
    shutil.copytree(RUNNER_TOOLS / source, folder, ignore=shutil.ignore_patterns("__pycache__"))
    schema = json.loads((folder / "schema.json").read_text())
    schema.update(toolId=tool_id, **changes)
    (folder / "schema.json").write_text(json.dumps(schema))
    result = build_registry([RUNNER_TOOLS, root])
    assert result.artifact is not None, [str(e) for e in result.errors]
    out = root / "registry.json"
    out.write_bytes(serialize_artifact(result.artifact))
    return load_registry(out)


def model_results(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Parse the local model's ``Tool results: NAME=<json>; NAME=<json>`` reply."""
    prefix = "Tool results: "
    assert text.startswith(prefix), text
    rest = text[len(prefix) :]
    decoder = json.JSONDecoder()
    out: list[tuple[str, dict[str, Any]]] = []
    index = 0
    while index < len(rest):
        equals = rest.index("=", index)
        name = rest[index:equals]
        envelope, index = decoder.raw_decode(rest, equals + 1)
        out.append((name, envelope))
        if rest.startswith("; ", index):
            index += 2
        else:
            assert index == len(rest), rest[index:]
    return out


def timeline_index(timeline: list[tuple[str, Any]], type_: str, **match: Any) -> int:
    """Where the first event of ``type_`` matching ``match`` sits in a client's timeline."""
    for i, (kind, item) in enumerate(timeline):
        if (
            kind == "event"
            and item["type"] == type_
            and all(item.get(k) == v for k, v in match.items())
        ):
            return i
    raise AssertionError(f"no {type_} {match} in the timeline")


class ConnectionClosed(Exception):
    def __init__(self, code: int | None) -> None:
        super().__init__(f"closed with {code}")
        self.code = code


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def first(events: list[dict[str, Any]], type_: str, **match: Any) -> dict[str, Any]:
    for event in events:
        if event["type"] == type_ and all(event.get(k) == v for k, v in match.items()):
            return event
    raise AssertionError(f"no {type_} {match or ''} in {types(events)}")


@dataclass
class Gateway:
    url: str
    server: GatewayServer
    manager: SessionManager
    audit: MemoryAuditSink
    settings: Settings
    metrics: Metrics
    http: aiohttp.ClientSession

    @asynccontextmanager
    async def connect(
        self,
        *,
        sub: str = "alice",
        roles: tuple[str, ...] | list[str] = (),
        headers: dict[str, str] | None = None,
        query: str = "",
    ) -> AsyncIterator[Client]:
        all_headers = {"Authorization": f"Bearer {token(sub, roles)}", **(headers or {})}
        ws = await self.http.ws_connect(
            f"{self.url}/v1/session{query}", headers=all_headers, max_msg_size=0
        )
        client = Client(ws)
        try:
            yield client
        finally:
            await ws.close()

    @asynccontextmanager
    async def session(
        self,
        mode: str = "text",
        *,
        sub: str = "alice",
        roles: tuple[str, ...] | list[str] = (),
        **start: Any,
    ) -> AsyncIterator[Client]:
        async with self.connect(sub=sub, roles=roles) as client:
            await client.start(mode, **start)
            yield client

    def decisions(self, tool: str | None = None) -> list[tuple[str, str]]:
        return [
            (r.tool, r.decision.value) for r in self.audit.records if tool is None or r.tool == tool
        ]

    def metric(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels or None)
        return 0.0 if value is None else value


GatewayFactory = Callable[..., Awaitable[Gateway]]
