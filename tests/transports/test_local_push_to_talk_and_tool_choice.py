"""``LocalTransport`` with the session's turn detection and tool choice: push-to-talk turns (no
VAD; a commit that only commits; the answer when asked), and ``tool_choice`` on the reply to a
user turn but not on the reply to tool results.

No sleeps: an input that must produce nothing is followed by a marker message, whose
``ResponseStarted`` must then be the next event (events are queued in order).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from transports.base import (
    ForcedTool,
    ToolChoice,
    ToolDeclaration,
    ToolResult,
    TurnDetection,
    UpstreamConfig,
)
from transports.events import (
    ResponseDone,
    ResponseStarted,
    TextDelta,
    ToolCallsRequested,
    TranscriptDone,
    UpstreamEvent,
)
from transports.local import LocalTransport
from transports.local.tones import silence, tone

TIMEOUT_S = 5
RATE = 16000
MANUAL = TurnDetection(manual=True)
TOOLS = [ToolDeclaration("get_weather", "", {}), ToolDeclaration("lookup_order", "", {})]


class Reader:
    def __init__(self, transport: LocalTransport) -> None:
        self.transport = transport
        self._events = transport.events()

    async def until_done(self) -> list[UpstreamEvent]:
        seen: list[UpstreamEvent] = []
        async with asyncio.timeout(TIMEOUT_S):
            async for event in self._events:
                seen.append(event)
                if isinstance(event, ResponseDone):
                    return seen
        raise AssertionError(seen)


@pytest.fixture
async def opened() -> AsyncIterator[list[LocalTransport]]:
    made: list[LocalTransport] = []
    yield made
    for transport in made:
        await transport.close()


async def start(
    made: list[LocalTransport],
    *,
    mode: str = "voice",
    turns: TurnDetection = MANUAL,
    choice: ToolChoice = "auto",
) -> Reader:
    transport = LocalTransport(pace=0.0)
    made.append(transport)
    config = UpstreamConfig(
        mode=mode,  # type: ignore[arg-type]
        instructions="",
        tools=TOOLS,
        client_input_rate=RATE,
        turn_detection=turns,
        tool_choice=choice,
    )
    await transport.connect(config)
    return Reader(transport)


def said(events: list[UpstreamEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextDelta))


def transcript(events: list[UpstreamEvent]) -> str:
    return next(e.text for e in events if isinstance(e, TranscriptDone) and e.role == "assistant")


async def test_push_to_talk_is_the_whole_buffer_committed_and_answered_when_asked(
    opened: list[LocalTransport],
) -> None:
    reader = await start(opened)
    transport = reader.transport
    await transport.send_audio(tone(440, 400, RATE) + silence(800, RATE))  # no VAD ends it
    await transport.commit_audio(respond=False)
    await transport.send_audio(tone(440, 200, RATE))  # the next utterance: not committed
    await transport.request_response()
    events = await reader.until_done()
    heard = [e.text for e in events if isinstance(e, TranscriptDone) and e.role == "user"]
    assert heard == ["audio:1200ms"]
    assert transcript(events) == "You said: audio:1200ms"
    assert [type(e) for e in events].count(ResponseStarted) == 1


async def test_commits_not_answered_are_answered_as_one_and_commit_alone_answers(
    opened: list[LocalTransport],
) -> None:
    reader = await start(opened)
    transport = reader.transport
    for ms in (300, 500):
        await transport.send_audio(tone(440, ms, RATE))
        await transport.commit_audio(respond=False)
    await transport.request_response()
    assert transcript(await reader.until_done()) == "You said: audio:800ms"
    await transport.send_audio(tone(440, 250, RATE))
    await transport.commit_audio()
    assert transcript(await reader.until_done()) == "You said: audio:250ms"
    await transport.request_response()  # nothing new to answer
    assert transcript(await reader.until_done()) == "I'm listening."


async def test_server_turns_wait_for_the_request_after_a_commit_without_a_reply(
    opened: list[LocalTransport],
) -> None:
    reader = await start(opened, mode="text", turns=TurnDetection())
    transport = reader.transport
    await transport.send_audio(tone(440, 300, RATE))
    await transport.commit_audio(respond=False)
    await transport.send_text("marker")
    events = await reader.until_done()
    heard = [e.text for e in events if isinstance(e, TranscriptDone) and e.role == "user"]
    assert heard == ["audio:300ms"]
    assert said(events) == "You said: marker"  # the commit started no reply of its own


async def test_tool_choice_applies_to_user_turns_and_a_change_from_the_next_one(
    opened: list[LocalTransport],
) -> None:
    reader = await start(opened, mode="text", choice=ForcedTool("lookup_order"))
    transport = reader.transport
    await transport.send_text("hello")
    (requested,) = [e for e in await reader.until_done() if isinstance(e, ToolCallsRequested)]
    assert [(c.name, c.arguments) for c in requested.calls] == [("lookup_order", "{}")]
    (call,) = requested.calls
    await transport.send_tool_results([ToolResult(call.call_id, call.name, {"ok": True})])
    assert said(await reader.until_done()) == 'Tool results: lookup_order={"ok":true}'
    await transport.update(tool_choice="none")
    await transport.send_text("/tool get_weather {}")
    assert said(await reader.until_done()) == "You said: /tool get_weather {}"
