"""get_current_time: the current date and time in an IANA time zone."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tools._core import ToolContext, ToolResponse
from tools._support import format_utc_offset, resolve_zone

# English names on purpose: strftime("%A") follows the process locale.
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def describe_instant(moment: datetime, zone_name: str) -> dict[str, Any]:
    """The result fields for an aware ``moment`` already converted to the zone."""
    return {
        "iso": moment.isoformat(timespec="seconds"),
        "date": moment.date().isoformat(),
        "local_time": moment.strftime("%H:%M"),
        "weekday": WEEKDAYS[moment.weekday()],
        "timezone": zone_name,
        "utc_offset": format_utc_offset(moment),
    }


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    zone_name = args.get("timezone", "UTC")
    zone = resolve_zone(zone_name)
    return ToolResponse.success(describe_instant(datetime.now(zone), zone_name))
