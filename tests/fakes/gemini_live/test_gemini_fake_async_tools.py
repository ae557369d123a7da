"""Asynchronous (NON_BLOCKING) function calling in the fake Gemini Live server.

Over a raw ``websockets`` client (TLS), frame by frame: declarations with ``behavior``; a
NON_BLOCKING call acknowledged without waiting; ``scheduling`` ``INTERRUPT`` / ``WHEN_IDLE`` /
``SILENT``; ``willContinue``; refusals; ``scheduling`` on a BLOCKING call; a toolCall mixing
both kinds; barge-in; resumption updates (``test_gemini_fake_async_state`` drives the pure
session step by step). No sleeps: the client reads in order, and waits on the fake.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.gemini_live.session import Phase

TIMEOUT_S = 5
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
TOOLS = [
    {
        "functionDeclarations": [
            {"name": "slow", "behavior": "NON_BLOCKING"},
            {"name": "fast", "behavior": "BLOCKING"},
            {"name": "plain"},
        ]
    }
]
TEXT_SETUP: dict[str, Any] = {
    "model": "models/gemini-live-2.5-flash-preview",
    "generationConfig": {"responseModalities": ["TEXT"]},
    "tools": TOOLS,
}
RESUMABLE = {**TEXT_SETUP, "sessionResumption": {}}
AUDIO_SETUP: dict[str, Any] = {
    "model": "models/gemini-2.5-flash-native-audio-preview-12-2025",
    "tools": TOOLS,
    "outputAudioTranscription": {},
}
ACK = "I've started slow; I'll tell you when it's done."


class Peer:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def say(self, text: str) -> None:
        turn = {"role": "user", "parts": [{"text": text}]}
        await self.send({"clientContent": {"turns": [turn], "turnComplete": True}})

    async def respond(self, call_id: str, name: str, output: Any, **extra: Any) -> None:
        response = {"id": call_id, "name": name, "response": {"output": output}, **extra}
        await self.send({"toolResponse": {"functionResponses": [response]}})

    async def recv(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            message: dict[str, Any] = json.loads(await self.ws.recv())
        return message

    async def until(self, key: str) -> list[dict[str, Any]]:
        """Messages up to and including the next one with that key (``a`` or ``a.b``)."""
        seen = [await self.recv()]
        while not has(seen[-1], key):
            seen.append(await self.recv())
        return seen

    async def closed(self) -> ConnectionClosed:
        try:
            while True:
                await self.recv()
        except ConnectionClosed as closed:
            return closed


def has(message: dict[str, Any], key: str) -> bool:
    top, _, sub = key.partition(".")
    value = message.get(top)
    return value is not None if not sub else isinstance(value, dict) and sub in value


def describe(messages: list[dict[str, Any]]) -> list[str]:
    """``modelTurn``, ``turnComplete``… for serverContent (consecutive repeats once);
    ``handle`` / ``not-resumable``; else the top-level key."""
    out: list[str] = []
    for message in messages:
        if "serverContent" in message:
            name = "+".join(message["serverContent"])
        elif "sessionResumptionUpdate" in message:
            resumable = message["sessionResumptionUpdate"]["resumable"]
            name = "handle" if resumable else "not-resumable"
        else:
            name = next(iter(message))
        if name not in ("modelTurn", "outputTranscription") or out[-1:] != [name]:
            out.append(name)
    return out


def texts(messages: list[dict[str, Any]]) -> str:
    return "".join(
        part["text"]
        for m in messages
        if "modelTurn" in m.get("serverContent", {})
        for part in m["serverContent"]["modelTurn"]["parts"]
    )


def transcript(messages: list[dict[str, Any]]) -> str:
    return "".join(
        m["serverContent"]["outputTranscription"]["text"]
        for m in messages
        if "outputTranscription" in m.get("serverContent", {})
    )


def calls_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (message,) = [m for m in messages if "toolCall" in m]
    calls: list[dict[str, Any]] = message["toolCall"]["functionCalls"]
    return calls


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gemini-fake-certs")


@pytest.fixture
async def server(cert_dir: Path) -> AsyncIterator[FakeGeminiServer]:
    async with FakeGeminiServer(cert_dir=cert_dir) as fake:
        yield fake


@asynccontextmanager
async def connect(
    server: FakeGeminiServer, setup: dict[str, Any] = TEXT_SETUP, *, complete: bool = True
) -> AsyncIterator[Peer]:
    url = f"wss://127.0.0.1:{server.port}{PATH}"
    async with websockets.connect(url, ssl=server.client_ssl_context(), max_size=None) as ws:
        peer = Peer(ws)
        await peer.send({"setup": setup})
        if complete:
            assert await peer.recv() == {"setupComplete": {}}
        yield peer


@asynccontextmanager
async def serving(cert_dir: Path, **options: Any) -> AsyncIterator[FakeGeminiServer]:
    async with FakeGeminiServer(FakeGeminiOptions(**options), cert_dir=cert_dir) as fake:
        yield fake


async def started_slow(peer: Peer) -> tuple[str, list[dict[str, Any]]]:
    """Ask for ``slow`` (NON_BLOCKING): its id, and the turn up to its ``turnComplete``."""
    await peer.say('/tool slow {"n":1}')
    turn = await peer.until("serverContent.turnComplete")
    return calls_of(turn)[0]["id"], turn


# -- declarations ------------------------------------------------------------------------------


async def test_declared_behaviors_are_accepted_and_recorded(server: FakeGeminiServer) -> None:
    tools = [{"function_declarations": [*TOOLS[0]["functionDeclarations"], {"name": "u"}]}]
    tools[0]["function_declarations"][3]["behavior"] = "UNSPECIFIED"
    async with connect(server, {**TEXT_SETUP, "tools": tools}):
        fake = await server.wait_connections(1)
    declared = fake.setup["tools"][0]["functionDeclarations"]
    assert [d.get("behavior") for d in declared] == [
        "NON_BLOCKING",
        "BLOCKING",
        None,
        "UNSPECIFIED",
    ]
    config = fake.session.config
    assert config is not None
    assert config.non_blocking == {"slow"}


@pytest.mark.parametrize("behavior", ["SOMETIMES", "non_blocking", 2, {"x": 1}])
async def test_an_unknown_behavior_refuses_the_setup_with_1007(
    server: FakeGeminiServer, behavior: Any
) -> None:
    tools = [{"functionDeclarations": [{"name": "a"}, {"name": "b", "behavior": behavior}]}]
    async with connect(server, {**TEXT_SETUP, "tools": tools}, complete=False) as peer:
        closed = await peer.closed()
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1007
    assert closed.rcvd.reason.startswith(
        "Invalid value at 'setup.tools[0].function_declarations[1].behavior' (Behavior), "
    )
    assert server.connections[0].sent("setupComplete") == []


# -- a NON_BLOCKING call ---------------------------------------------------------------------


async def test_a_non_blocking_call_is_acknowledged_without_waiting(
    server: FakeGeminiServer,
) -> None:
    async with connect(server) as peer:
        call_id, turn = await started_slow(peer)
        fake = server.connections[0]
        assert fake.open_calls == [call_id]
        assert fake.session.phase is Phase.IDLE
        await peer.respond(call_id, "slow", {"done": True})  # no scheduling: WHEN_IDLE
        answer = await peer.until("serverContent.turnComplete")
    assert calls_of(turn) == [{"id": "function-call-1", "name": "slow", "args": {"n": 1}}]
    assert describe(turn) == ["toolCall", "modelTurn", "generationComplete", "turnComplete"]
    assert texts(turn) == ACK
    assert len(fake.received("toolResponse")) == 1  # sent after the turn was complete
    assert texts(answer) == 'Tool results: slow={"done":true}'
    assert describe(answer) == ["modelTurn", "generationComplete", "turnComplete"]
    assert fake.open_calls == []
    assert fake.history[1:3] == [
        {"role": "model", "parts": [{"functionCall": calls_of(turn)[0]}]},
        {"role": "model", "parts": [{"text": ACK}]},
    ]


async def test_interrupt_cuts_the_speech_and_answers_at_once(cert_dir: Path) -> None:
    async with serving(cert_dir, pace=1.0) as server, connect(server, AUDIO_SETUP) as peer:
        await peer.say("/tool slow {}")
        asked = await peer.until("serverContent.modelTurn")  # the acknowledgement begins
        call_id = calls_of(asked)[0]["id"]
        await peer.respond(call_id, "slow", {"temp": 21}, scheduling="INTERRUPT")
        cut = await peer.until("serverContent.turnComplete")
        answer = await peer.until("serverContent.turnComplete")
    fake = server.connections[0]
    assert describe(asked + cut) == [
        "toolCall",
        "outputTranscription",
        "modelTurn",
        "interrupted",
        "turnComplete",
    ]
    said = transcript(asked + cut)
    assert said
    assert ACK.startswith(said)
    assert said != ACK
    assert describe(answer)[-2:] == ["generationComplete", "turnComplete"]
    assert transcript(answer) == 'Tool results: slow={"temp":21}'
    assert fake.sent("toolCallCancellation") == []
    assert fake.history[-1] == {"role": "model", "parts": [{"text": transcript(answer)}]}
    assert fake.history[-3] == {"role": "model", "parts": [{"text": said}]}  # cut, then result
    assert fake.history[-2]["parts"][0]["functionResponse"]["scheduling"] == "INTERRUPT"


async def test_when_idle_while_speaking_waits_for_the_turn_to_end(cert_dir: Path) -> None:
    async with serving(cert_dir, pace=1.0) as server, connect(server, AUDIO_SETUP) as peer:
        await peer.say("/tool slow {}")
        asked = await peer.until("serverContent.modelTurn")
        call_id = calls_of(asked)[0]["id"]
        await peer.respond(call_id, "slow", {"temp": 21}, scheduling="WHEN_IDLE")
        fake = server.connections[0]
        await fake.wait_for("toolResponse", direction="in")
        assert fake.session.phase is Phase.GENERATING  # still speaking the acknowledgement
        rest = await peer.until("serverContent.turnComplete")
        answer = await peer.until("serverContent.turnComplete")
    assert "interrupted" not in describe(rest)
    assert describe(rest)[-2:] == ["generationComplete", "turnComplete"]
    assert transcript(asked + rest) == ACK
    assert transcript(answer) == 'Tool results: slow={"temp":21}'


async def test_when_idle_while_idle_answers_at_once(server: FakeGeminiServer) -> None:
    async with connect(server) as peer:
        call_id, _ = await started_slow(peer)
        await peer.respond(call_id, "slow", [1, 2], scheduling="SCHEDULING_UNSPECIFIED")
        answer = await peer.until("serverContent.turnComplete")
    assert texts(answer) == 'Tool results: slow={"output":[1,2]}'


async def test_silent_adds_to_the_context_only(server: FakeGeminiServer) -> None:
    async with connect(server, RESUMABLE) as peer:
        call_id, turn = await started_slow(peer)
        turn.append(await peer.recv())  # not resumable: a NON_BLOCKING call is running
        await peer.respond(call_id, "slow", {"sky": "clear"}, scheduling="SILENT")
        update = await peer.recv()  # the last call is over: resumable again, no generation
        await peer.say("hello")
        reply = await peer.until("serverContent.turnComplete")
    fake = server.connections[0]
    assert describe(turn) == [
        "not-resumable",
        "toolCall",
        "not-resumable",
        "modelTurn",
        "generationComplete",
        "turnComplete",
        "not-resumable",
    ]
    assert update["sessionResumptionUpdate"]["resumable"] is True
    assert update["sessionResumptionUpdate"]["newHandle"] in server.handles
    assert describe(reply)[:2] == ["not-resumable", "modelTurn"]
    assert texts(reply) == "You said: hello"
    assert "Tool results" not in str(fake.sent("serverContent"))
    assert fake.history[3] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": call_id,
                    "name": "slow",
                    "response": {"output": {"sky": "clear"}},
                    "scheduling": "SILENT",
                }
            }
        ],
    }


async def test_will_continue_keeps_the_id_open_until_the_final_result(
    server: FakeGeminiServer,
) -> None:
    async with connect(server) as peer:
        call_id, _ = await started_slow(peer)
        await peer.respond(call_id, "slow", {"step": 1}, willContinue=True)
        first = await peer.until("serverContent.turnComplete")
        fake = server.connections[0]
        assert fake.open_calls == [call_id]
        await peer.send(
            {
                "tool_response": {
                    "function_responses": [
                        {"id": call_id, "name": "slow", "response": {}, "will_continue": False}
                    ]
                }
            }
        )
        last = await peer.until("serverContent.turnComplete")
        assert fake.open_calls == []
        await peer.respond(call_id, "slow", {"step": 3}, scheduling="INTERRUPT")
        await peer.say("/say next")
        after = await peer.until("serverContent.turnComplete")
    assert texts(first) == 'Tool results: slow={"step":1}'
    assert texts(last) == "Tool results: slow={}"
    assert texts(after) == "next"  # the response for a finished id made nothing
    assert fake.ignored == [f"toolResponse for answered id {call_id!r}"]
    responses = fake.received("toolResponse")
    assert [r["toolResponse"]["functionResponses"][0].get("willContinue") for r in responses] == [
        True,
        False,
        None,
    ]


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ({"scheduling": "LATER"}, "scheduling' (Scheduling), 'LATER'"),
        ({"scheduling": "when_idle"}, "scheduling' (Scheduling), 'when_idle'"),
        ({"scheduling": 2}, "scheduling' (Scheduling), 2"),
        ({"willContinue": "yes"}, "will_continue' (TYPE_BOOL), 'yes'"),
    ],
)
async def test_an_invalid_scheduling_or_will_continue_closes_1007(
    server: FakeGeminiServer, extra: dict[str, Any], where: str
) -> None:
    async with connect(server) as peer:
        call_id, _ = await started_slow(peer)
        await peer.respond(call_id, "slow", {}, **extra)
        closed = await peer.closed()
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1007
    assert closed.rcvd.reason == f"Invalid value at 'tool_response.function_responses[0].{where}"
    assert server.connections[0].history[-1]["parts"] == [{"text": ACK}]  # nothing kept


async def test_strict_ids_close_1008_on_a_finished_non_blocking_id(cert_dir: Path) -> None:
    async with serving(cert_dir, strict_tool_ids=True) as server, connect(server) as peer:
        call_id, _ = await started_slow(peer)
        await peer.respond(call_id, "slow", {}, scheduling="SILENT")
        await peer.respond(call_id, "slow", {}, scheduling="SILENT")
        closed = await peer.closed()
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1008, "Requested entity was not found")


# -- BLOCKING and mixed ----------------------------------------------------------------------


async def test_scheduling_on_a_blocking_call_is_ignored(server: FakeGeminiServer) -> None:
    async with connect(server) as peer:
        await peer.say("/tool fast {}")
        asked = await peer.until("toolCall")
        call_id = calls_of(asked)[0]["id"]
        fake = server.connections[0]
        assert fake.session.phase is Phase.TOOLS_PENDING
        await peer.respond(call_id, "fast", {"ok": 1}, scheduling="SILENT", willContinue=True)
        reply = await peer.until("serverContent.turnComplete")
    assert texts(reply) == 'Tool results: fast={"ok":1}'
    assert fake.ignored == [
        f"scheduling SILENT of BLOCKING call {call_id!r}",
        f"willContinue of BLOCKING call {call_id!r}",
    ]
    assert fake.open_calls == []


async def test_a_mixed_tool_call_waits_for_its_blocking_calls_only(
    server: FakeGeminiServer,
) -> None:
    async with connect(server) as peer:
        await peer.say('/tools slow {"a":1} ;; plain {"b":2}')
        asked = await peer.until("toolCall")
        slow, plain = calls_of(asked)
        fake = server.connections[0]
        assert fake.session.phase is Phase.TOOLS_PENDING
        assert fake.open_calls == [slow["id"]]
        await peer.respond(slow["id"], "slow", {"late": 1}, scheduling="INTERRUPT")
        await fake.wait_for("toolResponse", direction="in")
        assert fake.sent("serverContent") == []  # no generation to cut: it waits for the turn
        assert fake.session.phase is Phase.TOOLS_PENDING
        await peer.respond(plain["id"], "plain", {"ok": True})
        reply = await peer.until("serverContent.turnComplete")
        after = await peer.until("serverContent.turnComplete")
    assert texts(reply) == f'Tool results: plain={{"ok":true}} {ACK}'
    assert "interrupted" not in describe(reply)
    assert texts(after) == 'Tool results: slow={"late":1}'
    assert fake.open_calls == []


async def test_barge_in_cancels_only_the_blocking_calls(server: FakeGeminiServer) -> None:
    async with connect(server) as peer:
        await peer.say("/tools fast {} ;; slow {}")
        fast, slow = calls_of(await peer.until("toolCall"))
        await peer.say("never mind")
        cut = await peer.until("serverContent.turnComplete")
        reply = await peer.until("serverContent.turnComplete")
        await peer.respond(slow["id"], "slow", {"x": 1})
        answer = await peer.until("serverContent.turnComplete")
    assert describe(cut) == ["interrupted", "toolCallCancellation", "turnComplete"]
    assert cut[1] == {"toolCallCancellation": {"ids": [fast["id"]]}}
    assert texts(reply) == "You said: never mind"
    assert texts(answer) == 'Tool results: slow={"x":1}'
