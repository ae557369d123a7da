"""Pure policy: what to do with tool calls, confirmations and intents. No I/O in here."""

from gateway.orchestrator.confirmations import (
    ConfirmationBook,
    ConfirmationLookup,
    LookupResult,
    PendingConfirmation,
)
from gateway.orchestrator.decide import (
    CallPolicy,
    Execute,
    Refuse,
    availability_refusal,
    count_execution,
    decide_call,
    has_explicit_intent,
    redacted,
)
from gateway.orchestrator.intents import IntentState
from gateway.orchestrator.turns import TurnState

__all__ = [
    "CallPolicy",
    "ConfirmationBook",
    "ConfirmationLookup",
    "Execute",
    "IntentState",
    "LookupResult",
    "PendingConfirmation",
    "Refuse",
    "TurnState",
    "availability_refusal",
    "count_execution",
    "decide_call",
    "has_explicit_intent",
    "redacted",
]
