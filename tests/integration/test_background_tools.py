"""Background tools (``"execution": "background"``) end to end: client ↔ gateway ↔ the OpenAI
Realtime fake and the chat-completions fake, over real sockets. The call is acknowledged at once
and the conversation goes on; the result enters it once, at the moment the tool's ``delivery``
says; the session ending first cancels the work; a resume in between loses nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from harness import Client, Gateway, GatewayFactory, registry_with_variant, token

from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.registry import Registry

LONG = " ".join(f"word{n}" for n in range(40))  # 4 s of speech from the fake


@pytest.fixture(scope="module")
def background_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """The runner fixtures plus ``slow_job``: ``sleepy`` run in the background (when_idle),
    and its ``interrupt`` and ``silent`` twins."""
    root = tmp_path_factory.mktemp("background")
    registry = registry_with_variant(
        root / "when_idle", "sleepy", "slow_job", execution="background", timeoutMs=20000
    )
    assert registry.get("slow_job") is not None
    return registry


async def registry_for(tmp: Path, delivery: str) -> Registry:
    return await asyncio.to_thread(
        registry_with_variant,
        tmp,
        "sleepy",
        "slow_job",
        execution="background",
        delivery=delivery,
        timeoutMs=20000,
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeRealtimeServer]:
    server = FakeRealtimeServer(FakeOptions())
    await server.start()
    yield server
    await server.stop()


async def on_openai(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, registry: Registry, **settings: Any
) -> Gateway:
    return await gateway_factory(
        registry=registry,
        provider="openai",
        openai_ws_url=fake.ws_url,
        openai_api_key="sk-test",
        **settings,
    )


def results_for(fake: FakeRealtimeServer, call_id: str) -> list[str]:
    """Every item given to the model that carries ``call_id``'s result: its function output
    (the acknowledgement) and messages with the result."""
    found = []
    for conn in fake.connections:
        for event in conn.received("conversation.item.create"):
            item = event["item"]
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
                found.append("output:" + json.loads(item["output"])["data"].get("status", "done"))
            text = " ".join(str(part.get("text", "")) for part in item.get("content", []))
            if item.get("type") == "message" and call_id in text:
                found.append("message")
    return found


async def answer(client: Client) -> dict[str, Any]:
    """The next response that said something (the one that called the tool ends empty)."""
    while not (done := await client.last("response.done"))["text"]:
        pass
    return done


def job(ms: int) -> str:
    return f'/tool slow_job {{"ms": {ms}}}'


async def test_the_conversation_goes_on_while_the_job_runs_and_its_result_comes_once(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, background_registry: Registry
) -> None:
    gateway = await on_openai(gateway_factory, fake, background_registry)
    async with gateway.session("text") as client:
        offered = {t["name"]: t for t in client.started["tools"]}
        assert offered["slow_job"]["background"] is True
        assert "background" not in offered["sleepy"]
        await client.send("text.send", text=job(1200))
        started = await client.last("tool.started")
        assert (started["name"], started["background"]) == ("slow_job", True)
        acknowledged = (await answer(client))["text"]
        assert "running" in acknowledged  # the model spoke from the acknowledgement
        assert (await client.say("and meanwhile?"))[-1]["text"] == "You said: and meanwhile?"
        assert not [e for e in client.events if e["type"] == "tool.finished"]  # still running
        finished = await client.last("tool.finished", call_id=started["call_id"])
        assert finished["ok"] is True
        assert started["call_id"] in (await answer(client))["text"]  # the result, taken up
        assert results_for(fake, started["call_id"]) == ["output:running", "message"]
    decisions = gateway.decisions("slow_job")
    assert decisions == [("slow_job", "executed")]  # one audit line, when the work ended


async def test_an_interrupting_result_cuts_the_reply_in_progress(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    registry = await registry_for(tmp_path, "interrupt")
    fake = FakeRealtimeServer(FakeOptions(pace=1.0))  # speech as fast as it is spoken
    await fake.start()
    try:
        gateway = await on_openai(gateway_factory, fake, registry)
        async with gateway.session("voice", audio={"output_rate": 24000}) as client:
            # The acknowledgement is spoken (~2 s), then the long reply; the job ends during it.
            await client.send("text.send", text=job(3500))
            call_id = (await client.last("tool.started"))["call_id"]
            await answer(client)
            await client.send("text.send", text=f"/say {LONG}")
            long_reply = (await client.last("response.started"))["response_id"]
            cut = await client.last("response.done", response_id=long_reply)
            assert cut["status"] == "cancelled"  # 4 s of speech, cut when the result came
            kinds = [(e["type"], e.get("call_id")) for e in client.events]
            assert ("tool.finished", call_id) in kinds
            assert call_id in (await answer(client))["text"]
            assert results_for(fake, call_id) == ["output:running", "message"]
    finally:
        await fake.stop()


async def test_a_silent_result_is_context_the_model_does_not_answer(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, tmp_path: Path
) -> None:
    registry = await registry_for(tmp_path, "silent")
    gateway = await on_openai(gateway_factory, fake, registry)
    async with gateway.session("text") as client:
        await client.send("text.send", text=job(300))
        call_id = (await client.last("tool.started"))["call_id"]
        await answer(client)
        await client.last("tool.finished", call_id=call_id)
        conn = fake.connections[0]
        await conn.wait_for("conversation.item.create", count=3, direction="in")
        creates_before = len(conn.received("response.create"))
        with pytest.raises(TimeoutError):  # no reply follows a silent result
            await client.next(within=0.5)
        assert len(conn.received("response.create")) == creates_before
        assert results_for(fake, call_id) == ["output:running", "message"]
        assert (await client.say("next"))[-1]["text"] == "You said: next"


async def test_ending_the_session_cancels_the_job(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, background_registry: Registry
) -> None:
    gateway = await on_openai(gateway_factory, fake, background_registry)
    async with gateway.session("text") as client:
        await client.send("text.send", text=job(5000))
        call_id = (await client.last("tool.started"))["call_id"]
        await answer(client)
        marker = gateway.settings.data_dir / f"sleepy_{call_id}.state"
        assert marker.read_text() == "started"
        await client.send("session.end")
        await client.last("session.ended")
    assert marker.read_text() == "cancelled"
    assert results_for(fake, call_id) == ["output:running"]  # no result ever reached it


async def resumed(gateway: Gateway, client: Client) -> Client:
    await client.ws.close()
    ws = await gateway.http.ws_connect(
        f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {token('alice')}"}
    )
    again = Client(ws)
    started = client.started
    await again.send(
        "session.start",
        mode="text",
        resume={"session_id": started["session_id"], "resume_token": started["resume_token"]},
    )
    again.started = await again.last("session.started")
    return again


async def test_a_resume_while_the_job_runs_loses_nothing(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, background_registry: Registry
) -> None:
    gateway = await on_openai(gateway_factory, fake, background_registry, resume_window_s=30)
    async with gateway.session("text") as client:
        await client.send("text.send", text=job(800))
        call_id = (await client.last("tool.started"))["call_id"]
        await answer(client)
        again = await resumed(gateway, client)
        finished = await again.last("tool.finished", call_id=call_id)
        assert finished["ok"] is True
        assert call_id in (await answer(again))["text"]
        await again.ws.close()
    assert results_for(fake, call_id) == ["output:running", "message"]


async def test_a_job_that_finished_while_nobody_was_attached_is_reported_after_the_resume(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer, background_registry: Registry
) -> None:
    gateway = await on_openai(gateway_factory, fake, background_registry, resume_window_s=30)
    async with gateway.session("text") as client:
        await client.send("text.send", text=job(1500))
        call_id = (await client.last("tool.started"))["call_id"]
        # Detached at once: waiting for the model's answer first let a loaded machine finish
        # the job while the client was still there (it then got tool.finished, not the resume).
        await client.ws.close()
        assert "tool.finished" not in [e["type"] for e in client.events]
        # Its result reaches the model while nobody is attached (the third item it gets).
        await fake.connections[0].wait_for("conversation.item.create", count=3, direction="in")
        again = await resumed(gateway, client)
        await again.last("tool.finished", call_id=call_id)
        kinds = [e["type"] for e in again.events]
        assert kinds.index("session.started") < kinds.index("tool.finished")
        await again.ws.close()
    assert results_for(fake, call_id) == ["output:running", "message"]


# -- chat completions --------------------------------------------------------------------------


async def test_on_chat_completions_the_result_starts_a_round_of_its_own(
    gateway_factory: GatewayFactory, background_registry: Registry
) -> None:
    async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as fake_chat:
        gateway = await gateway_factory(
            registry=background_registry,
            provider="chat",
            chat_base_url=fake_chat.base_url,
            chat_api_key="sk-chat",
            chat_model="fake-chat-1",
        )
        async with gateway.session("text") as client:
            await client.send("text.send", text=job(800))
            call_id = (await client.last("tool.started"))["call_id"]
            assert "running" in (await answer(client))["text"]  # the round after the ack
            assert (await client.say("meanwhile"))[-1]["text"] == "You said: meanwhile"
            await client.last("tool.finished", call_id=call_id)
            assert call_id in (await answer(client))["text"]
        tool_outputs = [
            message
            for body in fake_chat.requests
            for message in body["messages"]
            if message["role"] == "tool" and message.get("tool_call_id") == call_id
        ]
        assert {json.loads(m["content"])["data"]["status"] for m in tool_outputs} == {"running"}
        late = [
            body
            for body in fake_chat.requests
            if call_id in str(body["messages"][-1].get("content", ""))
            and body["messages"][-1]["role"] == "system"
        ]
        assert len(late) == 1  # the result went upstream once, in a round of its own


# -- Gemini Live: the protocol's own NON_BLOCKING calls and scheduling -----------------------------


async def test_on_gemini_the_call_is_non_blocking_and_its_result_scheduled(
    gateway_factory: GatewayFactory, background_registry: Registry, tmp_path: Path
) -> None:
    async with FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs") as gemini:
        gateway = await gateway_factory(
            registry=background_registry,
            provider="gemini",
            gemini_base_url=gemini.base_url,
            gemini_ca_file=gemini.ca_file,
            gemini_api_key="test-key",
            gemini_model="gemini-2.5-flash-native-audio-preview-09-2025",
            gemini_text_model="gemini-live-2.5-flash-preview",
        )
        async with gateway.session("text") as client:
            await client.send("text.send", text=job(800))
            call_id = (await client.last("tool.started"))["call_id"]
            assert "I've started slow_job" in (await answer(client))["text"]  # the model's own
            assert (await client.say("meanwhile"))[-1]["text"] == "You said: meanwhile"
            await client.last("tool.finished", call_id=call_id)
            assert call_id in (await answer(client))["text"]  # taken up when the model was idle
        conn = gemini.connections[0]
        declared = conn.received("setup")[0]["setup"]["tools"][0]["functionDeclarations"]
        behaviors = {d["name"]: d.get("behavior") for d in declared}
        assert behaviors["slow_job"] == "NON_BLOCKING"
        assert behaviors["sleepy"] is None  # blocking tools are declared as before
        responses = [
            r
            for message in conn.received("toolResponse")
            for r in message["toolResponse"]["functionResponses"]
        ]
        assert [(r["id"], r.get("scheduling")) for r in responses] == [(call_id, "WHEN_IDLE")]
        assert responses[0]["response"]["ok"] is True  # the result itself, no acknowledgement
