"""Turn the model's time arguments (IANA zone names, ISO 8601 strings) into aware datetimes.

Every failure is a ``ToolError(VALIDATION)`` whose message tells the model how to fix the call,
because a wrong zone or date format is something the model can correct on its own.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools._core import ToolError, ToolErrorType

__all__ = ["format_utc_offset", "parse_datetime_arg", "resolve_zone", "utc_now"]

# Echoed user input is cut to this length so a long argument cannot flood the model's context.
_ECHO_LIMIT = 64


def resolve_zone(name: str) -> ZoneInfo:
    """The zone for an IANA name such as ``Europe/Paris``; VALIDATION error if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # ValueError: keys like "../x" or a file that is not TZif; OSError: unreadable path.
        raise ToolError(
            ToolErrorType.VALIDATION,
            f"unknown timezone {name[:_ECHO_LIMIT]!r}: use an IANA name such as "
            "'Europe/Paris', 'America/New_York' or 'UTC'",
        ) from None


def parse_datetime_arg(name: str, text: str, default_zone: tzinfo | None) -> datetime:
    """Parse an ISO 8601 argument; a value without offset is read in ``default_zone``.

    With ``default_zone=None`` an offset is mandatory (there is no safe zone to assume).
    """
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(
            ToolErrorType.VALIDATION,
            f"{name} {text[:_ECHO_LIMIT]!r} is not an ISO 8601 date-time; "
            "use a form such as 2025-03-14T15:30:00+01:00",
        ) from None
    if value.tzinfo is None or value.utcoffset() is None:
        if default_zone is None:
            raise ToolError(
                ToolErrorType.VALIDATION,
                f"{name} must include a UTC offset, e.g. 2025-03-14T08:00:00+01:00",
            )
        value = value.replace(tzinfo=default_zone)
    return value


def format_utc_offset(value: datetime) -> str:
    """``+05:30`` style offset of an aware datetime (``+00:00`` for UTC)."""
    offset = value.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def utc_now() -> datetime:
    """Current time, aware, in UTC, to the second (stored values never carry microseconds)."""
    return datetime.now(UTC).replace(microsecond=0)
