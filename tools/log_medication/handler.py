"""log_medication: add a dose the user says they took to their medication log.

Entries live in ``<data_dir>/care.sqlite``, table ``medication_log``, owned by (tenant, user).
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime, timedelta
from functools import partial
from typing import Any, NamedTuple

from tools._core import ToolContext, ToolErrorType, ToolResponse
from tools._support import parse_datetime_arg, run_in_transaction, utc_now

DB_NAME = "care.sqlite"
# A few minutes of clock difference between the user's device and the gateway is normal.
FUTURE_TOLERANCE = timedelta(minutes=5)
# Older entries are more likely a wrong date from the model than a real late report.
MAX_AGE = timedelta(days=7)
# The same medicine and dose reported twice this close together is one dose, told twice.
DUPLICATE_WINDOW = timedelta(minutes=10)

SCHEMA = """
CREATE TABLE IF NOT EXISTS medication_log (
    entry_id       TEXT PRIMARY KEY,
    tenant         TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    medication     TEXT NOT NULL,
    dose           TEXT NOT NULL,
    taken_at       TEXT NOT NULL,
    taken_at_epoch INTEGER NOT NULL,
    recorded_at    TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    call_id        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS medication_log_by_owner
    ON medication_log (tenant, user_id, taken_at_epoch);
"""


class _Entry(NamedTuple):
    entry_id: str
    tenant: str
    user_id: str
    medication: str
    dose: str
    taken_at: datetime
    recorded_at: datetime
    session_id: str
    call_id: str


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    medication = args["medication"].strip()
    dose = args["dose"].strip()
    if not medication or not dose:
        return ToolResponse.failure(
            ToolErrorType.VALIDATION, "medication and dose must not be blank"
        )
    now = utc_now()
    taken_at = now
    if "taken_at" in args:
        # No default zone: guessing one could shift the dose by hours.
        taken_at = parse_datetime_arg("taken_at", args["taken_at"], default_zone=None)
        taken_at = taken_at.replace(microsecond=0)
        if taken_at > now + FUTURE_TOLERANCE:
            return ToolResponse.failure(
                ToolErrorType.VALIDATION,
                "taken_at is in the future; only doses already taken can be logged",
            )
        if taken_at < now - MAX_AGE:
            return ToolResponse.failure(
                ToolErrorType.VALIDATION,
                "taken_at is more than 7 days ago; check the date with the user",
            )
    entry = _Entry(
        entry_id=f"med_{uuid.uuid4().hex[:16]}",
        tenant=ctx.tenant or "",
        user_id=ctx.user_id,
        medication=medication,
        dose=dose,
        taken_at=taken_at,
        recorded_at=now,
        session_id=ctx.session_id,
        call_id=ctx.call_id,
    )
    duplicate = await run_in_transaction(
        ctx.data_dir / DB_NAME, SCHEMA, partial(_insert_unless_duplicate, entry=entry)
    )
    if duplicate is not None:
        return ToolResponse.failure(
            ToolErrorType.CONFLICT,
            # No medicine name here: error messages may reach logs, health data must not.
            f"the same medicine and dose is already logged at {duplicate}; not logged again",
        )
    return ToolResponse.success(
        {
            "entry_id": entry.entry_id,
            "medication": entry.medication,
            "dose": entry.dose,
            "taken_at": entry.taken_at.isoformat(),
        }
    )


def _insert_unless_duplicate(conn: sqlite3.Connection, entry: _Entry) -> str | None:
    """Insert the entry, or return the time of an existing entry it duplicates."""
    epoch = int(entry.taken_at.timestamp())
    window = int(DUPLICATE_WINDOW.total_seconds())
    # Names are compared without case: "Aspirin" and "aspirin" are the same medicine.
    row = conn.execute(
        "SELECT taken_at FROM medication_log"
        " WHERE tenant = ? AND user_id = ? AND lower(medication) = lower(?)"
        " AND lower(dose) = lower(?) AND taken_at_epoch BETWEEN ? AND ?"
        " ORDER BY taken_at_epoch LIMIT 1",
        (entry.tenant, entry.user_id, entry.medication, entry.dose, epoch - window, epoch + window),
    ).fetchone()
    if row is not None:
        existing: str = row[0]
        return existing
    conn.execute(
        "INSERT INTO medication_log (entry_id, tenant, user_id, medication, dose, taken_at,"
        " taken_at_epoch, recorded_at, session_id, call_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            entry.entry_id,
            entry.tenant,
            entry.user_id,
            entry.medication,
            entry.dose,
            entry.taken_at.isoformat(),
            epoch,
            entry.recorded_at.isoformat(),
            entry.session_id,
            entry.call_id,
        ),
    )
    return None
