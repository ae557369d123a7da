"""The example care API's appointment book: pure state and rules, no I/O.

Each patient (the ``sub`` of the caller's token) gets three appointments the first time they are
seen, relative to ``today``: a home visit tomorrow at 10:00, a physiotherapy session in three days
at 14:30 and a check-up in eight days at 09:00 (UTC), numbered ``A1001`` on. A patient sees and
moves only their own appointments (another patient's is "not found", as a careful API answers).

Answers are ``(status, JSON body)``, with the errors a real API gives: 422 with a ``message`` for
arguments it refuses, 404 for an unknown appointment, 409 for a time that overlaps another
appointment of the patient or an appointment that is cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

__all__ = ["Answer", "Appointment", "AppointmentBook"]

Answer = tuple[int, dict[str, Any]]

_SEEDS = (  # days from today, start time, minutes, kind, caregiver
    (1, time(10, 0), 60, "home visit", "Maria Lopez"),
    (3, time(14, 30), 45, "physiotherapy", "Tom Becker"),
    (8, time(9, 0), 30, "check-up", "Dr. Anna Sato"),
)
_OPEN_FROM, _OPEN_UNTIL = time(8, 0), time(18, 0)
_STATUSES = ("scheduled", "cancelled")


@dataclass(frozen=True)
class Appointment:
    id: str
    patient: str
    start: datetime
    duration_minutes: int
    kind: str
    caregiver: str
    status: str = "scheduled"
    note: str = ""  # the office's internal note: an API returns more than a tool should show

    @property
    def end(self) -> datetime:
        return self.start + timedelta(minutes=self.duration_minutes)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "patient": self.patient,
            "start": self.start.isoformat(),
            "durationMinutes": self.duration_minutes,
            "kind": self.kind,
            "caregiver": self.caregiver,
            "status": self.status,
            "internalNote": self.note,
        }


def _refused(message: str, field: str) -> Answer:
    return 422, {"error": "validation_failed", "field": field, "message": message}


def _date(value: str | None, field: str) -> date | Answer | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return _refused(f"{field} must be a date (YYYY-MM-DD), not {value[:40]!r}", field)


class AppointmentBook:
    def __init__(self, today: date) -> None:
        self.today = today
        self._appointments: dict[str, Appointment] = {}
        self._patients: set[str] = set()
        self._next = 1001

    def _seed(self, patient: str) -> None:
        if patient in self._patients:
            return
        self._patients.add(patient)
        for days, at, minutes, kind, caregiver in _SEEDS:
            start = datetime.combine(self.today + timedelta(days=days), at, UTC)
            number = f"A{self._next}"
            self._next += 1
            note = f"key safe code on file for {patient}"
            self._appointments[number] = Appointment(
                number, patient, start, minutes, kind, caregiver, note=note
            )

    def _own(self, patient: str, appointment_id: str) -> Appointment | None:
        self._seed(patient)
        found = self._appointments.get(appointment_id)
        return found if found is not None and found.patient == patient else None

    def search(
        self,
        patient: str,
        from_date: str | None = None,
        to_date: str | None = None,
        status: str | None = None,
    ) -> Answer:
        self._seed(patient)
        first = _date(from_date, "from_date")
        last = _date(to_date, "to_date")
        for parsed in (first, last):
            if isinstance(parsed, tuple):
                return parsed
        if isinstance(first, date) and isinstance(last, date) and first > last:
            return _refused("from_date must not be after to_date", "from_date")
        if status is not None and status not in _STATUSES:
            return _refused(f"status must be one of {', '.join(_STATUSES)}", "status")
        found = [
            a
            for a in sorted(self._appointments.values(), key=lambda a: a.start)
            if a.patient == patient
            and (not isinstance(first, date) or a.start.date() >= first)
            and (not isinstance(last, date) or a.start.date() <= last)
            and (status is None or a.status == status)
        ]
        return 200, {"appointments": [a.to_json() for a in found], "count": len(found)}

    def get(self, patient: str, appointment_id: str) -> Answer:
        found = self._own(patient, appointment_id)
        if found is None:
            return 404, {"error": "not_found", "message": f"no appointment {appointment_id[:40]}"}
        return 200, found.to_json()

    def reschedule(self, patient: str, appointment_id: str, body: Any) -> Answer:
        found = self._own(patient, appointment_id)
        if found is None:
            return 404, {"error": "not_found", "message": f"no appointment {appointment_id[:40]}"}
        if not isinstance(body, dict) or not isinstance(body.get("start"), str):
            return _refused("start is required: an ISO 8601 date and time", "start")
        reason = body.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > 200):
            return _refused("reason must be a text of at most 200 characters", "reason")
        try:
            start = datetime.fromisoformat(body["start"])
        except ValueError:
            return _refused("start must be an ISO 8601 date and time", "start")
        if start.tzinfo is None:
            return _refused("start needs a UTC offset, e.g. +01:00", "start")
        start = start.astimezone(UTC)
        if start.date() <= self.today:
            return _refused("start must be a day after today", "start")
        if start.minute not in (0, 30) or start.second or start.microsecond:
            return _refused("start must be on the hour or the half hour", "start")
        end = start + timedelta(minutes=found.duration_minutes)
        if start.time() < _OPEN_FROM or end.time() > _OPEN_UNTIL or end.date() != start.date():
            return _refused("visits take place between 08:00 and 18:00 UTC", "start")
        if found.status == "cancelled":
            return 409, {"error": "conflict", "message": f"appointment {found.id} is cancelled"}
        for other in self._appointments.values():
            if (
                other.id != found.id
                and other.patient == patient
                and other.status == "scheduled"
                and other.start < end
                and start < other.end
            ):
                return 409, {
                    "error": "conflict",
                    "message": f"the new time overlaps appointment {other.id} "
                    f"({other.kind} at {other.start.isoformat()})",
                }
        moved = replace(found, start=start)
        self._appointments[found.id] = moved
        return 200, moved.to_json()

    def cancel(self, appointment_id: str) -> None:
        """Test setup: mark an appointment cancelled."""
        found = self._appointments[appointment_id]
        self._appointments[appointment_id] = replace(found, status="cancelled")
