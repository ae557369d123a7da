"""The OpenAI-compatible endpoint under the OpenAI Agents SDK's realtime runner (``openai-agents``),
unmodified: a ``RealtimeAgent`` run by ``RealtimeRunner`` with its model pointed at the gateway.
The agent declares no tools of its own: the gateway's tools serve it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, token

agents_realtime = pytest.importorskip(
    "agents.realtime", reason="Agents SDK test skipped: openai-agents is not installed (dev extra)"
)

WITHIN_S = 15.0


async def _history_until(session: Any, done: Any) -> list[Any]:
    events: list[Any] = []
    async with asyncio.timeout(WITHIN_S):
        async for event in session:
            events.append(event)
            if done(event):
                return events
    raise AssertionError(f"the session ended first: {[e.type for e in events]}")


async def agent_session(gateway: Gateway) -> Any:
    """A text-mode ``RealtimeAgent`` with no tools of its own, its model at the gateway."""
    agent = agents_realtime.RealtimeAgent(name="Assistant", instructions="Be brief.")
    runner = agents_realtime.RealtimeRunner(
        starting_agent=agent,
        config={"model_settings": {"model_name": "local", "output_modalities": ["text"]}},
    )
    url = gateway.url.replace("http://", "ws://") + "/v1/realtime?model=local"
    return await runner.run(model_config={"url": url, "api_key": token("agent-user")})


def _assistant_texts(event: Any) -> list[str]:
    texts: list[str] = []
    for item in getattr(event, "history", []):
        if getattr(item, "role", None) != "assistant":
            continue
        for part in getattr(item, "content", []) or []:
            text = getattr(part, "text", None) or getattr(part, "transcript", None)
            if text:
                texts.append(text)
    return texts


async def test_a_realtime_agent_talks_through_the_gateway(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    async with await agent_session(gateway) as session:
        await session.send_message("hello agent")
        events = await _history_until(
            session,
            lambda e: (
                e.type == "history_updated"
                and any("You said: hello agent" in t for t in _assistant_texts(e))
            ),
        )
    assert not [e for e in events if e.type == "error"], [e for e in events if e.type == "error"]
    assert any(e.type == "agent_start" for e in events)


async def test_the_gateways_tools_answer_the_agent(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    async with await agent_session(gateway) as session:
        await session.send_message("/tool get_current_time {}")
        events = await _history_until(
            session,
            lambda e: (
                e.type == "history_updated"
                and any("Tool results: get_current_time=" in t for t in _assistant_texts(e))
            ),
        )
    # The SDK never ran a tool: the gateway did, under its policy.
    assert not [e for e in events if e.type in ("tool_start", "tool_end", "error")]
    assert ("get_current_time", "executed") in gateway.decisions("get_current_time")
