"""Helpers shared by the bundled tool handlers: time arguments and small SQLite stores.

Not a tool folder (the leading underscore keeps the registry build out). Like ``tools._core``,
nothing in here imports the gateway.
"""

from tools._support.sqlite_store import run_in_transaction
from tools._support.time_args import (
    format_utc_offset,
    parse_datetime_arg,
    resolve_zone,
    utc_now,
)

__all__ = [
    "format_utc_offset",
    "parse_datetime_arg",
    "resolve_zone",
    "run_in_transaction",
    "utc_now",
]
