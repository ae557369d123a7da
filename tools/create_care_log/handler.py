"""create_care_log: save a caregiver's note about a patient in the care record.

Entries live in ``<data_dir>/care.sqlite``, table ``care_log``, with the author's user id.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

from tools._core import ToolContext, ToolErrorType, ToolResponse
from tools._support import run_in_transaction, utc_now

DB_NAME = "care.sqlite"
# Mirrors "permissions" in schema.json. The orchestrator enforces it; the handler checks again
# because this tool writes to the care record and may be run by code other than the gateway.
ALLOWED_ROLES = frozenset({"caregiver", "admin"})
SEVERITIES = ("low", "medium", "high")

SCHEMA = """
CREATE TABLE IF NOT EXISTS care_log (
    log_id         TEXT PRIMARY KEY,
    tenant         TEXT NOT NULL,
    patient_id     TEXT NOT NULL,
    author_user_id TEXT NOT NULL,
    severity       TEXT NOT NULL CHECK (severity IN ('low', 'medium', 'high')),
    note           TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    call_id        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS care_log_by_patient ON care_log (tenant, patient_id, created_at);
"""


class _CareLog(NamedTuple):
    log_id: str
    tenant: str
    patient_id: str
    author_user_id: str
    severity: str
    note: str
    created_at: datetime
    session_id: str
    call_id: str


async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    if ALLOWED_ROLES.isdisjoint(ctx.roles):
        return ToolResponse.failure(
            ToolErrorType.FORBIDDEN, "only caregivers and admins can write care logs"
        )
    note = args["note"].strip()
    if not note:
        return ToolResponse.failure(ToolErrorType.VALIDATION, "note must not be blank")
    if args["severity"] not in SEVERITIES:
        return ToolResponse.failure(
            ToolErrorType.VALIDATION, "severity must be one of: low, medium, high"
        )
    entry = _CareLog(
        log_id=f"care_{uuid.uuid4().hex[:16]}",
        tenant=ctx.tenant or "",
        patient_id=args["patient_id"],
        author_user_id=ctx.user_id,
        severity=args["severity"],
        note=note,
        created_at=utc_now(),
        session_id=ctx.session_id,
        call_id=ctx.call_id,
    )
    await run_in_transaction(ctx.data_dir / DB_NAME, SCHEMA, partial(_insert, entry=entry))
    return ToolResponse.success(
        {
            "log_id": entry.log_id,
            "patient_id": entry.patient_id,
            "severity": entry.severity,
            "created_at": entry.created_at.isoformat(),
        }
    )


def _insert(conn: sqlite3.Connection, entry: _CareLog) -> None:
    conn.execute(
        "INSERT INTO care_log (log_id, tenant, patient_id, author_user_id, severity, note,"
        " created_at, session_id, call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            entry.log_id,
            entry.tenant,
            entry.patient_id,
            entry.author_user_id,
            entry.severity,
            entry.note,
            entry.created_at.isoformat(),
            entry.session_id,
            entry.call_id,
        ),
    )
