"""Why a ``session.start`` (or a resume) is refused: ``StartRefused`` carries the ``error`` event
for the client (and, when the refusal ends the connection, the ``session.ended`` after it)."""

from __future__ import annotations

from gateway.errors import ClientError
from gateway.protocol import ErrorCode, ErrorEvent, SessionEnded

__all__ = ["StartRefused", "store_unavailable"]


class StartRefused(ClientError):
    """``session.start`` (or a resume) cannot be honoured; ``event`` tells the client why."""

    def __init__(self, event: ErrorEvent, *, ended: SessionEnded | None = None) -> None:
        super().__init__(event.message)
        self.event = event
        # Sent after the error when the refusal ends the connection (upstream unavailable).
        self.ended = ended

    @property
    def fatal(self) -> bool:
        return self.event.fatal


def store_unavailable(event_id: str | None) -> StartRefused:
    return StartRefused(
        ErrorEvent(
            code=ErrorCode.STORE_UNAVAILABLE,
            message="the gateway's shared store cannot be reached; try again shortly",
            retryable=True,
            event_id=event_id,
        )
    )
