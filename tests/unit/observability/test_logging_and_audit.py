"""The audit trail is kept whatever the log level, and its log fields are the whole record."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from gateway.observability import configure_logging
from gateway.toolrun.audit import AuditDecision, AuditRecord, StructlogAuditSink


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    out = io.StringIO()
    configure_logging("json", "warning")
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(out)
    yield out
    root.handlers[:], _ = saved
    root.setLevel(saved[1])
    structlog.reset_defaults()


RECORD = AuditRecord(
    session_id="sess_1",
    user_id="alice",
    turn=3,
    tool="get_current_time",
    call_id="call_1",
    args_hash="abc",
    decision=AuditDecision.EXECUTED,
    outcome="ok",
    duration_ms=1.23456,
    intents=("SUPPRESS_AUDIO",),
    result={"iso": "2026-11-25T10:00:00+01:00"},
    reason=None,
)


def test_audit_records_survive_a_warning_log_level_and_diagnostics_do_not(
    captured: io.StringIO,
) -> None:
    StructlogAuditSink().record(RECORD)
    structlog.get_logger("upstream.openai").info("upstream_connected")
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["tool_call"]
    assert lines[0]["call_id"] == "call_1"
    assert lines[0]["decision"] == "executed"


def test_the_log_fields_are_every_field_of_the_record() -> None:
    fields = RECORD.as_log_fields()
    assert set(fields) == {f.name for f in dataclasses.fields(AuditRecord)}
    assert fields["duration_ms"] == 1.235
    assert fields["intents"] == ["SUPPRESS_AUDIO"]
    assert fields["result"] == {"iso": "2026-11-25T10:00:00+01:00"}


async def test_in_a_loop_records_are_written_after_the_current_step_in_order(
    captured: io.StringIO,
) -> None:
    sink = StructlogAuditSink()
    sink.record(RECORD)
    sink.record(dataclasses.replace(RECORD, call_id="call_2"))
    assert captured.getvalue() == ""  # not yet: the tool's result goes to the model first
    await asyncio.sleep(0)
    calls = [json.loads(line)["call_id"] for line in captured.getvalue().splitlines()]
    assert calls == ["call_1", "call_2"]


async def test_flush_writes_what_is_pending_at_once(captured: io.StringIO) -> None:
    sink = StructlogAuditSink()
    sink.record(RECORD)
    sink.flush()
    assert json.loads(captured.getvalue())["call_id"] == "call_1"
    await asyncio.sleep(0)  # the scheduled flush finds nothing more to write
    assert len(captured.getvalue().splitlines()) == 1
