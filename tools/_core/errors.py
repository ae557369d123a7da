"""Tool error types (docs/tools.md section 5) and the exception handlers raise.

Who produces which type::

    registry / runner   VALIDATION, NOT_FOUND, INTERNAL, TIMEOUT
    orchestrator        MODE_RESTRICTED, BUDGET_EXCEEDED, CONFIRMATION_REQUIRED, FORBIDDEN,
                        INTENT_NOT_EXPLICIT
    handler             SESSION_INACTIVE, TRANSIENT, PERMANENT, CONFLICT, AUTH, RATE_LIMIT

A handler either returns a failure envelope or raises ``ToolError``; the runner turns the
exception into the same envelope. Any other exception becomes ``INTERNAL`` and its text is
never shown to the model, the client or the logs. The exceptions of the tool layer::

    ToolError                 a typed failure, its message safe to show the model
    └── EnvelopeError         a handler returned something that is not an envelope (INTERNAL;
                              also a ValueError; ``tools._core.envelope``)
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["HANDLER_ERROR_TYPES", "PRE_EXECUTION_ERROR_TYPES", "ToolError", "ToolErrorType"]


class ToolErrorType(StrEnum):
    VALIDATION = "VALIDATION"
    NOT_FOUND = "NOT_FOUND"
    INTERNAL = "INTERNAL"
    TIMEOUT = "TIMEOUT"
    MODE_RESTRICTED = "MODE_RESTRICTED"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
    FORBIDDEN = "FORBIDDEN"
    INTENT_NOT_EXPLICIT = "INTENT_NOT_EXPLICIT"
    SESSION_INACTIVE = "SESSION_INACTIVE"
    TRANSIENT = "TRANSIENT"
    PERMANENT = "PERMANENT"
    CONFLICT = "CONFLICT"
    AUTH = "AUTH"
    RATE_LIMIT = "RATE_LIMIT"


# Errors decided before a handler runs: never retryable, never with side effects.
PRE_EXECUTION_ERROR_TYPES = frozenset(
    {
        ToolErrorType.VALIDATION,
        ToolErrorType.NOT_FOUND,
        ToolErrorType.MODE_RESTRICTED,
        ToolErrorType.BUDGET_EXCEEDED,
        ToolErrorType.CONFIRMATION_REQUIRED,
        ToolErrorType.FORBIDDEN,
        ToolErrorType.INTENT_NOT_EXPLICIT,
    }
)

HANDLER_ERROR_TYPES = frozenset(
    {
        ToolErrorType.SESSION_INACTIVE,
        ToolErrorType.TRANSIENT,
        ToolErrorType.PERMANENT,
        ToolErrorType.CONFLICT,
        ToolErrorType.AUTH,
        ToolErrorType.RATE_LIMIT,
    }
)


class ToolError(Exception):
    """Raised by a handler to fail with a typed error whose message is safe to show the model."""

    def __init__(
        self,
        type: ToolErrorType | str,
        message: str,
        *,
        retryable: bool = False,
        partial_side_effects: bool = False,
    ) -> None:
        super().__init__(message)
        self.type = ToolErrorType(type)
        self.message = message
        self.retryable = retryable
        self.partial_side_effects = partial_side_effects
