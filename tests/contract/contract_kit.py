"""The machinery of the transport contract: what a transport under test declares, and a connected
transport (``Subject``) with its events recorded and the waits the behaviours need.

A ``TransportUnderTest`` (``transports_under_test.py`` has one per provider) says how to start
its upstream (a fake on 127.0.0.1, port 0), how to build a transport pointed at it or at an
address that does not answer, how to inject a dropped connection and an unknown upstream event,
and which behaviours do not apply, with the reason. The behaviours themselves are in
``test_transport_contract.py`` and read nothing provider-specific but these entries.

Every wait is bounded and wakes on an event (``transport_kit.Running``), never on a sleep.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, ParamSpec

import pytest
from transport_kit import Running, done_of, is_output, response_id_of, said

from transports import events as ev
from transports.base import Mode, ToolDeclaration, Transport, UpstreamConfig

__all__ = [
    "BEHAVIOURS",
    "CONNECT_TIMEOUT_S",
    "LONG_SAY",
    "TIMEOUT_S",
    "WEATHER",
    "Behaviour",
    "OpenSubject",
    "Reply",
    "Subject",
    "TransportUnderTest",
    "Unreachable",
    "arguments_of",
    "check_well_formed",
    "config",
    "contract",
    "no_upstream",
    "pcm_silence",
    "pcm_tone",
    "unreachable_endpoints",
]

TIMEOUT_S = 5.0  # the bound of every wait for an upstream event
TEST_BOUND_S = 20.0  # the bound of a whole test (its waits, sends and closes)
CONNECT_TIMEOUT_S = 0.5  # the transports' connect timeout when nothing answers
LONG_SAY = "/say " + " ".join(f"word{n}" for n in range(100))  # 10 s of paced speech

P = ParamSpec("P")

Behaviour = Literal[
    "connect",
    "unreachable",
    "text_turn",
    "audio_turn",
    "tool_call",
    "cancel",
    "close",
    "reconnect",
    "unknown_event",
]
BEHAVIOURS: tuple[Behaviour, ...] = (
    "connect",
    "unreachable",
    "text_turn",
    "audio_turn",
    "tool_call",
    "cancel",
    "close",
    "reconnect",
    "unknown_event",
)

# One tool, declared in every provider's shape (the registry's ``providerSchemas`` keys).
_WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER = ToolDeclaration(
    "get_weather",
    "Weather for a city.",
    {
        "openaiRealtime": {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": _WEATHER_PARAMETERS,
        },
        "openaiChat": {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": _WEATHER_PARAMETERS,
            },
        },
        "gemini": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parametersJsonSchema": _WEATHER_PARAMETERS,
        },
    },
)


def contract(
    behaviour: Behaviour,
) -> Callable[[Callable[P, Awaitable[None]]], Callable[P, Awaitable[None]]]:
    """A contract test: it checks ``behaviour`` (skipped, with the reason, for a transport whose
    entry says it does not apply), runs on both event loops, and fails after ``TEST_BOUND_S``
    instead of hanging."""

    def wrap(test: Callable[P, Awaitable[None]]) -> Callable[P, Awaitable[None]]:
        @functools.wraps(test)
        async def bounded(*args: P.args, **kwargs: P.kwargs) -> None:
            async with asyncio.timeout(TEST_BOUND_S):
                await test(*args, **kwargs)

        # On asyncio's loop and on uvloop's, which ``gateway serve`` runs the transports on.
        marked: Callable[P, Awaitable[None]] = pytest.mark.both_loops(
            pytest.mark.behaviour(behaviour)(bounded)
        )
        return marked

    return wrap


def config(mode: Mode) -> UpstreamConfig:
    return UpstreamConfig(
        mode=mode, instructions="Be brief.", tools=(WEATHER,), session_id="contract"
    )


def arguments_of(call: ev.RequestedCall) -> Any:
    """A call's arguments as a value: JSON text (OpenAI, chat) or an object (Gemini)."""
    arguments = call.arguments
    return json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})


def pcm_tone(ms: int, rate: int, amplitude: int = 8000) -> bytes:
    """A loud square wave: every voice activity detector hears it as speech."""
    period = max(rate // 400, 2)
    return b"".join(
        (amplitude if (i // (period // 2)) % 2 == 0 else -amplitude).to_bytes(
            2, "little", signed=True
        )
        for i in range(rate * ms // 1000)
    )


def pcm_silence(ms: int, rate: int) -> bytes:
    return bytes(rate * ms // 1000 * 2)


# What a transport under test declares ----------------------------------------------------------

Upstream = Any  # the running fake (``None`` for a transport without an upstream)


@dataclass(frozen=True, slots=True)
class Unreachable:
    """An address where no upstream answers: refused (nothing listens) or silent (a listener
    that accepts TCP and never says a word, so only the connect timeout ends the wait)."""

    kind: Literal["refused", "silent"]
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class TransportUnderTest:
    """One transport and its fake, as the contract needs them (the test id is ``name``).

    - ``start_upstream(cert_dir)``: an async context manager that starts the fake on
      127.0.0.1, port 0, yields it, and stops it; it must deliver long replies paced (a reply to
      ``LONG_SAY`` lasts seconds) so that a cancel lands mid-reply;
    - ``build(upstream)``: a new transport pointed at that fake (short reconnect backoff);
    - ``build_unreachable(address, connect_timeout_s)``: a transport pointed at an address that
      does not answer;
    - ``connect_opens_upstream``: ``connect`` opens a connection (so an unreachable upstream
      fails it); False for a stateless upstream, where the first turn fails instead;
    - ``inject_drop(subject)``: the upstream drops the connection; ``drop_recovery`` says what
      the transport then shows: ``"reconnects"`` (``UpstreamRecovered``) or
      ``"fails_the_turn"`` (an ``UpstreamNotice`` and a failed response);
    - ``inject_unknown(subject, text)``: make the upstream answer ``text`` with an event (or
      fields) the transport does not know, and make sure it was sent;
    - ``not_applicable``: behaviour → why it does not apply (that test is not generated for it).
    """

    name: str
    start_upstream: Callable[[Path], AbstractAsyncContextManager[Upstream]]
    build: Callable[[Upstream], Transport]
    build_unreachable: Callable[[Unreachable, float], Transport] | None = None
    connect_opens_upstream: bool = True
    inject_drop: Callable[[Subject], Awaitable[None]] | None = None
    drop_recovery: Literal["reconnects", "fails_the_turn"] = "reconnects"
    inject_unknown: Callable[[Subject, str], Awaitable[None]] | None = None
    not_applicable: Mapping[Behaviour, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for behaviour in self.not_applicable:
            assert behaviour in BEHAVIOURS, behaviour
        needs = {
            "unreachable": self.build_unreachable,
            "reconnect": self.inject_drop,
            "unknown_event": self.inject_unknown,
        }
        for behaviour, given in needs.items():
            assert (given is None) == (behaviour in self.not_applicable), (
                f"{self.name}: give either the means to test {behaviour} or the reason it "
                "does not apply"
            )


@asynccontextmanager
async def no_upstream(cert_dir: Path) -> AsyncIterator[None]:
    """For a transport that has no upstream (the embedded model)."""
    yield None


@asynccontextmanager
async def unreachable_endpoints() -> AsyncIterator[list[Unreachable]]:
    """A refused and a silent address on 127.0.0.1, held for the duration of the block."""
    refused = socket.socket()  # bound, never listening: connections are refused
    silent = socket.socket()  # listening, never accepting: TCP connects, nothing answers
    try:
        refused.bind(("127.0.0.1", 0))
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        yield [
            Unreachable("refused", "127.0.0.1", refused.getsockname()[1]),
            Unreachable("silent", "127.0.0.1", silent.getsockname()[1]),
        ]
    finally:
        refused.close()
        silent.close()


# A connected transport ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """One response: its id, how it ended, and its events (``ResponseStarted`` to ``Done``)."""

    response_id: str
    status: str
    events: tuple[ev.UpstreamEvent, ...]

    @property
    def text(self) -> str:
        return said(self.events, self.response_id)

    @property
    def audio(self) -> list[bytes]:
        return [e.pcm for e in self.events if isinstance(e, ev.AudioDelta)]


class Subject:
    """One transport under test, connected to its upstream, with its events recorded."""

    def __init__(
        self, entry: TransportUnderTest, upstream: Upstream, transport: Transport, mode: Mode
    ) -> None:
        self.entry = entry
        self.upstream = upstream
        self.transport = transport
        self.mode = mode
        self.run = Running(upstream, transport, timeout_s=TIMEOUT_S)

    @property
    def events(self) -> list[ev.UpstreamEvent]:
        return self.run.events

    def mark(self) -> int:
        """Where the events recorded from now on start."""
        return len(self.run.events)

    def since(self, mark: int) -> list[ev.UpstreamEvent]:
        return self.run.events[mark:]

    def first_started(self, mark: int) -> str | None:
        """The first response started at or after ``mark``."""
        return next(
            (e.response_id for e in self.since(mark) if isinstance(e, ev.ResponseStarted)), None
        )

    def first_output(self, mark: int) -> ev.UpstreamEvent | None:
        """The first thing the model said at or after ``mark`` (audio, text or transcript)."""
        return next((e for e in self.since(mark) if is_output(e)), None)

    async def reply(self, mark: int) -> Reply:
        """The first response started at or after ``mark``, once it is done."""

        def done() -> bool:
            response_id = self.first_started(mark)
            return response_id is not None and done_of(self.since(mark), response_id) is not None

        await self.run.until(done)
        response_id = self.first_started(mark)
        assert response_id is not None
        events = self.response_events(response_id, mark)
        ended = done_of(events, response_id)
        assert ended is not None
        return Reply(response_id, ended.status, tuple(events))

    def response_events(self, response_id: str, mark: int = 0) -> list[ev.UpstreamEvent]:
        return [e for e in self.since(mark) if response_id_of(e) == response_id]

    async def say(self, text: str) -> Reply:
        """Send a user message and wait for the whole response to it."""
        mark = self.mark()
        await self.transport.send_text(text)
        return await self.reply(mark)

    def failures(self) -> list[ev.UpstreamEvent]:
        return [e for e in self.run.events if isinstance(e, ev.UpstreamFailed)]


def check_well_formed(events: Sequence[ev.UpstreamEvent]) -> None:
    """What holds for any transport's events: a response is started once, before anything of
    it; it is done at most once; nothing of it follows its ``ResponseDone``; a tool call id is
    requested once (the gateway runs a call id once)."""
    started: set[str] = set()
    done: set[str] = set()
    calls: set[str] = set()
    for index, event in enumerate(events):
        if isinstance(event, ev.ToolCallsRequested):
            for call in event.calls:
                assert call.call_id not in calls, f"call id requested twice: {list(events)!r}"
                calls.add(call.call_id)
        response_id = response_id_of(event)
        if response_id is None:
            continue
        where = f"event {index} ({event!r}) in {list(events)!r}"
        if isinstance(event, ev.ResponseStarted):
            assert response_id not in started, f"started twice: {where}"
            started.add(response_id)
            continue
        assert response_id in started, f"before its ResponseStarted: {where}"
        assert response_id not in done, f"after its ResponseDone: {where}"
        if isinstance(event, ev.ResponseDone):
            done.add(response_id)


OpenSubject = Callable[[Mode], Awaitable[Subject]]
