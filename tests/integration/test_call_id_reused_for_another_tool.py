"""An upstream that gives a new call the id of an earlier call of another tool: the new call
is refused (nothing runs) rather than answered with the other tool's result, and the model is
told; a background tool's call too, at once, never acknowledged as running. A true duplicate
delivery (same id, same tool) still runs once (test_tool_runner)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from harness import GatewayFactory, registry_with_variant


def scenario(tmp_path: Path, steps: list[dict[str, Any]]) -> Path:
    path = tmp_path / "reused.json"
    path.write_text(json.dumps({"name": "reused", "steps": steps}))
    return path


SAME_ID = "call_same"
STEPS = [
    {
        "expect": {"text": "first"},
        "reply": {
            "tools": [{"name": "kb_search", "arguments": {"query": "fees"}, "call_id": SAME_ID}]
        },
    },
    {"expect": {"tool_results": ["kb_search"]}, "reply": {"say": "Found it."}},
    {
        "expect": {"text": "second"},
        "reply": {"tools": [{"name": "get_current_time", "arguments": {}, "call_id": SAME_ID}]},
    },
    {"expect": {"tool_results": ["get_current_time"]}, "reply": {"say": "Told."}},
]


async def test_a_call_under_another_tools_id_is_refused_and_the_model_is_told(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    gateway = await gateway_factory(local_scenario=scenario(tmp_path, STEPS))
    async with gateway.session() as client:
        first = [e for e in await client.say("first") if e["type"] == "tool.finished"]
        second_turn = await client.say("second")
    second = [e for e in second_turn if e["type"] == "tool.finished"]
    assert [(e["call_id"], e["name"], e["ok"]) for e in first] == [(SAME_ID, "kb_search", True)]
    assert [(e["call_id"], e["name"], e["ok"]) for e in second] == [
        (SAME_ID, "get_current_time", False)
    ]
    assert second[0]["error"]["type"] == "VALIDATION"
    assert "another tool" in second[0]["error"]["message"]
    assert second_turn[-1]["text"] == "Told."  # the model got an answer for the call


BACKGROUND_STEPS = [
    {
        "expect": {"text": "first"},
        "reply": {"tools": [{"name": "echo", "arguments": {"text": "a"}, "call_id": SAME_ID}]},
    },
    {"expect": {"tool_results": ["echo"]}, "reply": {"say": "Echoed."}},
    {
        "expect": {"text": "second"},
        "reply": {"tools": [{"name": "slow_job", "arguments": {"ms": 50}, "call_id": SAME_ID}]},
    },
    {"expect": {"tool_results": ["slow_job"]}, "reply": {"say": "Told."}},
]


async def test_a_background_call_under_another_tools_id_is_refused_not_acknowledged(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    registry = await asyncio.to_thread(
        registry_with_variant,
        tmp_path / "tools",
        "sleepy",
        "slow_job",
        execution="background",
        timeoutMs=20000,
    )
    gateway = await gateway_factory(
        registry=registry, local_scenario=scenario(tmp_path, BACKGROUND_STEPS)
    )
    async with gateway.session() as client:
        await client.say("first")
        second_turn = await client.say("second")
    finished = [e for e in second_turn if e["type"] == "tool.finished"]
    assert [(e["name"], e["ok"], e["error"]["type"]) for e in finished] == [
        ("slow_job", False, "VALIDATION")
    ]
    # The refusal is the call's answer within its response, which ends after it: no "running"
    # acknowledgement ended that response first (the refusal then never reached the model).
    kinds = [e["type"] for e in second_turn]
    assert kinds.index("tool.finished") < kinds.index("response.done")
    assert second_turn[-1]["text"] == "Told."
    assert gateway.decisions("slow_job") == [("slow_job", "blocked")]  # it never ran
