"""What the runner hands back: the envelope for the model and the views for client and logs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.toolrun.audit import AuditDecision
from tools._core import ToolResponse

__all__ = ["CallOutcome", "Caller", "ToolCall"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call as the provider made it; ``arguments`` is a JSON string or an object."""

    call_id: str
    tool_id: str
    arguments: str | bytes | Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Caller:
    """The session-level facts a call runs under."""

    session_id: str
    user_id: str
    roles: tuple[str, ...]
    mode: Literal["voice", "text"]
    turn: int = 0
    auth_token: str | None = field(default=None, repr=False)
    tenant: str | None = None
    # With tracing on, the span the call's span belongs under (the turn's); None off.
    trace_parent: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class CallOutcome:
    call: ToolCall
    response: ToolResponse
    # The whole envelope with meta: exactly what the model receives.
    envelope: dict[str, Any]
    # ``data`` projected through the allowlist: all the client and the logs ever see of it.
    client_data: dict[str, Any]
    # Parsed arguments (None when they did not parse), without ``confirmation_id``.
    arguments: dict[str, Any] | None
    duration_ms: float
    decision: AuditDecision
    # The same call id was delivered again: the result already went (or goes) out once.
    duplicate: bool = False
    # The provider cancelled the call: its result must not be sent upstream.
    cancelled: bool = False
    # Refused: its id was an earlier call's of another tool. The answer is not that call's
    # result (the ledger's), so it goes to the model whatever the ledger says of the id.
    reused_id: bool = False

    @property
    def ok(self) -> bool:
        return self.response.ok

    @property
    def error_type(self) -> str | None:
        return None if self.response.error is None else self.response.error.type.value

    def tool_finished_fields(self) -> dict[str, Any]:
        """The fields of the client's ``tool.finished`` event (docs/protocol.md section 6)."""
        fields: dict[str, Any] = {
            "call_id": self.call.call_id,
            "name": self.call.tool_id,
            "ok": self.response.ok,
            "duration_ms": round(self.duration_ms, 1),
            "intents": self.response.intent_names,
        }
        if self.response.ok:
            fields["data"] = self.client_data
        else:
            assert self.response.error is not None
            fields["error"] = {
                "type": self.response.error.type.value,
                "message": self.response.error.message,
            }
        return fields
