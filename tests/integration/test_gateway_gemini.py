"""Client ↔ gateway ↔ the Gemini Live fake, over real sockets (TLS), through the official SDK.

The fake (``fakes/gemini_live/server.py``) follows BidiGenerateContent as Google's Live API
reference (https://ai.google.dev/api/live) describes it and answers with the local model's brain:
``/tool``, ``/tools``, ``/say`` and ``You said: …``; a voice utterance of N ms is transcribed
``audio:<N>ms``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from harness import (
    Client,
    Fakes,
    Gateway,
    GatewayFactory,
    first,
    model_results,
    pcm_silence,
    pcm_tone,
    speak,
    types,
)

from fakes.gemini_live.server import (
    FakeGeminiOptions,
    FakeGeminiServer,
)

FakeFactory = Callable[..., Awaitable[FakeGeminiServer]]
LONG_REPLY = " ".join(f"word{n}" for n in range(40))  # 4 s of speech
VOICE_MODEL = "gemini-2.5-flash-native-audio-preview-09-2025"
TEXT_MODEL = "gemini-live-2.5-flash-preview"


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gemini-certs")


@pytest.fixture
async def fake_factory(cert_dir: Path) -> AsyncIterator[FakeFactory]:
    fakes = Fakes(lambda **o: FakeGeminiServer(FakeGeminiOptions(**o), cert_dir=cert_dir))
    yield fakes
    await fakes.stop_all()


@pytest.fixture
async def fake(fake_factory: FakeFactory) -> FakeGeminiServer:
    return await fake_factory()


async def gemini_gateway(
    gateway_factory: GatewayFactory, fake: FakeGeminiServer, **settings: Any
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "gemini",
        "gemini_base_url": fake.base_url,
        "gemini_ca_file": fake.ca_file,
        "gemini_api_key": "test-key",
        "gemini_model": VOICE_MODEL,
        "gemini_text_model": TEXT_MODEL,
        "upstream_reconnect_backoff_s": 0.01,
        **settings,
    }
    return await gateway_factory(**options)


@pytest.fixture
async def gateway(fake: FakeGeminiServer, gateway_factory: GatewayFactory) -> Gateway:
    # The fake is set up first so that it stops last: parked sessions must not reconnect.
    return await gemini_gateway(gateway_factory, fake)


# -- setup and turns ------------------------------------------------------------------------------


async def test_voice_setup_and_a_voice_turn(gateway: Gateway, fake: FakeGeminiServer) -> None:
    async with gateway.session(
        "voice", tools=["get_current_time"], audio={"input_rate": 16000, "output_rate": 16000}
    ) as client:
        assert client.started["audio"]["upstream_input_rate"] == 16000  # Gemini takes 16 kHz
        await speak(client, 400)
        events = await client.until_reply()
        conn = fake.connections[0]
    assert conn.headers["x-goog-api-key"] == "test-key"
    # No permessage-deflate on the upstream hop: it costs CPU per audio chunk.
    assert "permessage-deflate" not in conn.headers.get("Sec-WebSocket-Extensions", "")
    setup = conn.setup
    assert setup["model"] == f"models/{VOICE_MODEL}"
    assert setup["generationConfig"]["responseModalities"] == ["AUDIO"]
    assert "sessionResumption" in setup
    assert "contextWindowCompression" in setup
    assert "inputAudioTranscription" in setup
    assert "outputAudioTranscription" in setup
    assert "get_current_time" in str(setup["systemInstruction"])
    declarations = setup["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["get_current_time"]
    user = first(events, "transcript.done", role="user")
    assert user["text"].startswith("audio:")
    assert events[-1]["text"] == f"You said: {user['text']}"
    assert client.audio
    words = len(events[-1]["text"].split())
    total = sum(len(frame) for frame in client.audio)  # 24 kHz from Gemini, 16 kHz to the client
    assert abs(total - words * 100 * 32) <= 32 * 40


async def test_a_text_turn_uses_the_text_model(gateway: Gateway, fake: FakeGeminiServer) -> None:
    async with gateway.session("text") as client:
        events = await client.say("hello there")
        conn = fake.connections[0]
    assert conn.setup["model"] == f"models/{TEXT_MODEL}"
    assert conn.setup["generationConfig"]["responseModalities"] == ["TEXT"]
    assert events[-1]["text"] == "You said: hello there"
    assert (
        "".join(e["delta"] for e in events if e["type"] == "text.delta") == "You said: hello there"
    )


async def test_a_native_audio_text_model_is_a_clear_error_at_start(
    fake: FakeGeminiServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gemini_gateway(gateway_factory, fake, gemini_text_model=VOICE_MODEL)
    async with gateway.connect() as client:
        await client.send("session.start", mode="text")
        error = await client.last("error")
    assert error["code"] == "upstream_unavailable"
    assert "cannot answer in TEXT" in error["message"]
    assert not fake.connections


# -- tools ----------------------------------------------------------------------------------------


async def test_several_calls_are_answered_in_one_tool_response(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    async with gateway.session("text") as client:
        events = await client.say(
            '/tools get_current_time {} ;; kb_search {"query":"medication reminders"}'
        )
        conn = fake.connections[0]
    assert sorted(e["name"] for e in events if e["type"] == "tool.finished") == [
        "get_current_time",
        "kb_search",
    ]
    assert [name for name, _ in model_results(events[-1]["text"])] == [
        "get_current_time",
        "kb_search",
    ]
    (response,) = conn.received("toolResponse")
    answers = response["toolResponse"]["functionResponses"]
    (call,) = conn.sent("toolCall")
    assert [a["id"] for a in answers] == [c["id"] for c in call["toolCall"]["functionCalls"]]
    assert [a["name"] for a in answers] == ["get_current_time", "kb_search"]
    assert all(isinstance(a["response"], dict) for a in answers)


async def test_a_call_delivered_twice_runs_once(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    twice = await fake_factory(duplicate_tool_calls=True)
    gateway = await gemini_gateway(gateway_factory, twice)
    async with gateway.session("text") as client:
        events = await client.say("/tool get_current_time {}")
        conn = twice.connections[0]
    assert len(conn.sent("toolCall")) == 2
    assert [e["name"] for e in events if e["type"] == "tool.started"] == ["get_current_time"]
    assert gateway.decisions("get_current_time") == [("get_current_time", "executed")]
    assert len(conn.received("toolResponse")) == 1


async def test_barge_in_cancels_the_pending_call_and_its_result_is_never_sent(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    async with gateway.session(
        "voice", audio={"input_rate": 16000, "output_rate": 16000}
    ) as client:
        # sleepy sleeps: the user talks over the call while it runs.
        await client.send("text.send", text='/tool sleepy {"ms": 900}')
        started = await client.last("tool.started")
        conn = fake.connections[0]
        await speak(client, 300)
        cancellation = await conn.wait_for("toolCallCancellation")
        await client.until_reply()
    assert cancellation["toolCallCancellation"]["ids"] == [started["call_id"]]
    finished = first(client.events, "tool.finished", call_id=started["call_id"])
    assert finished["ok"] is False
    assert finished["error"]["type"] == "TRANSIENT"
    assert "cancelled" in finished["error"]["message"]
    assert "speech.started" in types(client.events)
    assert not conn.received("toolResponse")
    assert ("sleepy", "executed") not in gateway.decisions("sleepy")


# -- continuity -----------------------------------------------------------------------------------


async def test_go_away_resumes_with_the_handle_and_the_conversation_continues(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    async with gateway.session("text") as client:
        await client.say("remember the word pineapple")
        first_conn = fake.connections[0]
        handle = first_conn.sent("sessionResumptionUpdate")[-1]["sessionResumptionUpdate"][
            "newHandle"
        ]
        await first_conn.go_away(1.0)
        second = await fake.wait_connections(2)
        events = await client.say("what was the word")
    assert handle
    assert second.setup["sessionResumption"] == {"handle": handle}
    assert second.resumed_from == handle
    assert events[-1]["text"] == "You said: what was the word"
    assert "session.ended" not in types(client.events)
    assert types(client.events).count("error") == 0
    assert gateway.metric("gateway_upstream_reconnects_total") == 1


async def test_an_abrupt_drop_is_recovered(gateway: Gateway, fake: FakeGeminiServer) -> None:
    async with gateway.session("text") as client:
        await client.say("first")
        await fake.connections[0].drop(1011)
        second = await fake.wait_connections(2)
        events = await client.say("second")
    assert second.resumed_from is not None
    assert events[-1]["text"] == "You said: second"
    assert "session.ended" not in types(client.events)


async def test_a_drop_mid_reply_ends_it_and_the_model_answers_again(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    paced = await fake_factory(pace=1.0)
    gateway = await gemini_gateway(gateway_factory, paced)
    async with gateway.session("text") as client:
        await client.send("text.send", text=f"/say {LONG_REPLY}")
        started = await client.last("response.started")
        await client.last("text.delta")
        await paced.connections[0].drop(1011)
        cut = await client.last("response.done", response_id=started["response_id"])
        again = await client.until_reply(within=15)
    assert cut["status"] == "interrupted"
    assert again[-1]["text"] == LONG_REPLY


async def test_an_upstream_that_is_gone_ends_the_session_cleanly(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    fake = await fake_factory()
    gateway = await gemini_gateway(gateway_factory, fake, upstream_reconnect_attempts=3)
    async with gateway.session("text") as client:
        await client.say("hello")
        await fake.stop()
        ended = await client.last("session.ended", within=15)
        code = await client.wait_closed()
    assert ended["reason"] == "upstream_failed"
    assert "3 attempts" in ended["detail"]
    assert code == 1000


async def test_a_fake_that_never_completes_setup_is_a_clear_error(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    silent = await fake_factory(setup_complete=False)
    gateway = await gemini_gateway(gateway_factory, silent, upstream_connect_timeout_s=0.5)
    async with gateway.connect() as client:
        await client.send("session.start", mode="text")
        error = await client.last("error", within=5)
    assert error["code"] == "upstream_unavailable"
    assert "setupComplete" in error["message"]


async def test_switching_mode_continues_on_a_new_connection(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    async with gateway.session("text") as client:
        await client.say("remember the word pineapple")
        await client.send("session.update", mode="voice")
        await client.last("session.updated")
        second = await fake.wait_connections(2)
        events = await client.say("now with a voice")
    assert second.setup["generationConfig"]["responseModalities"] == ["AUDIO"]
    history = second.received("clientContent")[0]["clientContent"]
    assert history["turnComplete"] is False
    assert "pineapple" in str(history["turns"])
    assert events[-1]["text"] == "You said: now with a voice"
    assert client.audio


async def test_a_call_of_a_new_gemini_session_runs_though_its_id_repeats_an_earlier_one(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    """Found by the soak (a turn that never ended): Gemini numbers its calls per session, so a
    new session (a mode switch here; a move to another node, a connection lost before any
    handle) calls ``function-call-1`` again. The gateway took it for the earlier call delivered
    twice: it never ran, the model never got a result, and the conversation hung."""
    async with gateway.session("text") as client:
        first = await client.say('/tool echo {"text": "first"}')
        await client.send("session.update", mode="voice")
        await client.last("session.updated")
        second_conn = await fake.wait_connections(2)
        second = await client.say('/tool echo {"text": "second"}')
    first_call = first_done(first)
    second_call = first_done(second)
    assert second_call["data"] == {"text": "second", "count": 1}
    assert second_call["call_id"] != first_call["call_id"]
    # Gemini is answered with its own id.
    (response,) = second_conn.received("toolResponse")
    (answer,) = response["toolResponse"]["functionResponses"]
    assert answer["id"] == second_conn.sent("toolCall")[0]["toolCall"]["functionCalls"][0]["id"]
    assert answer["response"]["data"] == {"text": "second", "count": 1}
    assert model_results(second[-1]["text"])[0][1]["data"]["text"] == "second"


def first_done(events: list[dict[str, Any]]) -> dict[str, Any]:
    return first(events, "tool.finished")


async def test_a_question_whose_calls_ran_is_not_asked_again_after_a_resumed_drop(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    """Found by the soak (one request run as two calls): the connection dropped while a batch
    ran; the gateway resumed the session with its last handle (from before the question) and
    asked the question again, telling the model not to call its tools again; the model called
    them again under new ids, and they ran twice. The question is given back as context, and
    the model answers it from the results."""
    async with gateway.session("text") as client:
        await client.say("hello")  # a turn completed: the session has a handle
        await client.send("text.send", text='/tools echo {"text": "a"} ;; sleepy {"ms": 600}')
        started = await client.last("tool.started", name="sleepy")
        await fake.connections[0].drop(1011)
        await client.last("tool.finished", call_id=started["call_id"])
        reply = await client.last("response.done")
        while not reply["text"]:  # the tool call's own response ends first
            reply = await client.last("response.done")
        second = await fake.wait_connections(2)
    assert second.resumed_from is not None  # the handle of the turn before the question
    assert gateway.decisions("echo") == [("echo", "executed")]
    assert gateway.decisions("sleepy") == [("sleepy", "executed")]
    assert not second.sent("toolCall")
    assert started["call_id"] in reply["text"]  # answered from the results


async def test_two_sessions_get_two_upstream_sessions(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    async with gateway.session("text") as a, gateway.session("text", sub="bob") as b:
        replies = await asyncio.gather(a.say("from a"), b.say("from b"))
    assert [r[-1]["text"] for r in replies] == ["You said: from a", "You said: from b"]
    assert len(fake.connections) == 2


async def test_a_call_running_during_a_drop_finishes_once_and_the_model_learns_its_result(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    async with gateway.session("text") as client:
        await client.send("text.send", text='/tool sleepy {"ms": 600}')
        started = await client.last("tool.started")
        await fake.connections[0].drop(1011)
        second = await fake.wait_connections(2)
        finished = await client.last("tool.finished", call_id=started["call_id"])
        reply = await client.last("response.done")
        while not reply["text"]:  # the tool call's own response ends first
            reply = await client.last("response.done")
    assert finished["ok"] is True
    assert [e["name"] for e in client.events if e["type"] == "tool.started"] == ["sleepy"]
    assert gateway.decisions("sleepy") == [("sleepy", "executed")]
    assert not second.received("toolResponse")
    turns = [
        m["clientContent"]["turns"][0]["parts"][0]["text"] for m in second.received("clientContent")
    ]
    assert any(started["call_id"] in text for text in turns)
    assert started["call_id"] in reply["text"]


# -- races found in review ------------------------------------------------------------------


async def test_a_go_away_during_a_reply_resumes_after_that_reply(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    # The fake (like the service) issues a fresh handle right after each turnComplete; handles
    # are snapshots, so resuming an older one forgets the turns after it.
    paced = await fake_factory(pace=1.0)
    gateway = await gemini_gateway(gateway_factory, paced)
    async with gateway.session("text") as client:
        await client.say("remember the word pineapple")
        await client.send("text.send", text="/say one two three four five six seven eight")
        await client.last("text.delta")
        first = paced.connections[0]
        await first.go_away(20.0)  # plenty of time: the gateway waits for the reply to end
        await client.until_reply()
        second = await paced.wait_connections(2)
        await second.wait_for("setup", direction="in")  # accepted first, then set up
        issued = [
            m["sessionResumptionUpdate"]["newHandle"]
            for m in first.sent("sessionResumptionUpdate")
            if m["sessionResumptionUpdate"]["resumable"]
        ]
    assert second.setup["sessionResumption"] == {"handle": issued[-1]}
    assert "one two three" in str(second.history)


async def test_typing_while_the_model_answers_is_not_reported_as_user_speech(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    paced = await fake_factory(pace=1.0)
    gateway = await gemini_gateway(gateway_factory, paced)
    async with gateway.session("text") as client:
        await client.send("text.send", text=f"/say {LONG_REPLY}")
        started = await client.last("response.started")
        await client.last("text.delta")
        await client.send("text.send", text="never mind, what time is it?")
        events = await client.until("response.done", status="completed")
    cut = next(e for e in events if e["type"] == "response.done")
    assert cut["response_id"] == started["response_id"]
    assert cut["status"] == "cancelled"
    assert "speech.started" not in types(client.events)


async def orphan_then_reply(client: Client, fake: FakeGeminiServer) -> tuple[str, str]:
    """A call (sleepy, 1.2 s) runs; the connection drops; on the new connection the user asks
    for a long spoken reply; the call finishes while that reply plays. The ids of the tool
    response and of the reply."""
    await client.send("text.send", text='/tool sleepy {"ms": 1200}')
    tool_started = await client.last("tool.started")
    tool_response = [e for e in client.events if e["type"] == "response.started"][-1]
    await fake.connections[0].drop(1011)
    await fake.wait_connections(2)
    await client.send("text.send", text=f"/say {LONG_REPLY}")
    reply = await client.last("response.started")
    await client.last("tool.finished", call_id=tool_started["call_id"], within=10)
    return tool_response["response_id"], reply["response_id"]


async def test_a_tool_response_that_ends_during_the_next_reply_has_no_text(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    # Gemini ends the tool-call response at once; the session holds that response.done until
    # the batch finishes. A call orphaned by a drop keeps running while the new connection
    # answers; when it finishes, the held response.done takes the text of the response in
    # progress (session.py uses self._response without checking its id) and adds it to history.
    paced = await fake_factory(pace=1.0)
    gateway = await gemini_gateway(gateway_factory, paced)
    async with gateway.session("voice") as client:
        tool_response, _ = await orphan_then_reply(client, paced)
        done = await client.last("response.done", response_id=tool_response)
    assert done["text"] == ""  # protocol 9: empty for a response that only called tools


async def test_an_orphaned_result_does_not_cut_the_reply_being_spoken(
    fake_factory: FakeFactory, gateway_factory: GatewayFactory
) -> None:
    paced = await fake_factory(pace=1.0)
    gateway = await gemini_gateway(gateway_factory, paced)
    async with gateway.session("voice") as client:
        _, reply = await orphan_then_reply(client, paced)
        done = await client.last("response.done", response_id=reply, within=10)
    assert done["status"] == "completed"
    assert "speech.started" not in types(client.events)  # nobody spoke


async def test_an_utterance_cut_by_a_go_away_reaches_the_model_whole(
    gateway: Gateway, fake: FakeGeminiServer
) -> None:
    """The service keeps nothing sent after its last handle: the half of the utterance said on
    the old connection is given to the new one before the rest."""
    audio = {"input_rate": 16000, "output_rate": 16000}
    async with gateway.session("voice", audio=audio) as client:
        step = 16000 * 20 // 1000 * 2
        first_half = pcm_tone(300)
        for start in range(0, len(first_half), step):
            await client.send_raw(first_half[start : start + step])
        conn = await fake.wait_connections(1)
        await conn.wait_for("realtimeInput", direction="in")
        await conn.go_away(0.2)
        rest = pcm_tone(300) + pcm_silence(800)
        for start in range(0, len(rest), step):
            await client.send_raw(rest[start : start + step])
        events = await client.until_reply(within=10)
    heard = first(events, "transcript.done", role="user")["text"]
    assert heard == "audio:600ms"
    assert len(fake.connections) == 2  # a new connection, given both halves
