"""What a hostile (or broken) model can send: arguments nested 300 deep, and a thousand tool
names it made up. Each call is answered, audited and shown to the client; none reaches a metric
label or crashes a batch."""

from __future__ import annotations

import json
from typing import Any

from harness import Gateway, first, types


async def test_a_300_deep_argument_is_answered_validation_with_its_audit_line(
    gateway: Gateway,
) -> None:
    deep: Any = "Dentist"
    for _ in range(300):
        deep = [deep]
    args = {"title": deep, "start": "2026-12-01T10:00:00+01:00"}
    async with gateway.session("text") as client:
        events = await client.say(f"/tool calendar_create_event {json.dumps(args)}")
        assert types(events).count("tool.started") == 1
        started = first(events, "tool.started")
        assert started["arguments"] == {}  # nothing of an unreadable argument is echoed
        finished = first(events, "tool.finished")
        assert finished["ok"] is False
        assert finished["error"]["type"] == "VALIDATION"
        assert "nested deeper than 32 levels" in finished["error"]["message"]
        assert "VALIDATION" in events[-1]["text"]  # the model was answered
        # The session goes on.
        assert (await client.say("still there?"))[-1]["text"] == "You said: still there?"
    (record,) = gateway.audit.records
    assert (record.tool, record.decision.value, record.outcome) == (
        "calendar_create_event",
        "blocked",
        "VALIDATION",
    )
    assert record.args_hash is None


async def test_a_thousand_made_up_tool_names_leave_the_metrics_alone(gateway: Gateway) -> None:
    """The report: 30 names of 3,000 characters took /metrics from 6.6 KB to 191 KB."""

    async def made_up(batch: int) -> None:
        names = [f"made_up_{batch}_{n}_" + "x" * 60 for n in range(100)]
        command = "/tools " + " ;; ".join(f"{name} {{}}" for name in names)
        await client.send("text.send", text=command)
        await client.until_reply()

    async def page() -> str:
        async with gateway.http.get(f"{gateway.url}/metrics") as response:
            return await response.text()

    def series(text: str) -> set[str]:
        return {line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}

    async with gateway.session("text") as client:
        for batch in range(10):  # 1,000 names
            await made_up(batch)
        before = await page()
        for batch in range(10, 20):  # 1,000 more
            await made_up(batch)
        after = await page()
    assert series(after) == series(before)
    # The same lines; only counter values changed (a digit here or there: 10 → 20 frames).
    assert abs(len(after) - len(before)) < 32
    assert "made_up" not in after
    assert 'gateway_tool_calls_total{outcome="NOT_FOUND",tool="unknown"} 2000.0' in after
