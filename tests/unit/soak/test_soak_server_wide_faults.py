"""The soak's server-wide OpenAI faults, from the two ends: the upstreams' control API switches
the fake's fault modes on for its next connections or response and writes down each time one
applied, naming the soak session whose connection a stall met (the tap marks each connection's
tasks as it reads their frames); and a client that meets a failover goes on with its turn: the
reply the failover cut is not taken for the turn's end, the session follows its new provider.
No sockets: the fake is not started, the gateway is a script."""

from __future__ import annotations

import asyncio
import random
from collections import deque
from pathlib import Path
from typing import Any, cast

import aiohttp

from soak.context import SessionContext, SoakLogs
from soak.conversation import Conversation
from soak.faults import _fits
from soak.link import Link
from soak.nodes import NodeDirectory
from soak.records import Clock, SessionRecord
from soak.turns import reply
from soak.upstreams import UpstreamFakes


def openai_fakes(tmp_path: Path) -> UpstreamFakes:
    return UpstreamFakes(tmp_path, ("openai",))


def test_a_refusal_or_a_429_meets_the_next_connections_then_stops(tmp_path: Path) -> None:
    fakes = openai_fakes(tmp_path)
    assert fakes.openai is not None
    faults = fakes.openai.faults
    answer = fakes.fault("openai_429", "", 0.0, count=2)
    assert answer == {"ok": True, "detail": "the next 2 new OpenAI connections answered 429"}
    assert [faults.take_connection_fault() for _ in range(3)] == [429, 429, None]
    assert fakes.fault("openai_refuse", "", 0.0, count=1)["ok"]
    assert faults.refuse
    faults.take_connection_fault()
    assert not faults.refuse
    assert [(a["kind"], a["tag"]) for a in fakes.applied] == [
        ("status", None),
        ("status", None),
        ("refuse", None),
    ]


def test_no_openai_fake_no_fault(tmp_path: Path) -> None:
    fakes = UpstreamFakes(tmp_path, ("chat",))
    assert fakes.fault("openai_stall_first", "", 0.0) == {
        "ok": False,
        "detail": "no OpenAI fake in this process",
    }


async def test_a_stall_is_written_down_with_the_session_whose_connection_it_met(
    tmp_path: Path,
) -> None:
    fakes = openai_fakes(tmp_path)
    assert fakes.openai is not None
    assert fakes.openai.tap is not None
    tap, faults = fakes.openai.tap, fakes.openai.faults
    assert fakes.fault("openai_stall_mid", "", 0.0, after=3)["ok"]
    first, second = object(), object()  # two connections, each served by tasks of its own
    go = asyncio.Event()

    async def connection(marker: object, tag: str, stalls: bool) -> None:
        tap(
            marker, "in", {"type": "session.update", "session": {"instructions": f"soak-tag:{tag}"}}
        )

        async def delivery() -> None:  # a response's delivery, started by the connection
            await go.wait()
            if stalls:
                assert faults.take_stall_mid(3)

        await asyncio.create_task(delivery())

    tasks = [
        asyncio.create_task(connection(first, "s5", stalls=True)),
        asyncio.create_task(connection(second, "s6", stalls=False)),
    ]
    await asyncio.sleep(0)
    tap(second, "out", {"type": "response.created"})  # the last frame read was the other's
    go.set()
    await asyncio.gather(*tasks)
    assert [(a["kind"], a["tag"]) for a in fakes.applied] == [("stall_mid", "s5")]
    assert not faults.take_stall_mid(10)  # the next response goes through: it was for one


class ScriptedLink:
    """What the gateway sends, in order; nothing more once it is read (a quiet socket)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = deque(events)
        self.node = "a"

    async def next(self, within: float) -> dict[str, Any]:
        if not self.events:
            await asyncio.sleep(min(within, 0.01))
            raise TimeoutError
        return self.events.popleft()


def conversation(events: list[dict[str, Any]]) -> tuple[Conversation, SessionRecord]:
    record = SessionRecord(1, "voice_openai", "openai", "s1", created_at=0.0)
    record.alias = "soak-voice"
    nodes = NodeDirectory([], random.Random(1))
    conv = Conversation(record, nodes, cast(aiohttp.ClientSession, None), Clock())
    conv.link = cast(Link, ScriptedLink(events))
    return conv, record


async def test_a_turn_cut_by_a_failover_waits_for_the_new_models_reply() -> None:
    conv, record = conversation(
        [
            {"type": "response.done", "status": "interrupted", "text": "Hel"},
            {
                "type": "session.provider_changed",
                "provider": "gemini",
                "model": None,
                "reason": "stall_mid_response",
                "previous": "openai/*",
            },
            {"type": "response.done", "status": "completed", "text": "Hello again."},
        ]
    )
    done = await reply(conv, 1.0)
    assert done["text"] == "Hello again."
    assert record.upstream == "gemini"
    assert [(f.reason, f.provider, f.previous, f.cut) for f in record.failovers] == [
        ("stall_mid_response", "gemini", "openai/*", True)
    ]
    assert record.problems == []


async def test_an_interrupted_reply_without_a_failover_is_still_the_turns_end() -> None:
    conv, record = conversation(
        [
            {"type": "response.done", "status": "interrupted", "text": "Hel"},
            {"type": "speech.started"},
        ]
    )
    done = await reply(conv, 1.0)
    assert done["status"] == "interrupted"
    assert (await conv.event(1.0))["type"] == "speech.started"  # read ahead, then given back
    assert record.failovers == []


async def test_a_move_to_a_provider_outside_the_alias_is_a_problem() -> None:
    conv, record = conversation(
        [
            {
                "type": "session.provider_changed",
                "provider": "chat",
                "model": None,
                "reason": "lost",
                "previous": "openai/*",
            }
        ]
    )
    await conv.event(1.0)
    assert record.problems == ["moved to provider 'chat', not of alias 'soak-voice'"]


def test_a_fault_aimed_at_one_session_spares_one_that_failed_over() -> None:
    def live(kind: str, provider: str, upstream: str) -> SessionContext:
        record = SessionRecord(1, kind, provider, "s1", created_at=0.0)
        record.started_at, record.upstream = 1.0, upstream
        clock = Clock()
        return SessionContext(record, random.Random(1), clock, SoakLogs(), asyncio.Event())

    assert _fits(live("voice_openai", "openai", "openai"), "openai")
    moved = live("voice_openai", "openai", "gemini")
    assert not _fits(moved, "openai")
    assert not _fits(moved, "gemini")  # its kind's faults are OpenAI's
    assert _fits(live("text_gemini", "gemini", "gemini"), "gemini")
    assert _fits(moved, "client")  # the client's own faults still reach it
