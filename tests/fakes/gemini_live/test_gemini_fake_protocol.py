"""The fake Gemini Live server over a raw ``websockets`` client (TLS): message order, names,
tool calls, barge-in, resumption, goAway, faults and refusals, frame by frame.

No sleeps: the client reads messages in order under a timeout, and waits on the fake with
``FakeGeminiConnection.wait_for``. Clock readings only check the goAway timing.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidStatus

from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.gemini_live.session import Phase
from transports.local.speech import plan_speech

TIMEOUT_S = 5
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
NATIVE = "models/gemini-2.5-flash-native-audio-preview-12-2025"
# The functions the tests' turns call: the model calls only functions it was given.
CALLED = ("a", "b", "book", "lookup", "lost", "ping", "pong")
TEXT_SETUP: dict[str, Any] = {
    "model": "models/gemini-live-2.5-flash-preview",
    "generationConfig": {"responseModalities": ["TEXT"]},
    "tools": [{"functionDeclarations": [{"name": name} for name in CALLED]}],
}
RESUMABLE = {**TEXT_SETUP, "sessionResumption": {}}
AUDIO_SETUP: dict[str, Any] = {
    "model": NATIVE,
    "generationConfig": {"responseModalities": ["AUDIO"]},
    "outputAudioTranscription": {},
}


class Peer:
    """A raw client of the fake; reads server messages in order."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.frame_types: list[type] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def say(self, text: str, *, turn_complete: bool = True) -> None:
        turn = {"role": "user", "parts": [{"text": text}]}
        await self.send({"clientContent": {"turns": [turn], "turnComplete": turn_complete}})

    async def answer(self, *responses: tuple[str, str, dict[str, Any]]) -> None:
        function_responses = [
            {"id": call_id, "name": name, "response": response}
            for call_id, name, response in responses
        ]
        await self.send({"toolResponse": {"functionResponses": function_responses}})

    async def recv(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT_S):
            frame = await self.ws.recv()
        self.frame_types.append(type(frame))
        message: dict[str, Any] = json.loads(frame)
        return message

    async def until(self, key: str) -> list[dict[str, Any]]:
        """Messages up to and including the next one with that key (``a`` or ``a.b``)."""
        seen = [await self.recv()]
        while not has(seen[-1], key):
            seen.append(await self.recv())
        return seen

    async def until_closed(self) -> tuple[list[dict[str, Any]], ConnectionClosed]:
        seen: list[dict[str, Any]] = []
        try:
            while True:
                seen.append(await self.recv())
        except ConnectionClosed as closed:
            return seen, closed


def has(message: dict[str, Any], key: str) -> bool:
    top, _, sub = key.partition(".")
    value = message.get(top)
    return value is not None if not sub else isinstance(value, dict) and sub in value


def describe(message: dict[str, Any]) -> str:
    """``modelTurn``, ``turnComplete``… for serverContent; ``handle`` / ``not-resumable`` for
    sessionResumptionUpdate; the top-level key otherwise."""
    if "serverContent" in message:
        return "+".join(message["serverContent"])
    if "sessionResumptionUpdate" in message:
        return "handle" if message["sessionResumptionUpdate"]["resumable"] else "not-resumable"
    return next(iter(message))


def describe_all(messages: list[dict[str, Any]]) -> list[str]:
    return [describe(message) for message in messages]


def texts(messages: list[dict[str, Any]]) -> str:
    return "".join(
        part["text"]
        for m in messages
        if "modelTurn" in m.get("serverContent", {})
        for part in m["serverContent"]["modelTurn"]["parts"]
    )


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gemini-fake-certs")


@pytest.fixture
async def server(cert_dir: Path) -> AsyncIterator[FakeGeminiServer]:
    async with FakeGeminiServer(cert_dir=cert_dir) as fake:
        yield fake


@asynccontextmanager
async def connect(
    server: FakeGeminiServer,
    setup: dict[str, Any] | None = TEXT_SETUP,
    *,
    path: str = PATH,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Peer]:
    url = f"wss://127.0.0.1:{server.port}{path}"
    async with websockets.connect(
        url, ssl=server.client_ssl_context(), max_size=None, additional_headers=headers or {}
    ) as ws:
        peer = Peer(ws)
        if setup is not None:
            await peer.send({"setup": setup})
            assert await peer.recv() == {"setupComplete": {}}
        yield peer


@asynccontextmanager
async def serving(cert_dir: Path, **options: Any) -> AsyncIterator[FakeGeminiServer]:
    async with FakeGeminiServer(FakeGeminiOptions(**options), cert_dir=cert_dir) as fake:
        yield fake


# -- framing and names -----------------------------------------------------------------------


async def test_setup_complete_comes_first_in_binary_frames(server: FakeGeminiServer) -> None:
    async with connect(server) as peer:
        await peer.say("/say Hello there")
        turn = await peer.until("serverContent.turnComplete")
    assert peer.frame_types == [bytes] * (1 + len(turn))
    fake = server.connections[0]
    assert next(m for direction, m in fake.log if direction == "out") == {"setupComplete": {}}
    assert describe_all(turn) == ["modelTurn", "modelTurn", "generationComplete", "turnComplete"]
    assert texts(turn) == "Hello there"
    assert turn[0]["serverContent"]["modelTurn"] == {"role": "model", "parts": [{"text": "Hello"}]}
    usage = turn[-1]["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["responseTokenCount"]
    assert usage["responseTokensDetails"] == [
        {"modality": "TEXT", "tokenCount": usage["responseTokenCount"]}
    ]


async def test_text_frames_when_asked(cert_dir: Path) -> None:
    async with serving(cert_dir, binary_frames=False) as server, connect(server) as peer:
        await peer.say("hi")
        turn = await peer.until("serverContent.turnComplete")
    assert texts(turn) == "You said: hi"
    assert set(peer.frame_types) == {str}


async def test_an_audio_turn_streams_transcript_then_20_ms_chunks(
    server: FakeGeminiServer,
) -> None:
    async with connect(server, AUDIO_SETUP) as peer:
        await peer.say("/say Hello there")
        turn = await peer.until("serverContent.turnComplete")
    word = ["outputTranscription"] + ["modelTurn"] * 5  # 80 ms tone + 20 ms gap
    assert describe_all(turn) == [*word, *word, "generationComplete", "turnComplete"]
    parts = [m["serverContent"]["modelTurn"]["parts"] for m in turn if describe(m) == "modelTurn"]
    assert {len(p) for p in parts} == {1}
    blobs = [p[0]["inlineData"] for p in parts]
    assert {b["mimeType"] for b in blobs} == {"audio/pcm;rate=24000"}
    audio = [base64.b64decode(b["data"]) for b in blobs]
    assert {len(chunk) for chunk in audio} == {960}
    expected = [chunk for w in plan_speech("Hello there", 24000) for chunk in w.chunks]
    assert audio == expected
    transcripts = [m["serverContent"]["outputTranscription"]["text"] for m in turn[::6][:2]]
    assert transcripts == ["Hello", " there"]
    assert turn[-1]["usageMetadata"]["responseTokensDetails"][0]["modality"] == "AUDIO"


async def test_snake_and_camel_names_are_both_understood(server: FakeGeminiServer) -> None:
    setup = {
        "model": "models/gemini-live-2.5-flash-preview",
        "generation_config": {
            "response_modalities": ["TEXT"],
            "speech_config": {"voice_config": {"prebuilt_voice_config": {"voice_name": "Puck"}}},
        },
        "realtime_input_config": {
            "automatic_activity_detection": {"silence_duration_ms": "200"},
            "activity_handling": "START_OF_ACTIVITY_INTERRUPTS",
        },
        "tools": [
            {
                "function_declarations": [
                    {
                        "name": "book_table",
                        "parameters_json_schema": {
                            "type": "object",
                            "properties": {"party_size": {"type": "integer"}},
                            "additional_properties": False,
                        },
                    },
                    {
                        "name": "find",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {"first_name": {"type": "STRING", "max_length": "5"}},
                            "property_ordering": ["first_name"],
                        },
                    },
                ]
            }
        ],
    }
    async with connect(server, setup) as peer:
        turn = {"role": "user", "parts": [{"text": '/tool book_table {"party_size": 2}'}]}
        await peer.send({"client_content": {"turns": [turn], "turn_complete": True}})
        (call_message,) = await peer.until("toolCall")
        (call,) = call_message["toolCall"]["functionCalls"]
        response = {
            "id": call["id"],
            "name": "book_table",
            "response": {"booking_ref": "A_1"},
            "will_continue": False,
        }
        await peer.send({"tool_response": {"function_responses": [response]}})
        reply = await peer.until("serverContent.turnComplete")
    assert call == {"id": "function-call-1", "name": "book_table", "args": {"party_size": 2}}
    assert texts(reply) == 'Tool results: book_table={"booking_ref":"A_1"}'
    fake = server.connections[0]
    assert fake.setup["generationConfig"] == {
        "responseModalities": ["TEXT"],
        "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Puck"}}},
    }
    assert fake.setup["realtimeInputConfig"]["automaticActivityDetection"] == {
        "silenceDurationMs": "200"
    }
    book, find = fake.setup["tools"][0]["functionDeclarations"]
    assert (
        book["parametersJsonSchema"]
        == setup["tools"][0]["function_declarations"][0]["parameters_json_schema"]
    )
    assert find["parameters"] == {
        "type": "OBJECT",
        "properties": {"first_name": {"type": "STRING", "maxLength": "5"}},
        "propertyOrdering": ["first_name"],
    }
    assert fake.received("toolResponse") == [
        {
            "toolResponse": {
                "functionResponses": [
                    {
                        "id": "function-call-1",
                        "name": "book_table",
                        "response": {"booking_ref": "A_1"},
                        "willContinue": False,
                    }
                ]
            }
        }
    ]
    assert fake.log[2] == ("in", {"client_content": {"turns": [turn], "turn_complete": True}})
    assert fake.received("clientContent.turnComplete")[0]["clientContent"]["turns"] == [turn]


# -- tools -------------------------------------------------------------------------------------


async def test_a_blocking_turn_waits_for_every_id_across_messages(
    server: FakeGeminiServer,
) -> None:
    async with connect(server) as peer:
        await peer.say('/tools lookup {"q":"a"} ;; book {"n":2}')
        (message,) = await peer.until("toolCall")
        first, second = message["toolCall"]["functionCalls"]
        fake = server.connections[0]
        await peer.answer((second["id"], "book", {"output": {"ok": True}}))
        await fake.wait_for("toolResponse", direction="in")
        assert fake.session.phase is Phase.TOOLS_PENDING
        assert fake.session.tools is not None
        assert fake.session.tools.unanswered == [first["id"]]
        assert fake.sent("serverContent") == []
        await peer.answer((first["id"], "lookup", {"output": {"hits": 3}}))
        reply = await peer.until("serverContent.turnComplete")
    assert (first["name"], first["args"], second["name"], second["args"]) == (
        "lookup",
        {"q": "a"},
        "book",
        {"n": 2},
    )
    assert first["id"] != second["id"]
    assert texts(reply) == 'Tool results: lookup={"hits":3}; book={"ok":true}'
    assert describe_all(reply)[-2:] == ["generationComplete", "turnComplete"]


async def test_duplicate_tool_calls_repeat_the_same_message(cert_dir: Path) -> None:
    async with serving(cert_dir, duplicate_tool_calls=True) as server, connect(server) as peer:
        await peer.say("/tool ping {}")
        one = (await peer.until("toolCall"))[-1]
        two = await peer.recv()
        (call,) = one["toolCall"]["functionCalls"]
        await peer.answer((call["id"], "ping", {}))
        await peer.answer((call["id"], "ping", {}))  # a client that answered both copies
        reply = await peer.until("serverContent.turnComplete")
        await server.connections[0].wait_for("toolResponse", count=2, direction="in")
    assert one == two
    assert texts(reply) == "Tool results: ping={}"
    assert server.connections[0].ignored == ["toolResponse for answered id 'function-call-1'"]


async def test_resumption_updates_mark_turns_and_pending_tools(server: FakeGeminiServer) -> None:
    async with connect(server, RESUMABLE) as peer:
        await peer.say("/tool ping {}")
        asked = await peer.until("toolCall")
        pending = await peer.recv()
        call_id = asked[-1]["toolCall"]["functionCalls"][0]["id"]
        await peer.answer((call_id, "ping", {"output": {"pong": 1}}))
        reply = await peer.until("serverContent.turnComplete")
        handle = await peer.recv()
    assert describe_all(asked) == ["not-resumable", "toolCall"]
    assert pending == {"sessionResumptionUpdate": {"newHandle": "", "resumable": False}}
    assert describe_all(reply) == ["modelTurn"] * 3 + ["generationComplete", "turnComplete"]
    assert texts(reply) == 'Tool results: ping={"pong":1}'
    update = handle["sessionResumptionUpdate"]
    assert update["resumable"] is True
    assert update["newHandle"] in server.handles


async def test_barge_in_interrupts_then_cancels_pending_calls(server: FakeGeminiServer) -> None:
    async with connect(server, RESUMABLE) as peer:
        await peer.say("/tools a {} ;; b {}")
        await peer.until("toolCall")
        await peer.until("sessionResumptionUpdate")
        await peer.say("never mind")
        cut = await peer.until("sessionResumptionUpdate")
        after = await peer.until("serverContent.turnComplete")
        await peer.answer(("function-call-1", "a", {"output": {"late": True}}))
        fake = server.connections[0]
        await fake.wait_for("toolResponse", direction="in")
        await peer.say("still there?")
        again = await peer.until("serverContent.turnComplete")
    assert describe_all(cut) == ["interrupted", "toolCallCancellation", "turnComplete", "handle"]
    assert cut[1] == {"toolCallCancellation": {"ids": ["function-call-1", "function-call-2"]}}
    assert "generationComplete" not in describe_all(cut)
    assert texts(after) == "You said: never mind"
    assert texts(again) == "You said: still there?"
    assert fake.ignored == ["toolResponse for unknown or cancelled id 'function-call-1'"]
    assert not any("functionCall" in part for turn in fake.history for part in turn["parts"])


async def test_strict_tool_ids_close_1008_on_a_cancelled_id(cert_dir: Path) -> None:
    async with serving(cert_dir, strict_tool_ids=True) as server, connect(server) as peer:
        await peer.say("/tool a {}")
        await peer.until("toolCall")
        await peer.say("stop")
        await peer.until("toolCallCancellation")
        await peer.answer(("function-call-1", "a", {}))
        _, closed = await peer.until_closed()
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1008, "Requested entity was not found")


async def test_hang_never_completes_until_barge_in(server: FakeGeminiServer) -> None:
    async with connect(server) as peer:
        await peer.say("/hang")
        fake = server.connections[0]
        await fake.wait_for("clientContent", direction="in")
        assert fake.session.phase is Phase.GENERATING
        await peer.send({"realtimeInput": {"text": "hello?"}})
        cut = await peer.until("serverContent.turnComplete")
        reply = await peer.until("serverContent.turnComplete")
    assert describe_all(cut) == ["interrupted", "turnComplete"]
    assert texts(reply) == "You said: hello?"
    assert fake.sent("serverContent.modelTurn")[0] == reply[0]


# -- resumption and goAway -----------------------------------------------------------------


async def test_a_known_handle_restores_the_session(server: FakeGeminiServer) -> None:
    async with connect(server, RESUMABLE) as peer:
        await peer.say("/tool ping {}")
        await peer.until("toolCall")
        await peer.answer(("function-call-1", "ping", {}))
        await peer.until("serverContent.turnComplete")
        handle = (await peer.recv())["sessionResumptionUpdate"]["newHandle"]
        await peer.say("/tool lost {}")  # after the handle: not part of it
        await peer.until("toolCall")
    resumed = {**RESUMABLE, "sessionResumption": {"handle": handle}}
    async with connect(server, resumed) as peer:
        fresh = await peer.recv()
        await peer.say("/tool pong {}")
        asked = await peer.until("toolCall")
    first, second = server.connections
    assert second.resumed_from == handle
    assert fresh["sessionResumptionUpdate"]["resumable"] is True
    assert fresh["sessionResumptionUpdate"]["newHandle"] not in ("", handle)
    assert second.history[:4] == first.history[:4]
    assert "lost" not in json.dumps(second.history)
    assert asked[-1]["toolCall"]["functionCalls"][0]["id"] == "function-call-3"


async def test_an_unknown_handle_closes_1008(server: FakeGeminiServer) -> None:
    setup = {**RESUMABLE, "sessionResumption": {"handle": "no-such-handle"}}
    async with connect(server, None) as peer:
        await peer.send({"setup": setup})
        seen, closed = await peer.until_closed()
    assert seen == []
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1008, "Session not found")


async def test_the_connection_lifetime_ends_with_go_away_then_1001(cert_dir: Path) -> None:
    loop = asyncio.get_running_loop()
    options = {"connection_lifetime_s": 0.6, "go_away_lead_s": 0.3}
    async with serving(cert_dir, **options) as server:
        start = loop.time()
        async with connect(server) as peer:
            go_away = await peer.recv()
            warned = loop.time()
            seen, closed = await peer.until_closed()
            ended = loop.time()
    assert go_away == {"goAway": {"timeLeft": "0.3s"}}
    assert 0.25 <= warned - start < 0.55
    assert 0.25 <= ended - warned < 1.0
    assert seen == []
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1001


async def test_the_goaway_directive_warns_and_ends_the_turn(server: FakeGeminiServer) -> None:
    async with connect(server, RESUMABLE) as peer:
        await peer.say("/goaway")
        turn = await peer.until("serverContent.turnComplete")
        handle = await peer.recv()
    assert describe_all(turn) == ["not-resumable", "goAway", "generationComplete", "turnComplete"]
    assert turn[1] == {"goAway": {"timeLeft": "1s"}}
    assert handle["sessionResumptionUpdate"]["resumable"] is True


# -- faults and refusals ---------------------------------------------------------------------


async def test_drop_speaks_two_messages_then_closes_1011(server: FakeGeminiServer) -> None:
    async with connect(server, AUDIO_SETUP) as peer:
        await peer.say("/drop Hello there friend")
        seen, closed = await peer.until_closed()
    assert describe_all(seen) == ["outputTranscription", "modelTurn", "modelTurn"]
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1011, "Internal error occurred")
    assert server.connections[0].close_code == 1011


@pytest.mark.parametrize(
    ("text", "reason"), [("/fail", "Internal error occurred"), ("/error quota gone", "quota gone")]
)
async def test_brain_failures_close_1011(server: FakeGeminiServer, text: str, reason: str) -> None:
    async with connect(server) as peer:
        await peer.say(text)
        seen, closed = await peer.until_closed()
    assert seen == []
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1011, reason)


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        ({"clientContent": {"turnComplete": True}}, "The first message must be setup"),
        ({"setup": {"model": "gemini-live-2.5-flash-preview"}}, "setup.model must be"),
        (
            {"setup": {"model": NATIVE, "generationConfig": {"responseModalities": ["TEXT"]}}},
            "does not support TEXT",
        ),
        (
            {
                "setup": {
                    **TEXT_SETUP,
                    "generationConfig": {"responseModalities": ["TEXT", "AUDIO"]},
                }
            },
            "Exactly one response modality",
        ),
        ({"setup": TEXT_SETUP, "realtimeInput": {}}, "exactly one of setup"),
        ({"bogus": {}}, 'Unknown name "bogus"'),
    ],
)
async def test_bad_first_messages_close_1007(
    server: FakeGeminiServer, first: dict[str, Any], reason: str
) -> None:
    async with connect(server, None) as peer:
        await peer.send(first)
        seen, closed = await peer.until_closed()
    assert seen == []
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1007
    assert reason in closed.rcvd.reason


async def test_invalid_json_and_bad_audio_close_1007(server: FakeGeminiServer) -> None:
    async with connect(server) as peer:
        await peer.ws.send("{not json")
        _, closed = await peer.until_closed()
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1007
    assert closed.rcvd.reason.startswith("Invalid JSON payload received.")
    async with connect(server) as peer:
        audio = {"mimeType": "audio/pcm;rate=16000", "data": "***"}
        await peer.send({"realtimeInput": {"audio": audio}})
        _, closed = await peer.until_closed()
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1007
    assert "Base64 decoding failed" in closed.rcvd.reason
    assert server.connections[0].log[-1] == ("in", {"raw": "{not json"})


async def test_setup_hang_accepts_setup_and_never_answers(cert_dir: Path) -> None:
    async with serving(cert_dir, setup_complete=False) as server, connect(server, None) as peer:
        await peer.send({"setup": TEXT_SETUP})
        await peer.say("anyone?")
        fake = await server.wait_connections(1)
        await fake.wait_for("clientContent", direction="in")
        assert fake.sent("setupComplete") == []
        assert fake.log[-1][0] == "in"
        assert fake.setup["model"] == TEXT_SETUP["model"]
        assert fake.ignored == ["clientContent before setupComplete"]
        await fake.drop(1011, "gave up")
        seen, closed = await peer.until_closed()
    assert seen == []
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1011, "gave up")


# -- handshake -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("//ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent", {}),
        (
            "/prefix//ws/google.ai.generativelanguage.v1beta.GenerativeService"
            ".BidiGenerateContent?key=k1",
            {"x-goog-api-key": ""},
        ),
        (
            "/ws/google.ai.generativelanguage.v1alpha.GenerativeService"
            ".BidiGenerateContentConstrained",
            {"Authorization": "Token k1"},
        ),
        (
            "/ws/google.ai.generativelanguage.v1alpha.GenerativeService"
            ".BidiGenerateContentConstrained?access_token=k1",
            {},
        ),
    ],
)
async def test_paths_and_key_forms_that_are_accepted(
    cert_dir: Path, path: str, headers: dict[str, str]
) -> None:
    if not headers and "access_token" not in path:
        headers = {"x-goog-api-key": "k1"}
    async with serving(cert_dir, api_key="k1") as server:
        async with connect(server, path=path, headers=headers) as peer:
            await peer.say("hi")
            turn = await peer.until("serverContent.turnComplete")
        assert server.connections[0].path == path.split("?")[0]
    assert texts(turn) == "You said: hi"


@pytest.mark.parametrize(
    ("path", "headers", "status", "message"),
    [
        (PATH, {"x-goog-api-key": "wrong"}, 401, "API key not valid"),
        (PATH, {}, 401, "unregistered callers"),
        ("/ws/google.ai.generativelanguage.v1beta.Other", {"x-goog-api-key": "k1"}, 404, "not"),
        (PATH + "/extra", {"x-goog-api-key": "k1"}, 404, "Method not found"),
    ],
)
async def test_refused_handshakes(
    cert_dir: Path, path: str, headers: dict[str, str], status: int, message: str
) -> None:
    async with serving(cert_dir, api_key="k1") as server:
        with pytest.raises(InvalidStatus) as caught:
            async with connect(server, path=path, headers=headers):
                pass
        assert server.connections == []
    response = caught.value.response
    assert response.status_code == status
    body = json.loads(response.body)
    assert body["error"]["code"] == status
    assert message in body["error"]["message"]


async def test_stop_closes_open_connections_with_1001(cert_dir: Path) -> None:
    server = FakeGeminiServer(cert_dir=cert_dir)
    await server.start()
    try:
        async with connect(server) as peer:
            await peer.say("/hang")
            fake = await server.wait_connections(1)
            await fake.wait_for("clientContent", direction="in")
            await server.stop()
            seen, closed = await peer.until_closed()
    finally:
        await server.stop()
    assert seen == []
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1001, "server shutting down")
    assert fake.close_code == 1001
    assert fake.closed.is_set()
