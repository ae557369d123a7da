"""Our own meta-schema for the orchestration metadata of ``schema.json`` (docs/tools.md section 2).

``parameters`` is only required to be an object here; it is checked separately against the JSON
Schema 2020-12 meta-schema, so its errors name the JSON Schema rule that failed. The shape of
the ``http`` section of an HTTP tool is checked here; what it says about the arguments (every
placeholder declared, every argument sent once) in ``registry_build.http_checks``.
"""

from __future__ import annotations

from typing import Any

from gateway.http_tools.section import (
    DEFAULT_MAX_RESPONSE_BYTES,
    HTTP_METHODS,
    MAX_RESPONSE_BYTES_CAP,
)
from gateway.registry.format import TOOL_ID_PATTERN

__all__ = ["ENV_NAME_PATTERN", "HTTP_SECTION_SCHEMA", "TOOL_ID_PATTERN", "TOOL_METADATA_SCHEMA"]

ENV_NAME_PATTERN = r"^[A-Z][A-Z0-9_]{0,127}$"

_STRING_LIST: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "uniqueItems": True,
}

# An HTTP tool: the request its arguments become (README "Tools", "HTTP tools").
HTTP_SECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["method", "path", "baseUrlEnv"],
    "properties": {
        "method": {"enum": list(HTTP_METHODS)},
        # Appended to the base URL; ``{name}`` placeholders are filled with arguments.
        "path": {"type": "string", "pattern": "^/", "maxLength": 2000},
        "query": _STRING_LIST,  # argument names
        "body": _STRING_LIST,
        "baseUrlEnv": {"type": "string", "pattern": ENV_NAME_PATTERN},
        "auth": {
            "anyOf": [
                {"const": "user"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["serviceTokenEnv"],
                    "properties": {
                        "serviceTokenEnv": {"type": "string", "pattern": ENV_NAME_PATTERN}
                    },
                },
            ]
        },
        "maxResponseBytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RESPONSE_BYTES_CAP,
            "default": DEFAULT_MAX_RESPONSE_BYTES,
        },
    },
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
        # Present: an HTTP tool (no handler.py); the gateway makes the request itself.
        "http": HTTP_SECTION_SCHEMA,
    },
}
