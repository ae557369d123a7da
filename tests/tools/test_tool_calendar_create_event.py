from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tools._core import ToolContext, ToolErrorType, ToolResponse

MakeCtx = Callable[..., ToolContext]
RunTool = Callable[..., Awaitable[ToolResponse]]

TOOL = "calendar_create_event"


def stored_events(data_dir: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(data_dir / "calendar.sqlite")) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM events ORDER BY start_epoch").fetchall()
        return [dict(row) for row in rows]


async def test_creates_and_persists_an_event(run_tool: RunTool, data_dir: Path) -> None:
    args = {
        "title": "  Nurse visit ",
        "start": "2025-03-14T10:00:00",
        "duration_minutes": 45,
        "timezone": "Europe/Paris",
        "attendees": ["Nurse Amira", "Nurse Amira", "Dr Okafor"],
    }
    response = await run_tool(TOOL, args)
    assert response.ok
    data = response.data
    assert data["event_id"].startswith("evt_")
    assert data["title"] == "Nurse visit"
    assert data["start"] == "2025-03-14T10:00:00+01:00"
    assert data["end"] == "2025-03-14T10:45:00+01:00"
    assert data["timezone"] == "Europe/Paris"
    assert data["duration_minutes"] == 45
    assert data["attendees"] == ["Nurse Amira", "Dr Okafor"]

    [row] = stored_events(data_dir)
    assert row["event_id"] == data["event_id"]
    assert row["user_id"] == "user-alice"
    assert row["title"] == "Nurse visit"
    assert row["start_iso"] == data["start"]
    assert row["end_epoch"] - row["start_epoch"] == 45 * 60
    assert json.loads(row["attendees"]) == ["Nurse Amira", "Dr Okafor"]


def test_attendees_never_reach_the_client_or_logs() -> None:
    schema_path = Path(__file__).resolve().parents[2] / "tools" / TOOL / "schema.json"
    allowlist = json.loads(schema_path.read_text())["resultAllowlist"]
    assert "attendees" not in allowlist
    assert {"event_id", "title", "start", "end"} <= set(allowlist)


@pytest.mark.parametrize(
    ("args", "start", "end", "zone"),
    [
        # No timezone: an offset in start is kept, Z and naive starts are UTC.
        ({"start": "2025-06-01T09:00:00-04:00"}, "2025-06-01T09:00:00-04:00",
         "2025-06-01T09:30:00-04:00", "UTC-04:00"),
        ({"start": "2025-06-01T09:00:00Z"}, "2025-06-01T09:00:00+00:00",
         "2025-06-01T09:30:00+00:00", "UTC"),
        ({"start": "2025-06-01T09:00:00"}, "2025-06-01T09:00:00+00:00",
         "2025-06-01T09:30:00+00:00", "UTC"),
        # A timezone converts an aware start into that zone.
        ({"start": "2025-06-01T07:00:00Z", "timezone": "Europe/Paris"},
         "2025-06-01T09:00:00+02:00", "2025-06-01T09:30:00+02:00", "Europe/Paris"),
        # Across the spring DST change a 60-minute event ends 60 real minutes later.
        ({"start": "2025-03-30T01:30:00", "timezone": "Europe/Paris", "duration_minutes": 60},
         "2025-03-30T01:30:00+01:00", "2025-03-30T03:30:00+02:00", "Europe/Paris"),
        # A wall time that DST skips is moved to the real instant it names.
        ({"start": "2025-03-30T02:30:00", "timezone": "Europe/Paris"},
         "2025-03-30T03:30:00+02:00", "2025-03-30T04:00:00+02:00", "Europe/Paris"),
    ],
)  # fmt: skip
async def test_start_offsets_and_zones(
    run_tool: RunTool, args: dict[str, Any], start: str, end: str, zone: str
) -> None:
    response = await run_tool(TOOL, {"title": "Check-up", **args})
    assert response.ok
    assert (response.data["start"], response.data["end"]) == (start, end)
    assert response.data["timezone"] == zone


async def test_overlap_is_a_conflict_without_side_effects(
    run_tool: RunTool, data_dir: Path
) -> None:
    first = await run_tool(
        TOOL, {"title": "Nurse visit", "start": "2025-03-14T10:00:00+01:00", "duration_minutes": 45}
    )
    assert first.ok
    # Same slot written in another zone: 09:30 UTC is 10:30 in Paris.
    second = await run_tool(TOOL, {"title": "Hairdresser", "start": "2025-03-14T09:30:00Z"})
    assert not second.ok
    assert second.error is not None
    assert second.error.type is ToolErrorType.CONFLICT
    assert second.error.retryable is False
    assert second.error.partial_side_effects is False
    assert "'Nurse visit'" in second.error.message
    assert "2025-03-14T10:00:00+01:00" in second.error.message
    assert [row["title"] for row in stored_events(data_dir)] == ["Nurse visit"]


async def test_back_to_back_events_do_not_overlap(run_tool: RunTool, data_dir: Path) -> None:
    for start in ("2025-03-14T10:00:00Z", "2025-03-14T10:30:00Z", "2025-03-14T09:30:00Z"):
        response = await run_tool(TOOL, {"title": f"Slot {start}", "start": start})
        assert response.ok, response.error
    assert len(stored_events(data_dir)) == 3


async def test_users_have_separate_calendars(
    run_tool: RunTool, make_ctx: MakeCtx, data_dir: Path
) -> None:
    args = {"title": "Physio", "start": "2025-03-14T10:00:00Z", "duration_minutes": 60}
    alice = await run_tool(TOOL, args, make_ctx(user_id="user-alice"))
    bob = await run_tool(TOOL, args, make_ctx(user_id="user-bob"))
    other_tenant = await run_tool(TOOL, args, make_ctx(user_id="user-alice", tenant="clinic-2"))
    assert alice.ok
    assert bob.ok
    assert other_tenant.ok
    again = await run_tool(TOOL, args, make_ctx(user_id="user-bob"))
    assert again.error is not None
    assert again.error.type is ToolErrorType.CONFLICT
    owners = sorted((row["tenant"], row["user_id"]) for row in stored_events(data_dir))
    assert owners == [("", "user-alice"), ("", "user-bob"), ("clinic-2", "user-alice")]


async def test_concurrent_bookings_of_one_slot_create_one_event(
    run_tool: RunTool, data_dir: Path
) -> None:
    args = {"title": "Visit", "start": "2025-03-14T10:00:00Z"}
    responses = await asyncio.gather(*(run_tool(TOOL, args) for _ in range(5)))
    assert sum(response.ok for response in responses) == 1
    conflicts = [r.error.type for r in responses if r.error is not None]
    assert conflicts == [ToolErrorType.CONFLICT] * 4
    assert len(stored_events(data_dir)) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"start": "next tuesday at 10"}, "ISO 8601"),
        ({"start": "2025-02-30T10:00:00Z"}, "ISO 8601"),
        ({"start": "2025-03-14T10:00:00", "timezone": "Paris/France"}, "unknown timezone"),
        ({"start": "2025-03-14T10:00:00Z", "title": "   "}, "blank"),
    ],
)
async def test_invalid_arguments_are_validation_failures(
    run_tool: RunTool, data_dir: Path, args: dict[str, Any], fragment: str
) -> None:
    response = await run_tool(TOOL, {"title": "Visit", **args})
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.VALIDATION
    assert fragment in response.error.message
    assert not (data_dir / "calendar.sqlite").exists()
