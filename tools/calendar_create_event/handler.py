"""calendar_create_event: add an event to the user's calendar, refusing overlaps.

Events live in ``<data_dir>/calendar.sqlite``, one row per event, owned by (tenant, user).
Times are compared as UTC epoch seconds; the ISO strings with the user's offset are kept for
display. The overlap test and the insert share one ``BEGIN IMMEDIATE`` transaction, so two
concurrent calls cannot both book the same slot.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial
from typing import Any, NamedTuple

from tools._core import ToolContext, ToolErrorType, ToolResponse
from tools._support import parse_datetime_arg, resolve_zone, run_in_transaction, utc_now

DB_NAME = "calendar.sqlite"
DEFAULT_DURATION_MINUTES = 30

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    event_id    TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    title       TEXT NOT NULL,
    start_epoch INTEGER NOT NULL,
    end_epoch   INTEGER NOT NULL,
    start_iso   TEXT NOT NULL,
    end_iso     TEXT NOT NULL,
    timezone    TEXT NOT NULL,
    attendees   TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_owner ON events (tenant, user_id, start_epoch);
"""


class _Event(NamedTuple):
    event_id: str
    tenant: str
    user_id: str
    title: str
    start: datetime
    end: datetime
    timezone: str
    attendees: tuple[str, ...]


class _Overlap(NamedTuple):
    title: str
    start_iso: str
    end_iso: str


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    title = args["title"].strip()
    if not title:
        return ToolResponse.failure(ToolErrorType.VALIDATION, "title must not be blank")
    start, zone_label = _resolve_start(args["start"], args.get("timezone"))
    duration = timedelta(minutes=args.get("duration_minutes", DEFAULT_DURATION_MINUTES))
    # Add the length in UTC: wall-clock arithmetic would be wrong across a DST change.
    end = (start.astimezone(UTC) + duration).astimezone(start.tzinfo)
    event = _Event(
        event_id=f"evt_{uuid.uuid4().hex[:16]}",
        tenant=ctx.tenant or "",
        user_id=ctx.user_id,
        title=title,
        start=start,
        end=end,
        timezone=zone_label,
        attendees=tuple(dict.fromkeys(a.strip() for a in args.get("attendees", []) if a.strip())),
    )

    overlap = await run_in_transaction(
        ctx.data_dir / DB_NAME, SCHEMA, partial(_insert_unless_overlapping, event=event)
    )
    if overlap is not None:
        return ToolResponse.failure(
            ToolErrorType.CONFLICT,
            f"this overlaps your event {overlap.title!r} from {overlap.start_iso} "
            f"to {overlap.end_iso}; choose another time",
        )
    return ToolResponse.success(
        {
            "event_id": event.event_id,
            "title": event.title,
            "start": event.start.isoformat(),
            "end": event.end.isoformat(),
            "timezone": event.timezone,
            "duration_minutes": int(duration.total_seconds()) // 60,
            "attendees": list(event.attendees),
        }
    )


def _resolve_start(text: str, zone_name: str | None) -> tuple[datetime, str]:
    """The start, expressed in the zone the result should use, and that zone's label."""
    zone: tzinfo = UTC if zone_name is None else resolve_zone(zone_name)
    start = parse_datetime_arg("start", text, default_zone=zone).replace(microsecond=0)
    if zone_name is not None:
        # Through UTC, so a wall time skipped by DST (02:30 on spring-forward day) normalises.
        return start.astimezone(UTC).astimezone(zone), zone_name
    # No zone given: keep the caller's own offset ("UTC+01:00", or "UTC" for Z/naive).
    return start, start.tzname() or "UTC"


def _insert_unless_overlapping(conn: sqlite3.Connection, event: _Event) -> _Overlap | None:
    start_epoch = int(event.start.timestamp())
    end_epoch = int(event.end.timestamp())
    row = conn.execute(
        "SELECT title, start_iso, end_iso FROM events"
        " WHERE tenant = ? AND user_id = ? AND start_epoch < ? AND end_epoch > ?"
        " ORDER BY start_epoch LIMIT 1",
        (event.tenant, event.user_id, end_epoch, start_epoch),
    ).fetchone()
    if row is not None:
        return _Overlap(title=row[0], start_iso=row[1], end_iso=row[2])
    conn.execute(
        "INSERT INTO events (event_id, tenant, user_id, title, start_epoch, end_epoch,"
        " start_iso, end_iso, timezone, attendees, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event.event_id,
            event.tenant,
            event.user_id,
            event.title,
            start_epoch,
            end_epoch,
            event.start.isoformat(),
            event.end.isoformat(),
            event.timezone,
            json.dumps(list(event.attendees)),
            utc_now().isoformat(),
        ),
    )
    return None
