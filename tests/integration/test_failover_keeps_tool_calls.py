"""A failover in the middle of tool work: a call running when the provider is lost runs once and
its result reaches the new model once; a confirmation pending when the provider is lost stays
pending, and approved after the failover runs once. Text sessions on an alias of OpenAI Realtime
then chat; executions are counted in the journal file the tools append to."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, types

from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.registry import Registry


def executions(journal: Path) -> list[dict[str, Any]]:
    if not journal.exists():
        return []
    return [json.loads(line) for line in journal.read_text().splitlines()]


@pytest.fixture
async def upstreams() -> AsyncIterator[tuple[FakeRealtimeServer, FakeChatServer]]:
    async with (
        FakeRealtimeServer(FakeOptions()) as openai,
        FakeChatServer(FakeChatOptions()) as chat,
    ):
        yield openai, chat


async def _gateway(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    registry: Registry,
    openai: FakeRealtimeServer,
    chat: FakeChatServer,
) -> Gateway:
    models = tmp_path / "models.json"
    targets = [{"provider": "openai", "model": "gpt-realtime"}, {"provider": "chat"}]
    models.write_text(json.dumps({"models": {"assistant": {"targets": targets}}}))
    return await gateway_factory(
        registry=registry,
        models=models,
        openai_ws_url=openai.ws_url,
        openai_api_key="sk-test",
        chat_base_url=chat.base_url,
        chat_api_key="sk-chat",
        chat_model="fake-chat-1",
        upstream_reconnect_backoff_s=0.01,
    )


def _chat_saw(chat: FakeChatServer, needle: str) -> int:
    """How many requests' last message carries ``needle`` (each result is given once)."""
    return sum(1 for request in chat.requests if needle in str(request["messages"][-1]))


async def test_a_call_running_when_the_provider_is_lost_runs_once_and_reaches_the_next_model(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    journal_registry: Registry,
    journal: Path,
    upstreams: tuple[FakeRealtimeServer, FakeChatServer],
) -> None:
    openai, chat = upstreams
    gateway = await _gateway(gateway_factory, tmp_path, journal_registry, openai, chat)
    async with gateway.session("text", model="assistant") as client:
        args = {"label": "running", "sleep_ms": 600}
        await client.send("text.send", text=f"/tool journal {json.dumps(args)}")
        started = await client.last("tool.started")
        await openai.stop()  # lost while the call runs
        changed = await client.last("session.provider_changed", within=10)
        assert changed["provider"] == "chat"
        finished = await client.last("tool.finished", within=10)
        assert finished["call_id"] == started["call_id"]
        assert "running" in (await client.next_spoken())["text"]
        assert "session.ended" not in types(client.events)
    assert [e["label"] for e in executions(journal)] == ["running"]
    assert _chat_saw(chat, started["call_id"]) == 1
    assert [e["type"] for e in client.events].count("tool.finished") == 1


async def test_a_confirmation_pending_when_the_provider_is_lost_is_approved_after_and_runs_once(
    gateway_factory: GatewayFactory,
    tmp_path: Path,
    journal_registry: Registry,
    journal: Path,
    upstreams: tuple[FakeRealtimeServer, FakeChatServer],
) -> None:
    openai, chat = upstreams
    gateway = await _gateway(gateway_factory, tmp_path, journal_registry, openai, chat)
    async with gateway.session("text", model="assistant") as client:
        args = {"label": "confirmed"}
        await client.send("text.send", text=f"/tool journal_confirm {json.dumps(args)}")
        requested = await client.last("confirmation.requested")
        assert "CONFIRMATION_REQUIRED" in (await client.next_spoken())["text"]  # the model's
        await openai.stop()
        changed = await client.last("session.provider_changed", within=10)
        assert changed["provider"] == "chat"
        assert executions(journal) == []
        await client.send(
            "confirmation.respond",
            confirmation_id=requested["confirmation_id"],
            decision="approve",
        )
        resolved = await client.last("confirmation.resolved", within=10)
        assert resolved["decision"] == "approved"
        assert "confirmed" in (await client.next_spoken())["text"]
    assert [e["label"] for e in executions(journal)] == ["confirmed"]
    assert _chat_saw(chat, '"label":"confirmed"') == 1
