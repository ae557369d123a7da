"""``python tests/clocked_gateway.py``: ``gateway serve`` with a clock a test moves, for budget
windows across real processes ("the next UTC day"): its wall time is the system's plus the
seconds written in the file ``TEST_CLOCK_FILE`` (read again at most every 50 ms; absent or
empty: no offset). Its monotonic time is the system's: only the calendar moves."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.app import serve
from gateway.config import Settings
from gateway.observability import configure_logging

CLOCK_ENV = "TEST_CLOCK_FILE"
REREAD_S = 0.05


class FileOffsetClock:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0.0
        self._read_at = float("-inf")

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        at = time.monotonic()
        if at - self._read_at >= REREAD_S:
            self._read_at = at
            try:
                self._offset = float(self._path.read_text().strip() or 0)
            except (OSError, ValueError):
                self._offset = 0.0
        return datetime.now(UTC) + timedelta(seconds=self._offset)


def main() -> None:
    settings = Settings.load()
    configure_logging(settings.log_format, settings.log_level)
    clock = FileOffsetClock(Path(os.environ[CLOCK_ENV]))
    asyncio.run(serve(settings, clock=clock))


if __name__ == "__main__":
    main()
