"""Our own meta-schema for the orchestration metadata of ``schema.json`` (TOOLS.md section 1).

``parameters`` is only required to be an object here; it is checked separately against the JSON
Schema 2020-12 meta-schema, so its errors name the JSON Schema rule that failed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOOL_ID_PATTERN", "TOOL_METADATA_SCHEMA"]

TOOL_ID_PATTERN = r"^[a-z][a-z0-9_]{1,63}$"

_STRING_LIST: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "uniqueItems": True,
}

TOOL_METADATA_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "toolId",
        "category",
        "sensitivity",
        "requiresConfirmation",
        "modes",
        "resultAllowlist",
        "parameters",
    ],
    "properties": {
        "toolId": {"type": "string", "pattern": TOOL_ID_PATTERN},
        "category": {"enum": ["retrieval", "action", "utility"]},
        "sensitivity": {"enum": ["low", "medium", "high", "critical"]},
        "requiresConfirmation": {"type": "boolean"},
        "modes": {
            "type": "array",
            "items": {"enum": ["voice", "text"]},
            "minItems": 1,
            "uniqueItems": True,
        },
        "timeoutMs": {"type": "integer", "minimum": 1, "maximum": 600_000},
        "resultAllowlist": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$"},
            "uniqueItems": True,
        },
        "intentKeywords": _STRING_LIST,
        "permissions": _STRING_LIST,
        "idempotent": {"type": "boolean"},
        "cacheTtlS": {"type": "integer", "minimum": 1, "maximum": 86_400},
        "dependsOn": {
            "type": "array",
            "items": {"type": "string", "pattern": TOOL_ID_PATTERN},
            "uniqueItems": True,
        },
        "safetyRules": _STRING_LIST,
        # Argument names shown as "[redacted]" to clients and never logged (an extension).
        "secretArguments": _STRING_LIST,
        # "background": the call is answered at once ("started"); its work goes on and its
        # result enters the conversation when ready, as ``delivery`` says (an extension).
        "execution": {"enum": ["blocking", "background"]},
        "delivery": {"enum": ["interrupt", "when_idle", "silent"]},
        "parameters": {"type": "object"},
    },
}
