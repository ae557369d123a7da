"""Usage summed per session against what the fakes reported, on every upstream, across upstream
reconnects and client resumes: ``session.ended.usage``, the ``session_usage`` audit record and
the Prometheus counters. The fakes report usage as the real services document it (OpenAI's
``response.done.response.usage``, Gemini's ``usageMetadata``, chat completions' last chunk).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from harness import Fakes, Gateway, GatewayFactory, speak, types
from test_gateway_gemini import gemini_gateway
from test_gateway_openai import openai_gateway
from test_gateway_resume import Store, drop, eventually, resume

from fakes.chat.server import FakeChatServer
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeRealtimeServer
from gateway.usage import PRICED_FIELDS

# Every kind of token the summary counts (the price table prices the same ones).
TOKEN_KINDS = PRICED_FIELDS


def tokens(**counts: int) -> dict[str, int]:
    return {kind: counts.get(kind, 0) for kind in TOKEN_KINDS}


def openai_reported(fake: FakeRealtimeServer) -> dict[str, int]:
    """The sum of every ``response.done`` usage the fake sent, on every connection."""
    total = tokens()
    for conn in fake.connections:
        for done in conn.sent("response.done"):
            usage = done["response"]["usage"]
            given_in, given_out = usage["input_token_details"], usage["output_token_details"]
            total["input_text"] += given_in["text_tokens"]
            total["input_audio"] += given_in["audio_tokens"]
            total["input_cached"] += given_in["cached_tokens"]
            total["output_text"] += given_out["text_tokens"]
            total["output_audio"] += given_out["audio_tokens"]
    return total


def gemini_reported(fake: FakeGeminiServer) -> dict[str, int]:
    total = tokens()
    for conn in fake.connections:
        for message in conn.sent("usageMetadata"):
            usage = message["usageMetadata"]
            for side, details in (
                ("input", "promptTokensDetails"),
                ("output", "responseTokensDetails"),
            ):
                for entry in usage.get(details, ()):
                    modality = "audio" if entry["modality"] == "AUDIO" else "text"
                    total[f"{side}_{modality}"] += entry["tokenCount"]
            total["input_cached"] += usage.get("cachedContentTokenCount", 0)
            total["output_reasoning"] += usage.get("thoughtsTokenCount", 0)
    return total


def ended(client_events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    (event,) = [e for e in client_events if e["type"] == "session.ended"]
    usage: dict[str, Any] = event["usage"]
    return usage


def audited(gateway: Gateway) -> list[dict[str, Any]]:
    return [dict(record.usage) for record in gateway.audit.usage_records]


# -- OpenAI Realtime ------------------------------------------------------------------------------


@pytest.fixture
async def openai_fake() -> AsyncIterator[FakeRealtimeServer]:
    fakes = Fakes(lambda **o: FakeRealtimeServer())
    yield await fakes()
    await fakes.stop_all()


async def test_openai_text_turns_across_an_upstream_reconnect(
    openai_fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await openai_gateway(gateway_factory, openai_fake)
    async with gateway.session("text") as client:
        await client.say("remember the word pineapple")
        await openai_fake.connections[0].expire()
        await openai_fake.wait_connections(2)
        await client.say("what was the word")
        await client.say('/tool get_current_time {"timezone":"UTC"}')
        await client.send("session.end")
        await client.wait_closed()
    assert len(openai_fake.connections) == 2
    reported = openai_reported(openai_fake)
    assert reported["output_text"] > 0
    assert reported["input_text"] > 0
    usage = ended(client.events)
    assert usage["tokens"] == reported
    responses = sum(len(c.sent("response.done")) for c in openai_fake.connections)
    assert usage["responses"] == responses
    assert usage["tool_calls"] == {"ok": 1}
    assert usage["model"] == "gpt-realtime"
    assert audited(gateway) == [usage]
    record = gateway.audit.usage_records[0]
    assert (record.user_id, record.provider, record.reason) == ("alice", "openai", "client")
    labels = {"provider": "openai", "model": "gpt-realtime"}
    for kind, count in reported.items():
        metric = gateway.metric("gateway_usage_tokens_total", **labels, kind=kind)
        assert metric == count, kind
    assert gateway.metric("gateway_usage_responses_total", **labels) == responses


async def test_openai_voice_counts_audio_both_ways(
    openai_fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await openai_gateway(gateway_factory, openai_fake)
    async with gateway.session("voice", audio={"input_rate": 16000, "output_rate": 16000}) as c:
        await speak(c, 400)  # 400 ms of tone and 600 ms of silence: 1 s sent
        await c.until_reply()
        await c.send("session.end")
        await c.wait_closed()
    usage = ended(c.events)
    assert usage["audio_in_s"] == pytest.approx(1.0, abs=0.001)
    received_s = sum(len(frame) for frame in c.audio) / (16000 * 2)
    assert usage["audio_out_s"] == pytest.approx(received_s, abs=0.002)
    assert usage["tokens"] == openai_reported(openai_fake)
    assert usage["tokens"]["input_audio"] > 0
    assert usage["tokens"]["output_audio"] > 0
    assert gateway.metric(
        "gateway_usage_audio_seconds_total", provider="openai", direction="in"
    ) == pytest.approx(1.0, abs=0.001)
    assert gateway.metric(
        "gateway_usage_audio_seconds_total", provider="openai", direction="out"
    ) == pytest.approx(received_s, abs=0.002)


async def test_a_resumed_session_goes_on_from_its_sums_and_is_priced(
    openai_fake: FakeRealtimeServer, gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"currency": "EUR", "models": {"openai/*": {"output_text": 100.0}}})
    )
    store = Store()
    gateway = await openai_gateway(
        gateway_factory, openai_fake, resume_window_s=5, store=store, price_table=str(prices)
    )
    async with gateway.session("text") as first_client:
        await first_client.say("before the drop")
        session_id = first_client.started["session_id"]
        token = first_client.started["resume_token"]
        await drop(first_client)
    await eventually(lambda: gateway.manager.sessions[session_id].outbound is None)
    async with gateway.connect() as client:
        started = await resume(client, session_id, token)
        assert started["resumed"] is True
        await client.say("after the resume")
        await client.send("session.end")
        await client.wait_closed()
    assert "session.ended" not in types(first_client.events)
    usage = ended(client.events)
    reported = openai_reported(openai_fake)
    assert usage["tokens"] == reported
    assert usage["responses"] == 2
    assert usage["estimated_cost"] == pytest.approx(reported["output_text"] * 100.0 / 1e6)
    assert usage["currency"] == "EUR"
    assert audited(gateway) == [usage]


# -- Gemini Live ----------------------------------------------------------------------------------


@pytest.fixture
async def gemini_fake(tmp_path: Path) -> AsyncIterator[FakeGeminiServer]:
    fakes = Fakes(lambda **o: FakeGeminiServer(FakeGeminiOptions(**o), cert_dir=tmp_path))
    yield await fakes()
    await fakes.stop_all()


async def test_gemini_turns_across_a_go_away(
    gemini_fake: FakeGeminiServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gemini_gateway(gateway_factory, gemini_fake)
    async with gateway.session("text") as client:
        await client.say("remember the word pineapple")
        await gemini_fake.connections[0].go_away(1.0)
        await gemini_fake.wait_connections(2)
        await client.say("what was the word")
        await client.send("session.end")
        await client.wait_closed()
    reported = gemini_reported(gemini_fake)
    assert reported["input_text"] > 0
    usage = ended(client.events)
    assert usage["tokens"] == reported
    assert usage["model"] == "gemini-live-2.5-flash-preview"  # the text model
    assert audited(gateway) == [usage]


async def test_gemini_voice_reports_audio_tokens(
    gemini_fake: FakeGeminiServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gemini_gateway(gateway_factory, gemini_fake)
    async with gateway.session("voice") as client:
        await speak(client, 400)
        await client.until_reply()
        await client.send("session.end")
        await client.wait_closed()
    usage = ended(client.events)
    assert usage["tokens"] == gemini_reported(gemini_fake)
    assert usage["tokens"]["input_audio"] > 0
    assert usage["tokens"]["output_audio"] > 0
    assert usage["audio_in_s"] == pytest.approx(1.0, abs=0.001)


# -- chat completions -----------------------------------------------------------------------------


async def test_chat_rounds_of_a_reply_are_summed(gateway_factory: GatewayFactory) -> None:
    fake = FakeChatServer()
    await fake.start()
    try:
        gateway = await gateway_factory(
            provider="chat", chat_base_url=fake.base_url, chat_api_key="sk-test"
        )
        async with gateway.session("text") as client:
            # One response per message: the agent loop runs the call's rounds inside it.
            await client.send("text.send", text='/tool get_current_time {"timezone":"UTC"}')
            await client.until("response.done")
            await client.send("text.send", text="thanks")
            await client.until("response.done")
            await client.send("session.end")
            await client.wait_closed()
    finally:
        await fake.stop()
    assert len(fake.usages) >= 3  # the call's round, its answer's round, the second reply
    usage = ended(client.events)
    assert usage["tokens"] == tokens(
        input_text=sum(u["prompt_tokens"] for u in fake.usages),
        output_text=sum(u["completion_tokens"] for u in fake.usages),
    )
    assert usage["tool_calls"] == {"ok": 1}


async def _resumed_twice_said(gateway: Gateway) -> list[dict[str, Any]]:
    """A turn, a dropped socket, a resume, a turn, the end: the resumed client's events."""
    async with gateway.session("text") as first_client:
        await first_client.send("text.send", text="before the drop")
        await first_client.until("response.done")
        session_id = first_client.started["session_id"]
        token = first_client.started["resume_token"]
        await drop(first_client)
    await eventually(lambda: gateway.manager.sessions[session_id].outbound is None)
    async with gateway.connect() as client:
        assert (await resume(client, session_id, token))["resumed"] is True
        await client.send("text.send", text="after the resume")
        await client.until("response.done")
        await client.send("session.end")
        await client.wait_closed()
    return client.events


async def test_gemini_sums_go_on_across_a_resume(
    gemini_fake: FakeGeminiServer, gateway_factory: GatewayFactory
) -> None:
    gateway = await gemini_gateway(gateway_factory, gemini_fake, resume_window_s=5, store=Store())
    usage = ended(await _resumed_twice_said(gateway))
    assert usage["responses"] == 2
    assert usage["tokens"] == gemini_reported(gemini_fake)
    assert usage["tokens"]["output_text"] > 0


async def test_chat_sums_go_on_across_a_resume(gateway_factory: GatewayFactory) -> None:
    fake = FakeChatServer()
    await fake.start()
    try:
        gateway = await gateway_factory(
            provider="chat",
            chat_base_url=fake.base_url,
            chat_api_key="sk-test",
            resume_window_s=5,
            store=Store(),
        )
        usage = ended(await _resumed_twice_said(gateway))
    finally:
        await fake.stop()
    assert usage["responses"] == 2 == len(fake.usages)
    assert usage["tokens"] == tokens(
        input_text=sum(u["prompt_tokens"] for u in fake.usages),
        output_text=sum(u["completion_tokens"] for u in fake.usages),
    )


async def test_a_response_held_for_its_calls_counts_when_the_session_ends_first(
    openai_fake: FakeRealtimeServer, gateway_factory: GatewayFactory
) -> None:
    """Found in review: the tokens of the response that called a tool were counted only when
    its end was released to the client, after the call; a session ended meanwhile lost them."""
    gateway = await openai_gateway(gateway_factory, openai_fake)
    async with gateway.session("text") as client:
        await client.send("text.send", text='/tool sleepy {"ms": 2000}')
        await client.last("tool.started")
        conn = openai_fake.connections[0]
        await conn.wait_for("response.done")
        await client.send("session.end")
        events = await client.until("session.ended")
    usage = ended(events)
    assert usage["responses"] == 1
    assert usage["tokens"] == openai_reported(openai_fake)
    assert usage["tokens"]["output_text"] > 0  # the call's arguments, counted as the fake does
