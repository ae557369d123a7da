"""The OpenAI-compatible endpoint under the OpenAI Agents SDK's realtime runner (``openai-agents``),
unmodified: a ``RealtimeAgent`` run by ``RealtimeRunner`` with its model pointed at the gateway.
The gateway's tools serve it, and a ``function_tool`` of its own is run by the SDK: the gateway
hands the call over and takes the SDK's output back to the model."""

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


async def agent_session(gateway: Gateway, *tools: Any) -> Any:
    """A text-mode ``RealtimeAgent`` with ``tools`` of its own, its model at the gateway."""
    agent = agents_realtime.RealtimeAgent(
        name="Assistant", instructions="Be brief.", tools=list(tools)
    )
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


async def test_a_function_tool_of_the_agent_is_run_by_the_sdk(
    gateway_factory: GatewayFactory,
) -> None:
    from agents import function_tool

    ran: list[str] = []

    @function_tool
    def lookup_order(order: str) -> str:
        """Look an order up by its number."""
        ran.append(order)
        return f"order {order}: shipped"

    gateway = await gateway_factory()
    async with await agent_session(gateway, lookup_order) as session:
        await session.send_message('/tool lookup_order {"order": "A1"}')
        events = await _history_until(
            session,
            lambda e: (
                e.type == "history_updated"
                and any("Tool results: lookup_order=" in t for t in _assistant_texts(e))
            ),
        )
    assert ran == ["A1"]  # the SDK ran its own tool, once
    kinds = [e.type for e in events]
    assert kinds.index("tool_start") < kinds.index("tool_end")
    assert "error" not in kinds, [e for e in events if e.type == "error"]
    reply = next(t for t in _assistant_texts(events[-1]) if "Tool results: lookup_order=" in t)
    assert "order A1: shipped" in reply  # the model got the SDK's output
    assert gateway.decisions("lookup_order") == [("lookup_order", "client")]
