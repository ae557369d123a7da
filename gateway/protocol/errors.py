"""Error codes of the client protocol and the one exception this package raises.

Every problem the client may hear about has a code from docs/protocol.md section 6 (extensions:
10.2, 10.16) and travels as a :class:`ProtocolError` until the session turns it into an
``error`` event::

    GatewayError (gateway.errors)
     └── ProtocolError            code, message, event_id, retryable, fatal
           raised by decode_text / decode_binary for the peer's mistakes
           (invalid_json, invalid_event, unknown_event, invalid_audio, payload_too_large)
           and by event constructors for values that break the protocol's rules;
           the session raises it with the other codes (not_started, forbidden, …).

Decoding never raises anything else: a frame is either an event or a ProtocolError.
"""

from __future__ import annotations

from enum import StrEnum

from gateway.errors import GatewayError

__all__ = ["ErrorCode", "ProtocolError"]


class ErrorCode(StrEnum):
    """The ``code`` of an ``error`` event (docs/protocol.md section 6; extensions 10.2, 10.16)."""

    INVALID_JSON = "invalid_json"
    INVALID_EVENT = "invalid_event"
    UNKNOWN_EVENT = "unknown_event"
    INVALID_AUDIO = "invalid_audio"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    NOT_STARTED = "not_started"
    ALREADY_STARTED = "already_started"
    SESSION_START_TIMEOUT = "session_start_timeout"
    FORBIDDEN = "forbidden"
    RATE_LIMITED = "rate_limited"
    CONFIRMATION_NOT_FOUND = "confirmation_not_found"
    CONFIRMATION_EXPIRED = "confirmation_expired"
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    UPSTREAM_ERROR = "upstream_error"
    RESUME_FAILED = "resume_failed"
    INTERNAL = "internal"
    # Extension: the shared store (Redis) cannot be reached; retry shortly.
    STORE_UNAVAILABLE = "store_unavailable"
    # Extension: a client_tool.output whose call id no call waits on (unknown, answered,
    # expired or cancelled).
    TOOL_CALL_NOT_FOUND = "tool_call_not_found"
    # Extension (docs/keys.md): a limit of the key, user or team has run out.
    BUDGET_EXHAUSTED = "budget_exhausted"


# Defaults when the raiser does not say: waiting helps only against load and outages, and the
# only code that always ends the session is the start timeout (the socket closes with 1008).
_RETRYABLE_BY_DEFAULT = frozenset(
    {ErrorCode.RATE_LIMITED, ErrorCode.UPSTREAM_UNAVAILABLE, ErrorCode.STORE_UNAVAILABLE}
)
_FATAL_BY_DEFAULT = frozenset({ErrorCode.SESSION_START_TIMEOUT})


class ProtocolError(GatewayError):
    """A problem to report to the client as an ``error`` event.

    ``event_id`` is the ``event_id`` of the client event that caused it, when it was readable.
    ``retryable`` and ``fatal`` default per code (rate_limited and upstream_unavailable are
    retryable; session_start_timeout is fatal); pass them to override.
    """

    code: ErrorCode
    message: str
    event_id: str | None
    retryable: bool
    fatal: bool

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        event_id: str | None = None,
        retryable: bool | None = None,
        fatal: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.event_id = event_id
        self.retryable = self.code in _RETRYABLE_BY_DEFAULT if retryable is None else retryable
        self.fatal = self.code in _FATAL_BY_DEFAULT if fatal is None else fatal

    def __repr__(self) -> str:
        return (
            f"ProtocolError(code={self.code.value!r}, message={self.message!r}, "
            f"event_id={self.event_id!r}, retryable={self.retryable}, fatal={self.fatal})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only arguments defeat Exception's default pickling (used by multiprocessing).
        return (
            _rebuild_protocol_error,
            (self.code, self.message, self.event_id, self.retryable, self.fatal),
        )


def _rebuild_protocol_error(
    code: ErrorCode, message: str, event_id: str | None, retryable: bool, fatal: bool
) -> ProtocolError:
    return ProtocolError(code, message, event_id=event_id, retryable=retryable, fatal=fatal)
