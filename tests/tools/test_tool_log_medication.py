from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tools._core import ToolContext, ToolErrorType, ToolResponse

MakeCtx = Callable[..., ToolContext]
RunTool = Callable[..., Awaitable[ToolResponse]]

TOOL = "log_medication"
PARIS_WINTER = timezone(timedelta(hours=1))


def stored_entries(data_dir: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(data_dir / "care.sqlite")) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM medication_log ORDER BY taken_at_epoch").fetchall()
        return [dict(row) for row in rows]


def hours_ago(hours: float, tz: timezone = PARIS_WINTER) -> str:
    moment = datetime.now(UTC) - timedelta(hours=hours)
    return moment.astimezone(tz).replace(microsecond=0).isoformat()


async def test_logs_a_dose_taken_now(run_tool: RunTool, data_dir: Path) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    response = await run_tool(TOOL, {"medication": " amlodipine ", "dose": "10 mg"})
    after = datetime.now(UTC)
    assert response.ok
    data = response.data
    assert data["entry_id"].startswith("med_")
    assert (data["medication"], data["dose"]) == ("amlodipine", "10 mg")
    taken_at = datetime.fromisoformat(data["taken_at"])
    assert taken_at.utcoffset() == timedelta(0)
    assert before <= taken_at <= after

    [row] = stored_entries(data_dir)
    assert row["entry_id"] == data["entry_id"]
    assert row["user_id"] == "user-alice"
    assert (row["medication"], row["dose"]) == ("amlodipine", "10 mg")
    assert row["taken_at"] == data["taken_at"]
    assert (row["session_id"], row["call_id"]) == ("sess-1", "call-1")


async def test_keeps_the_given_time_and_offset(run_tool: RunTool, data_dir: Path) -> None:
    when = hours_ago(3)
    response = await run_tool(TOOL, {"medication": "metformin", "dose": "500 mg", "taken_at": when})
    assert response.ok
    assert response.data["taken_at"] == when
    [row] = stored_entries(data_dir)
    assert row["taken_at_epoch"] == int(datetime.fromisoformat(when).timestamp())


def test_medicine_names_stay_out_of_client_and_logs() -> None:
    schema_path = Path(__file__).resolve().parents[2] / "tools" / TOOL / "schema.json"
    schema = json.loads(schema_path.read_text())
    assert not {"medication", "dose"} & set(schema["resultAllowlist"])
    assert schema["sensitivity"] == "high"
    assert "took" in schema["intentKeywords"]


@pytest.mark.parametrize(
    ("taken_at", "fragment"),
    [
        ("2025-03-14T08:00:00", "UTC offset"),
        ("this morning", "ISO 8601"),
        (None, "future"),
        ("2001-01-01T08:00:00+00:00", "7 days"),
    ],
)
async def test_bad_times_are_validation_failures(
    run_tool: RunTool, data_dir: Path, taken_at: str | None, fragment: str
) -> None:
    when = taken_at if taken_at is not None else hours_ago(-1)
    response = await run_tool(TOOL, {"medication": "ramipril", "dose": "5 mg", "taken_at": when})
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.VALIDATION
    assert fragment in response.error.message
    assert not (data_dir / "care.sqlite").exists()


async def test_small_clock_skew_into_the_future_is_accepted(run_tool: RunTool) -> None:
    response = await run_tool(
        TOOL, {"medication": "ramipril", "dose": "5 mg", "taken_at": hours_ago(-1 / 30)}
    )
    assert response.ok


async def test_blank_names_are_refused(run_tool: RunTool) -> None:
    response = await run_tool(TOOL, {"medication": "  ", "dose": "5 mg"})
    assert response.error is not None
    assert response.error.type is ToolErrorType.VALIDATION


async def test_same_dose_reported_twice_is_a_conflict(run_tool: RunTool, data_dir: Path) -> None:
    first = await run_tool(TOOL, {"medication": "Aspirin", "dose": "100 mg"})
    assert first.ok
    # Five minutes earlier, in another offset and spelling: still the same dose.
    again = await run_tool(
        TOOL, {"medication": "aspirin", "dose": "100 MG", "taken_at": hours_ago(1 / 12)}
    )
    assert not again.ok
    assert again.error is not None
    assert again.error.type is ToolErrorType.CONFLICT
    assert again.error.partial_side_effects is False
    assert first.data["taken_at"] in again.error.message
    assert "spirin" not in again.error.message  # no health data in error messages
    assert len(stored_entries(data_dir)) == 1


async def test_separate_doses_are_logged(
    run_tool: RunTool, make_ctx: MakeCtx, data_dir: Path
) -> None:
    args = {"medication": "aspirin", "dose": "100 mg"}
    assert (await run_tool(TOOL, args)).ok
    assert (await run_tool(TOOL, {**args, "taken_at": hours_ago(6)})).ok
    assert (await run_tool(TOOL, {**args, "dose": "200 mg"})).ok
    assert (await run_tool(TOOL, args, make_ctx(user_id="user-bob"))).ok
    entries = stored_entries(data_dir)
    assert len(entries) == 4
    assert sorted(entry["user_id"] for entry in entries).count("user-bob") == 1
