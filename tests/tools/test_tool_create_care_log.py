from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tools._core import ToolContext, ToolErrorType, ToolResponse

MakeCtx = Callable[..., ToolContext]
RunTool = Callable[..., Awaitable[ToolResponse]]

TOOL = "create_care_log"
NOTE = "Ate half of lunch, said her left knee hurts when climbing stairs. No swelling."


def stored_logs(data_dir: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(data_dir / "care.sqlite")) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute("SELECT * FROM care_log ORDER BY rowid")]


@pytest.fixture
def caregiver(make_ctx: MakeCtx) -> ToolContext:
    return make_ctx(user_id="user-carla", roles=("caregiver",), mode="text", call_id="call-9")


async def test_writes_the_log_and_does_not_echo_the_note(
    run_tool: RunTool, caregiver: ToolContext, data_dir: Path
) -> None:
    args = {"patient_id": "pat_1042", "note": f"  {NOTE}\n", "severity": "medium"}
    response = await run_tool(TOOL, args, caregiver)
    assert response.ok
    data = response.data
    assert set(data) == {"log_id", "patient_id", "severity", "created_at"}
    assert data["log_id"].startswith("care_")
    assert (data["patient_id"], data["severity"]) == ("pat_1042", "medium")
    created = datetime.fromisoformat(data["created_at"])
    assert abs(created - datetime.now(UTC)) < timedelta(seconds=5)

    [row] = stored_logs(data_dir)
    assert row["log_id"] == data["log_id"]
    assert row["note"] == NOTE
    assert row["author_user_id"] == "user-carla"
    assert (row["session_id"], row["call_id"]) == ("sess-1", "call-9")


async def test_admins_may_write_logs(run_tool: RunTool, make_ctx: MakeCtx) -> None:
    ctx = make_ctx(roles=("user", "admin"))
    response = await run_tool(
        TOOL, {"patient_id": "P-7", "note": "Routine.", "severity": "low"}, ctx
    )
    assert response.ok


@pytest.mark.parametrize("roles", [(), ("user",), ("family",)])
async def test_other_roles_are_forbidden(
    run_tool: RunTool, make_ctx: MakeCtx, data_dir: Path, roles: tuple[str, ...]
) -> None:
    args = {"patient_id": "pat_1042", "note": NOTE, "severity": "high"}
    response = await run_tool(TOOL, args, make_ctx(roles=roles))
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.FORBIDDEN
    assert response.error.partial_side_effects is False
    assert not (data_dir / "care.sqlite").exists()


async def test_blank_note_is_refused(
    run_tool: RunTool, caregiver: ToolContext, data_dir: Path
) -> None:
    response = await run_tool(
        TOOL, {"patient_id": "p1", "note": " \n ", "severity": "low"}, caregiver
    )
    assert response.error is not None
    assert response.error.type is ToolErrorType.VALIDATION
    assert not (data_dir / "care.sqlite").exists()


async def test_shares_the_care_database_with_the_medication_log(
    run_tool: RunTool, caregiver: ToolContext, data_dir: Path
) -> None:
    assert (await run_tool("log_medication", {"medication": "aspirin", "dose": "1 tablet"})).ok
    for severity in ("low", "medium", "high"):
        args = {"patient_id": "pat_1", "note": f"{severity} note", "severity": severity}
        assert (await run_tool(TOOL, args, caregiver)).ok
    assert [row["severity"] for row in stored_logs(data_dir)] == ["low", "medium", "high"]
    with closing(sqlite3.connect(data_dir / "care.sqlite")) as conn:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    assert {"care_log", "medication_log"} <= tables
