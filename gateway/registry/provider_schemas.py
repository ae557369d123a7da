"""Provider declarations of one tool from its name, description and parameters schema.

Each shape is a ``DeclarationDialect``, and ``DIALECTS`` are all the shapes there are: OpenAI
Realtime takes a flat ``{type, name, description, parameters}``; Chat Completions nests it under
``function``; Gemini Live takes ``parametersJsonSchema``, and some Gemini models only take the
older ``types.Schema`` form (upper-case types, ``nullable``). The registry build writes every one
into the artifact (``providerSchemas``); a session builds the same for the tools its client
declares, so both are offered to a model in one shape. A provider's record
(``gateway.providers``) names the dialect its transport reads.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.registry.format import ANNOTATIONS, gemini_unsupported_keywords

__all__ = [
    "CONFIRMATION_ID_PROPERTY",
    "DIALECTS",
    "GEMINI",
    "GEMINI_SCHEMA",
    "OPENAI_CHAT",
    "OPENAI_REALTIME",
    "DeclarationDialect",
    "provider_schemas",
    "with_confirmation_id",
]

CONFIRMATION_ID_PROPERTY = "confirmation_id"


def with_confirmation_id(parameters: dict[str, Any]) -> dict[str, Any]:
    """The declared parameters plus the optional ``confirmation_id`` a model passes back."""
    out = copy.deepcopy(parameters)
    properties = out.setdefault("properties", {})
    properties[CONFIRMATION_ID_PROPERTY] = {
        "type": "string",
        "description": (
            "Only when calling again after the user said yes: the confirmationId of the "
            "CONFIRMATION_REQUIRED result, with the same arguments as before."
        ),
    }
    return out


def _strip_annotations(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_annotations(v) for k, v in schema.items() if k not in ANNOTATIONS}
    if isinstance(schema, list):
        return [_strip_annotations(v) for v in schema]
    return schema


def _to_gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema → the ``types.Schema`` dict form: upper-case types, nullable unions."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            types = value if isinstance(value, list) else [value]
            concrete = [t for t in types if t != "null"]
            if len(concrete) < len(types):
                out["nullable"] = True
            if len(concrete) == 1:
                out["type"] = str(concrete[0]).upper()
            elif concrete:
                out["anyOf"] = [{"type": str(t).upper()} for t in concrete]
        elif key == "properties":
            out["properties"] = {n: _to_gemini_schema(s) for n, s in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _to_gemini_schema(value)
        elif key == "anyOf":
            out["anyOf"] = [_to_gemini_schema(s) for s in value]
        elif key == "$defs":
            out["defs"] = {n: _to_gemini_schema(s) for n, s in value.items()}
        elif key == "$ref":
            out["ref"] = value
        elif key == "examples":
            if value:
                out["example"] = value[0]
        else:
            out[key] = value
    return out


def _expresses_everything(parameters: dict[str, Any]) -> list[str]:
    return []


Declare = Callable[[str, str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class DeclarationDialect:
    """One shape of a tool's declaration: ``key`` names it in ``providerSchemas``, ``declare``
    makes it from a tool's name, description and (annotation-free) parameters, and
    ``unsupported`` lists what of a parameters schema it cannot express (``title`` says whose
    limits those are, in a refusal)."""

    key: str
    title: str
    declare: Declare
    unsupported: Callable[[dict[str, Any]], list[str]] = _expresses_everything


OPENAI_REALTIME = DeclarationDialect(
    "openaiRealtime",
    "OpenAI Realtime",
    lambda name, description, declared: {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": declared,
    },
)
OPENAI_CHAT = DeclarationDialect(
    "openaiChat",
    "Chat Completions",
    lambda name, description, declared: {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": declared},
    },
)
GEMINI = DeclarationDialect(
    "gemini",
    "Gemini",
    lambda name, description, declared: {
        "name": name,
        "description": description,
        "parametersJsonSchema": declared,
    },
    gemini_unsupported_keywords,
)
GEMINI_SCHEMA = DeclarationDialect(
    "geminiSchema",
    "Gemini",
    lambda name, description, declared: {
        "name": name,
        "description": description,
        "parameters": _to_gemini_schema(declared),
    },
    gemini_unsupported_keywords,
)
DIALECTS = (OPENAI_REALTIME, OPENAI_CHAT, GEMINI, GEMINI_SCHEMA)


def provider_schemas(
    tool_id: str, description: str, parameters: dict[str, Any], confirmable: bool
) -> dict[str, Any]:
    """Every dialect's declaration of one tool, by key."""
    declared = _strip_annotations(parameters)
    if confirmable:
        declared = with_confirmation_id(declared)
    return {dialect.key: dialect.declare(tool_id, description, declared) for dialect in DIALECTS}
