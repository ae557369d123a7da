"""What the build derives from one tool's metadata: its description for the model, whether it
needs confirmation, and its provider declarations (``provider_schemas``, which lives in
``gateway.registry.provider_schemas``: a session builds the same for the tools its client
declares). Gemini understands a subset of JSON Schema, so a keyword outside that subset is a build
error rather than a surprise at runtime.
"""

from __future__ import annotations

from typing import Any

from gateway.registry.format import gemini_unsupported_keywords
from gateway.registry.provider_schemas import (
    CONFIRMATION_ID_PROPERTY,
    provider_schemas,
    with_confirmation_id,
)

__all__ = [
    "CONFIRMATION_ID_PROPERTY",
    "describe_for_model",
    "gemini_unsupported_keywords",
    "needs_confirmation",
    "provider_schemas",
    "with_confirmation_id",
]


def needs_confirmation(meta: dict[str, Any]) -> bool:
    return bool(meta.get("requiresConfirmation")) or meta.get("sensitivity") == "critical"


def describe_for_model(summary: str, safety_rules: list[str]) -> str:
    if not safety_rules:
        return summary
    rules = " ".join(f"Safety: {rule.strip()}" for rule in safety_rules)
    return f"{summary}\n{rules}"
