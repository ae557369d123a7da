from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from types import ModuleType
from zoneinfo import ZoneInfo

import pytest

from tools._core import ToolContext, ToolError, ToolErrorType, ToolResponse

LoadHandler = Callable[[str], ModuleType]
MakeCtx = Callable[..., ToolContext]
RunTool = Callable[..., Awaitable[ToolResponse]]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


@pytest.mark.parametrize(
    ("zone", "utc_instant", "expected"),
    [
        (
            "Europe/Paris",
            datetime(2025, 1, 15, 14, 5, 9, 123456, tzinfo=UTC),
            ("2025-01-15T15:05:09+01:00", "2025-01-15", "15:05", "Wednesday", "+01:00"),
        ),
        (
            "Europe/Paris",
            datetime(2025, 7, 15, 14, 5, tzinfo=UTC),
            ("2025-07-15T16:05:00+02:00", "2025-07-15", "16:05", "Tuesday", "+02:00"),
        ),
        (
            "Asia/Kolkata",
            datetime(2025, 3, 1, 20, 0, tzinfo=UTC),
            ("2025-03-02T01:30:00+05:30", "2025-03-02", "01:30", "Sunday", "+05:30"),
        ),
        (
            "America/St_Johns",
            datetime(2025, 1, 10, 12, 0, tzinfo=UTC),
            ("2025-01-10T08:30:00-03:30", "2025-01-10", "08:30", "Friday", "-03:30"),
        ),
        (
            "UTC",
            datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC),
            ("2024-02-29T23:59:59+00:00", "2024-02-29", "23:59", "Thursday", "+00:00"),
        ),
    ],
)
def test_describe_instant_fields(
    load_handler: LoadHandler,
    zone: str,
    utc_instant: datetime,
    expected: tuple[str, str, str, str, str],
) -> None:
    module = load_handler("get_current_time")
    described = module.describe_instant(utc_instant.astimezone(ZoneInfo(zone)), zone)
    iso, date, local_time, weekday, offset = expected
    assert described == {
        "iso": iso,
        "date": date,
        "local_time": local_time,
        "weekday": weekday,
        "timezone": zone,
        "utc_offset": offset,
    }


async def test_defaults_to_utc_now(run_tool: RunTool) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    response = await run_tool("get_current_time", {})
    after = datetime.now(UTC)
    assert response.ok
    assert response.data["timezone"] == "UTC"
    assert response.data["utc_offset"] == "+00:00"
    reported = datetime.fromisoformat(response.data["iso"])
    assert before <= reported <= after
    assert response.intents == ()


async def test_named_zone_is_consistent_with_the_clock(run_tool: RunTool) -> None:
    response = await run_tool("get_current_time", {"timezone": "America/New_York"})
    assert response.ok
    data = response.data
    reported = datetime.fromisoformat(data["iso"])
    assert abs(reported - datetime.now(UTC)) < timedelta(seconds=5)
    local = reported.astimezone(ZoneInfo("America/New_York"))
    assert reported.utcoffset() == local.utcoffset()
    assert data["utc_offset"] in ("-05:00", "-04:00")
    assert data["local_time"] == local.strftime("%H:%M")
    assert data["date"] == local.date().isoformat()
    assert data["weekday"] == WEEKDAYS[local.weekday()]


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "Europe", "utc", "CET/Paris"])
async def test_unknown_zone_is_a_validation_failure(run_tool: RunTool, zone: str) -> None:
    response = await run_tool("get_current_time", {"timezone": zone})
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.VALIDATION
    assert response.error.retryable is False
    assert response.error.partial_side_effects is False
    assert zone in response.error.message
    assert "IANA" in response.error.message


@pytest.mark.parametrize("zone", ["../../etc/passwd", "", "/usr/share/zoneinfo/UTC", "x" * 500])
async def test_hostile_zone_names_fail_cleanly_even_without_schema_validation(
    load_handler: LoadHandler, make_ctx: MakeCtx, zone: str
) -> None:
    # Bypass the schema's pattern: the handler itself must still refuse these.
    with pytest.raises(ToolError) as caught:
        await load_handler("get_current_time").execute({"timezone": zone}, make_ctx())
    assert caught.value.type is ToolErrorType.VALIDATION
    assert len(caught.value.message) < 200
