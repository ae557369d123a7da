"""The close action shared by the fake servers' pure protocol code (no I/O, no aiohttp)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLOSE_REASON_MAX_BYTES", "Close"]

CLOSE_REASON_MAX_BYTES = 123  # RFC 6455: the reason fits in a control frame


@dataclass(frozen=True, slots=True)
class Close:
    code: int
    reason: str

    def __post_init__(self) -> None:
        if len(self.reason.encode()) > CLOSE_REASON_MAX_BYTES:
            raise ValueError("a close reason holds at most 123 bytes")
