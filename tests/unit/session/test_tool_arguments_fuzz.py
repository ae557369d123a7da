"""Any arguments a model may send, through the tool flow and the runner: never an exception out
of them, and for every call exactly one ``tool.started``, one ``tool.finished``, one audit line
and one result for the model (hypothesis: any JSON value, any depth, any size up to the text
frame limit, as JSON text and as an object)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_kit import make_session

from gateway.protocol import EndReason
from gateway.registry import Registry
from transports.events import RequestedCall, ToolCallsRequested

FRAME_LIMIT = 256 * 1024

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=40,
)


@st.composite
def deep_values(draw: st.DrawFn) -> Any:
    value: Any = draw(scalars)
    for _ in range(draw(st.integers(0, 400))):
        value = [value] if draw(st.booleans()) else {draw(st.text(max_size=3)): value}
    return value


big_values = st.integers(0, FRAME_LIMIT).map(lambda n: "x" * n)
arguments = st.one_of(
    json_values,
    deep_values(),
    big_values,
    st.dictionaries(st.text(max_size=12), json_values | deep_values() | big_values, max_size=4),
)
tool_names = st.sampled_from(
    ["get_current_time", "kb_search", "calendar_create_event", "log_medication", "echo"]
) | st.text(max_size=30)


def as_text(value: Any) -> str | None:
    """The value as a JSON text a provider would send; None when Python cannot write it."""
    try:
        return json.dumps(value)
    except (RecursionError, ValueError):
        return None


@pytest.fixture(autouse=True)
def enough_recursion() -> Any:
    # json.dumps of the 400-deep strategy values needs more than the default 1000 frames.
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)
    yield
    sys.setrecursionlimit(previous)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(value=arguments, name=tool_names, as_object=st.booleans())
def test_any_arguments_get_exactly_one_answer_everywhere(
    full_registry: Registry,
    tmp_path_factory: pytest.TempPathFactory,
    value: Any,
    name: str,
    as_object: bool,
) -> None:
    raw: Any = value if as_object else as_text(value)
    if raw is None:
        raw = value

    async def run() -> None:
        rig = make_session(full_registry, tmp_path_factory.mktemp("data"), roles=("caregiver",))
        call = RequestedCall(call_id="call_fuzz", name=name, arguments=raw)
        await rig.session.tools.handle_batch(ToolCallsRequested("resp_1", (call,)))
        started = rig.outbound.of("tool.started")
        finished = rig.outbound.of("tool.finished")
        assert [e["call_id"] for e in started] == ["call_fuzz"]
        assert [e["call_id"] for e in finished] == ["call_fuzz"]
        assert [r.call_id for r in rig.audit.records] == ["call_fuzz"]
        assert [r.call_id for r in rig.transport.results] == ["call_fuzz"]
        await rig.session.end(EndReason.CLIENT)

    asyncio.run(run())


def test_a_300_deep_argument_is_a_validation_answer(
    full_registry: Registry, tmp_path: Path
) -> None:
    deep: Any = "Dentist"
    for _ in range(300):
        deep = [deep]
    text = json.dumps({"title": deep, "start": "2026-12-01T10:00:00+01:00"})

    async def run() -> None:
        rig = make_session(full_registry, tmp_path)
        call = RequestedCall("call_deep", "calendar_create_event", text)
        await rig.session.tools.handle_batch(ToolCallsRequested("resp_1", (call,)))
        finished = rig.outbound.of("tool.finished")
        assert finished[0]["error"]["type"] == "VALIDATION"
        assert "nested deeper" in finished[0]["error"]["message"]
        (record,) = rig.audit.records
        assert (record.decision.value, record.outcome) == ("blocked", "VALIDATION")
        (result,) = rig.transport.results
        assert result.envelope["error"]["type"] == "VALIDATION"

    asyncio.run(run())
