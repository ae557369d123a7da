"""The fake's dispatch mode: marked appends become whole tool calls, timed on the fake's clock.

The pure session first (``FakeSession`` with ``dispatch=True``), then the server over a real
socket with its timings file, then the command line's checks.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from fakes.openai_realtime.dispatch import (
    DISPATCH_MARKER,
    DispatchLog,
    is_dispatch_audio,
    marker_frame,
)
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer, _parse_args
from fakes.openai_realtime.session import FakeSession
from fakes.openai_realtime.wire import Send, Stamp

TIMEOUT_S = 5
MARKED = base64.b64encode(marker_frame(960)).decode()
PLAIN = base64.b64encode(bytes(960)).decode()
CALL_EVENTS = [
    "response.created",
    "response.output_item.added",
    "conversation.item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "conversation.item.done",
    "response.output_item.done",
    "response.done",
    "rate_limits.updated",
]


def append(audio: str) -> dict[str, Any]:
    return {"type": "input_audio_buffer.append", "audio": audio}


def output(call_id: str) -> dict[str, Any]:
    item = {"type": "function_call_output", "call_id": call_id, "output": '{"ok":true}'}
    return {"type": "conversation.item.create", "item": item}


def dispatch_session() -> FakeSession:
    return FakeSession(FakeOptions(echo=True, dispatch=True), number=7)


def test_the_marker_is_recognised_in_base64_without_decoding() -> None:
    assert is_dispatch_audio(MARKED)
    assert not is_dispatch_audio(PLAIN)
    assert marker_frame(640).startswith(DISPATCH_MARKER)
    assert len(marker_frame(640)) == 640
    with pytest.raises(ValueError, match="marker frame"):
        marker_frame(11)


def test_a_marked_append_is_a_whole_tool_call_then_a_stamp() -> None:
    session = dispatch_session()
    actions = session.handle(append(MARKED))
    assert isinstance(actions[-1], Stamp)
    events = [a.event for a in actions[:-1] if isinstance(a, Send)]
    assert len(events) == len(actions) - 1
    assert [e["type"] for e in events] == CALL_EVENTS
    call = events[-2]["response"]["output"][0]
    assert (call["type"], call["name"], call["arguments"]) == ("function_call", "noop", "{}")
    assert events[-2]["response"]["status"] == "completed"
    assert actions[-1].call_id == call["call_id"] == "call_7_1"
    assert session.active_response_id is None  # nothing stays active between dispatches
    second = session.handle(append(MARKED))
    assert isinstance(second[-1], Stamp)
    assert second[-1].call_id == "call_7_2"


def test_plain_appends_still_echo_and_the_output_is_taken() -> None:
    session = dispatch_session()
    echoed = [a.event for a in session.handle(append(PLAIN)) if isinstance(a, Send)]
    assert echoed[-1] == {**echoed[-1], "type": "response.output_audio.delta", "delta": PLAIN}
    session.handle(append(MARKED))
    added = [a.event["type"] for a in session.handle(output("call_7_1")) if isinstance(a, Send)]
    assert added == ["conversation.item.added", "conversation.item.done"]


def test_response_create_gets_an_empty_response_at_once() -> None:
    session = dispatch_session()
    session.handle(append(MARKED))
    session.handle(output("call_7_1"))
    events = [a.event for a in session.handle({"type": "response.create"}) if isinstance(a, Send)]
    assert [e["type"] for e in events] == [
        "response.created",
        "response.done",
        "rate_limits.updated",
    ]
    assert events[1]["response"]["status"] == "completed"
    assert events[1]["response"]["output"] == []
    assert session.active_response_id is None


def test_dispatch_mode_needs_echo_mode() -> None:
    with pytest.raises(ValueError, match="echo"):
        FakeOptions(dispatch=True)
    without_dispatch = FakeSession(FakeOptions(echo=True))
    sent = without_dispatch.handle(append(MARKED))
    assert [a.event["type"] for a in sent if isinstance(a, Send)][-1] == (
        "response.output_audio.delta"
    )


def test_the_log_records_only_outputs_of_emitted_calls_once(tmp_path: Path) -> None:
    path = tmp_path / "timings.jsonl"
    log = DispatchLog(path)
    log.emitted("call_1_1", 1_000)
    log.received(output("call_other"), 2_000)  # not dispatched
    log.received({"type": "response.create"}, 2_000)
    log.received(output("call_1_1"), 3_500)
    log.received(output("call_1_1"), 4_000)  # answered twice: the first counts
    log.emitted("call_1_2", 5_000)
    log.close()
    assert [(r.call_id, r.duration_ns) for r in log.records] == [("call_1_1", 2_500)]
    assert log.unanswered == 1
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"call_id": "call_1_1", "emitted_ns": 1_000, "received_ns": 3_500}]


async def test_the_server_stamps_each_call_and_writes_the_timings(tmp_path: Path) -> None:
    path = tmp_path / "timings.jsonl"
    options = FakeOptions(echo=True, dispatch=True, log_frames=False)
    async with FakeRealtimeServer(options, dispatch_timings=path) as server:
        url = f"{server.ws_url}/realtime?model=gpt-realtime"
        async with asyncio.timeout(TIMEOUT_S), websockets.connect(url) as ws:

            async def until(kind: str) -> list[dict[str, Any]]:
                seen: list[dict[str, Any]] = []
                while not seen or seen[-1]["type"] != kind:
                    seen.append(json.loads(await ws.recv()))
                return seen

            await until("session.created")
            call_ids = []
            for _ in range(3):
                await ws.send(json.dumps(append(PLAIN)))
                await until("response.output_audio.delta")
                await ws.send(json.dumps(append(MARKED)))
                events = await until("rate_limits.updated")
                call_ids.append(events[-2]["response"]["output"][0]["call_id"])
                await ws.send(json.dumps(output(call_ids[-1])))
                await ws.send(json.dumps({"type": "response.create"}))
                assert (await until("response.done"))[-1]["response"]["output"] == []
        assert server.dispatch_log is not None
        records = server.dispatch_log.records
    assert [r.call_id for r in records] == call_ids
    assert all(0 < r.duration_ns < TIMEOUT_S * 10**9 for r in records)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["call_id"] for line in lines] == call_ids
    assert all(line["received_ns"] > line["emitted_ns"] for line in lines)


def test_the_command_line_takes_dispatch_with_echo_only(tmp_path: Path) -> None:
    timings = tmp_path / "t.jsonl"
    options, _, _, path = _parse_args(["--echo", "--dispatch", "--timings", str(timings)])
    assert (options.dispatch, options.dispatch_tool, path) == (True, "noop", timings)
    with pytest.raises(SystemExit):
        _parse_args(["--dispatch"])
    with pytest.raises(SystemExit):
        _parse_args(["--echo", "--timings", str(timings)])
