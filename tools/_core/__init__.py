"""Runtime pieces that tool handlers import.

Nothing in here imports the gateway: a tool folder may live anywhere and depend only on this.
"""

from tools._core.context import ToolCatalog, ToolContext
from tools._core.envelope import (
    ENVELOPE_VERSION,
    EnvelopeError,
    ToolFailure,
    ToolResponse,
    normalize_envelope,
)
from tools._core.errors import ToolError, ToolErrorType
from tools._core.intents import (
    EndVoiceSession,
    Intent,
    IntentType,
    SetPendingMessage,
    SuppressAudio,
    SuppressTranscript,
    intent_from_dict,
)

__all__ = [
    "ENVELOPE_VERSION",
    "EndVoiceSession",
    "EnvelopeError",
    "Intent",
    "IntentType",
    "SetPendingMessage",
    "SuppressAudio",
    "SuppressTranscript",
    "ToolCatalog",
    "ToolContext",
    "ToolError",
    "ToolErrorType",
    "ToolFailure",
    "ToolResponse",
    "intent_from_dict",
    "normalize_envelope",
]
